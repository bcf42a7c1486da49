"""``sim_robot``: a simulated robot that runs ``RunTrial`` goals with known success rates (demos, tests).

Outcomes are a pure function of ``(seed, session_id, policy_id, trial_id)``; docs/nodes.md.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections import Counter
from typing import NamedTuple

import numpy as np
import rclpy
from evalstop.action import RunTrial
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.parameter import Parameter

from ..hub.sim_address import sim_address_rate
from ..runner.errors import Category, RunnerError, new_error_id, operator_message
from ..runner.trials import GoalOpener
from ._common import declare, spin_node
from .quick_log import QuickNode
from .realtime import declare_thread_priority

__all__ = ["Outcome", "SimRobot", "main", "simulate_outcome"]

#: Feedback messages per rollout (besides the final "done").
FEEDBACK_STEPS = 5
#: Longest sleep of a rollout between two looks at its goal's cancel request and the context (s).
WAKE_PERIOD = 0.05
#: Mean progress of a failed rollout of a ``sim://success=P`` policy address.
SIM_PROGRESS_MEAN = 0.4


class Outcome(NamedTuple):
    """One simulated rollout's score."""

    success: bool
    progress: float


def _rng(*keys: int | str) -> np.random.Generator:
    """A generator seeded by ``keys`` (strings hashed with CRC-32, which is stable across runs)."""
    return np.random.default_rng([k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys])


def simulate_outcome(
    seed: int, session_id: str, policy_id: str, trial_id: int, *,
    success_rate: float, progress_mean: float, concentration: float,
) -> Outcome:
    """Score of one simulated rollout; the same arguments always give the same outcome.

    Success is Bernoulli(``success_rate``); a success has progress 1, a failure has progress
    Beta(``progress_mean * concentration``, ``(1 - progress_mean) * concentration``), i.e.
    mean ``progress_mean``.

    :param seed: The node's ``seed`` parameter.
    :param session_id: Session of the goal (different sessions get different outcomes).
    :param policy_id: Policy of the goal.
    :param trial_id: Trial of the goal.
    :param success_rate: Success probability of ``policy_id``, in [0, 1].
    :param progress_mean: Mean progress of a failed rollout, in (0, 1).
    :param concentration: Beta concentration (> 0): larger means less spread.
    :returns: The rollout's :class:`Outcome`.

    >>> draw = dict(success_rate=0.5, progress_mean=0.4, concentration=8.0)
    >>> simulate_outcome(1, "s", "pi0", 3, **draw) == simulate_outcome(1, "s", "pi0", 3, **draw)
    True
    >>> simulate_outcome(1, "s", "pi0", 3, success_rate=1.0, progress_mean=0.4, concentration=8.0)
    Outcome(success=True, progress=1.0)
    """
    rng = _rng(seed, session_id, policy_id, trial_id)
    success = bool(rng.random() < success_rate)
    partial = float(rng.beta(progress_mean * concentration, (1.0 - progress_mean) * concentration))
    return Outcome(success, 1.0 if success else partial)


class SimRobot(QuickNode):
    """``RunTrial`` action server simulating policies with given success rates."""

    def __init__(self) -> None:
        super().__init__("sim_robot")
        declare_thread_priority(self)
        self.action_name: str = declare(
            self, "action_name", "run_trial", "Name of the RunTrial action served.", read_only=True)
        self.seed: int = declare(
            self, "seed", 0, "Seed of the simulated outcomes (with session, policy and trial id).")
        self.policies: list[str] = list(declare(
            self, "policies", ["policy_a", "policy_b"], "Policy ids this robot can run."))
        self.success_rates: list[float] = list(declare(
            self, "success_rates", [0.5, 0.8], "Success probability of each policy in `policies`, in [0, 1]."))
        self.progress_means: list[float] = list(declare(
            self, "progress_means", [0.4, 0.4],
            "Mean progress of a FAILED rollout of each policy, in (0, 1) (a success has progress 1)."))
        self.progress_concentration: float = declare(
            self, "progress_concentration", 8.0,
            "Beta concentration of the progress of a failed rollout (> 0; larger = less spread).")
        self.duration: float = declare(
            self, "duration", 0.05, "Simulated rollout duration (s).")
        self.success_duration: float = declare(
            self, "success_duration", -1.0, "Duration (s) of a rollout that succeeds, which ends at once as "
            "with end_on_success (durations that depend on the outcome); < 0: `duration`.", read_only=True)
        self.failure_probability: float = declare(
            self, "failure_probability", 0.0,
            "Probability that a rollout fails to run (result ok=false, injected runner fault), in [0, 1].")
        self.auto_score: bool = declare(
            self, "auto_score", True, "Return the rollout's score in the result (auto_scored=true).")
        self.log_policy_ids: bool = declare(
            self, "log_policy_ids", False,
            "Name the policy in log lines (off: the operator, who may read this log, stays blind).", read_only=True)
        key_file: str = declare(
            self, "goal_key_file", "", "The runner key file (`NAME HEXKEY`, the manager's goal_key_file): opens "
            "the sealed policy of every goal. Empty: only unsealed goals run.", read_only=True)
        try:
            self.opener = GoalOpener(key_file)
        except RunnerError as err:
            raise ValueError(str(err)) from err
        problem = self._check(self.policies, self.success_rates, self.progress_means,
                              self.progress_concentration, self.duration, self.failure_probability)
        if not math.isfinite(self.success_duration):
            problem = f"`success_duration` must be a number of seconds; found {self.success_duration!r}"
        if problem:
            raise ValueError(problem)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._attempts: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self._server = ActionServer(
            self, RunTrial, self.action_name, self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(),
        )
        rates = (", ".join(f"{p}={r:g}" for p, r in zip(self.policies, self.success_rates)) if self.log_policy_ids
                 else f"{len(self.policies)} policies")
        self.get_logger().info(
            f"serving RunTrial on '{self.action_name}': {rates}; duration {self.duration:g} s, "
            f"failure probability {self.failure_probability:g}, auto_score {self.auto_score}, seed {self.seed}")

    # -- parameters -------------------------------------------------------------------------
    @staticmethod
    def _check(policies: list[str], rates: list[float], means: list[float], concentration: float,
               duration: float, failure_probability: float) -> str:
        """Why these parameter values are invalid ("" if they are fine)."""
        if len(rates) != len(policies) or len(means) != len(policies):
            return (f"`success_rates` ({len(rates)}) and `progress_means` ({len(means)}) need one "
                    f"value per policy in `policies` ({len(policies)})")
        if len(set(policies)) != len(policies):
            return f"`policies` must be unique; found {policies}"
        for name, values, low_open in (("success_rates", rates, False), ("progress_means", means, True)):
            for policy, value in zip(policies, values):
                ok = 0.0 < value < 1.0 if low_open else 0.0 <= value <= 1.0
                if not (math.isfinite(value) and ok):
                    interval = "(0, 1)" if low_open else "[0, 1]"
                    return f"`{name}` must lie in {interval}; found {value!r} for policy {policy!r}"
        if not (math.isfinite(concentration) and concentration > 0):
            return f"`progress_concentration` must be > 0; found {concentration!r}"
        if not (math.isfinite(duration) and duration >= 0):
            return f"`duration` must be >= 0 s; found {duration!r}"
        if not (0.0 <= failure_probability <= 1.0):
            return f"`failure_probability` must lie in [0, 1]; found {failure_probability!r}"
        return ""

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Accept a change only if the resulting set of parameters is consistent."""
        new = {p.name: p.value for p in params}
        values = {
            "policies": list(new.get("policies", self.policies)),
            "rates": list(new.get("success_rates", self.success_rates)),
            "means": list(new.get("progress_means", self.progress_means)),
            "concentration": float(new.get("progress_concentration", self.progress_concentration)),
            "duration": float(new.get("duration", self.duration)),
            "failure_probability": float(new.get("failure_probability", self.failure_probability)),
        }
        problem = self._check(**values)  # type: ignore[arg-type]
        if problem:
            self.get_logger().warning(f"parameter change refused: {problem}")
            return SetParametersResult(successful=False, reason=problem)
        with self._lock:
            self.policies, self.success_rates = values["policies"], values["rates"]  # type: ignore[assignment]
            self.progress_means = values["means"]  # type: ignore[assignment]
            self.progress_concentration = values["concentration"]  # type: ignore[assignment]
            self.duration = values["duration"]  # type: ignore[assignment]
            self.failure_probability = values["failure_probability"]  # type: ignore[assignment]
            self.seed = int(new.get("seed", self.seed))
            self.auto_score = bool(new.get("auto_score", self.auto_score))
        self.get_logger().info(f"parameters changed: {', '.join(sorted(new))}")
        return SetParametersResult(successful=True)

    # -- action -----------------------------------------------------------------------------
    def _on_goal(self, goal: RunTrial.Goal) -> GoalResponse:
        try:
            policy = self.opener.identity(goal)
        except RunnerError as err:  # accepted: its result says why it cannot run
            self.get_logger().error(f"trial {goal.trial_id}: {err.category.value}: {err.detail}; the run fails")
            return GoalResponse.ACCEPT
        if policy not in self.policies and sim_address_rate(policy) is None:
            named = f" {policy!r} (known: {self.policies})" if self.log_policy_ids else ""
            self.get_logger().error(f"trial {goal.trial_id}: goal rejected, unknown policy{named}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        self.get_logger().info(f"trial {goal_handle.request.trial_id}: cancel requested")
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: ServerGoalHandle) -> RunTrial.Result:
        goal: RunTrial.Goal = goal_handle.request
        try:
            policy = self.opener.identity(goal)
        except RunnerError as err:
            goal_handle.succeed()
            message = operator_message(err.category, new_error_id(), err.detail)
            self.get_logger().error(f"trial {goal.trial_id}: {message}")
            return RunTrial.Result(ok=False, message=message)
        try:
            return self.opener.prove(goal, self._rollout(goal_handle, policy))
        except Exception:
            if rclpy.ok(context=self.context):
                raise
            # Ctrl-C shut the context down mid-rollout: the goal dies with the node, quietly
            return RunTrial.Result(ok=False, message="runner shut down")

    def _rollout(self, goal_handle: ServerGoalHandle, policy: str) -> RunTrial.Result:
        goal: RunTrial.Goal = goal_handle.request
        with self._lock:
            if policy in self.policies:
                index = self.policies.index(policy)
                rate, mean = self.success_rates[index], self.progress_means[index]
            else:
                rate, mean = sim_address_rate(policy) or 0.0, SIM_PROGRESS_MEAN
            concentration, duration = self.progress_concentration, self.duration
            failure_probability, seed, auto_score = self.failure_probability, self.seed, self.auto_score
            self._attempts[(goal.session_id, goal.trial_id)] += 1
            # the manager numbers its runs; a client that does not (attempt 0) gets them counted here
            attempt = goal.attempt or self._attempts[(goal.session_id, goal.trial_id)]
        named = f"policy {policy}, " if self.log_policy_ids else ""
        self.get_logger().info(f"trial {goal.trial_id} ({named}attempt {attempt}): rollout started")
        outcome = simulate_outcome(seed, goal.session_id, policy, goal.trial_id, success_rate=rate,
                                   progress_mean=mean, concentration=concentration)
        if outcome.success and self.success_duration >= 0:
            duration = self.success_duration
        start = time.monotonic()
        feedback = RunTrial.Feedback()
        for step in range(FEEDBACK_STEPS):
            feedback.phase = "rollout"
            feedback.progress = step / FEEDBACK_STEPS
            feedback.elapsed = time.monotonic() - start
            goal_handle.publish_feedback(feedback)
            self._wait(goal_handle, duration / FEEDBACK_STEPS)
            if not self.context.ok():  # Ctrl-C: the goal dies with the node, quietly
                return RunTrial.Result(ok=False, message="runner shut down", duration=time.monotonic() - start)
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                self.get_logger().info(f"trial {goal.trial_id}: rollout canceled")
                return RunTrial.Result(ok=False, message="canceled", duration=time.monotonic() - start)
        fault = bool(_rng(seed, goal.session_id, goal.trial_id, attempt, "fault").random() < failure_probability)
        result = RunTrial.Result(ok=not fault, duration=time.monotonic() - start)
        if fault:
            result.message = operator_message(Category.ROBOT, new_error_id(),
                                              f"injected (failure_probability {failure_probability:g})")
        elif auto_score:
            result.auto_scored = True
            result.auto_success, result.auto_progress = outcome.success, outcome.progress
        feedback.phase, feedback.progress, feedback.elapsed = "done", 1.0, result.duration
        goal_handle.publish_feedback(feedback)
        goal_handle.succeed()
        scored = (f"success={int(outcome.success)} progress={outcome.progress:.3f}"
                  if result.auto_scored else "not scored")
        named = f" (policy {policy})" if self.log_policy_ids else ""
        self.get_logger().info(
            f"trial {goal.trial_id}{named}: rollout {'FAILED: ' + result.message if fault else 'done'}, {scored}")
        return result

    def _wait(self, goal_handle: ServerGoalHandle, seconds: float) -> None:
        """Sleep ``seconds`` of a rollout, or less: until its goal is canceled or Ctrl-C shut the
        context down (looked at every :data:`WAKE_PERIOD` s). The process exits only when this
        rollout's thread has ended (the executor's threads are joined at exit)."""
        end = time.monotonic() + seconds
        while not goal_handle.is_cancel_requested and self.context.ok():
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, WAKE_PERIOD))


def main(args: list[str] | None = None) -> int:
    """Run the node until Ctrl-C or an external shutdown; exit code 0, or 2 on bad parameters."""
    return spin_node("sim_robot", SimRobot, args)
