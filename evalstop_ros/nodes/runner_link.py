"""One ``RunTrial`` goal at a time, with a deadline on every wait on the runner (both manager nodes).

Fast DDS loses goal responses and results under load, so nothing waits on a single message:
re-sends, timeouts and cancels are in docs/nodes.md.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from action_msgs.msg import GoalStatus
from evalstop.action import RunTrial
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.task import Future

from ..session.goal_sealing import GoalSealer, journal_seal
from ..session.runner_check import RunnerGraph
from ..session.session import PendingTrial

__all__ = ["RunResult", "RunnerLink"]

#: Goal states after which the runner has a result to give.
TERMINAL = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED, GoalStatus.STATUS_CANCELED)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """How a run ended: ``auto_score`` is the runner's own ``(success, progress)``, if it scored."""

    ok: bool
    duration: float
    message: str
    auto_score: tuple[bool, float] | None = None
    #: What the goal sealed for the runner, as the journal records it (``None``: an unsealed goal).
    goal_seal: dict[str, Any] | None = None


@dataclasses.dataclass
class _Goal:
    """The goal in flight for one trial and the times its deadlines count from."""

    trial: PendingTrial
    request: Any = None  # the RunTrial goal, the same at every send
    sends: int = 0
    sent_at: float = 0.0
    handle: ClientGoalHandle | None = None
    accepted_at: float = 0.0
    result_asked_at: float = 0.0
    done_at: float | None = None
    gone_at: float | None = None


class RunnerLink:
    """The action client of one runner, one goal at a time (module docstring)."""

    def __init__(self, node: Node, action_name: str, *, limits: Callable[[], tuple[float, int]],
                 on_done: Callable[[PendingTrial, RunResult], None], sealer: GoalSealer) -> None:
        self.node, self.action_name, self.limits, self.on_done = node, action_name, limits, on_done
        self.sealer = sealer
        self.client = ActionClient(node, RunTrial, action_name)
        #: The action's fully qualified name (namespace and remapping applied), as the graph shows it.
        self.resolved = node.resolve_service_name(action_name)
        #: What is wrong with the link, for the log and ``/diagnostics`` (``""``: nothing).
        self.state = ""
        #: Why no goal may be sent now (the trial driver's one-runner check; ``""``: none).
        self.held = ""
        self._goal: _Goal | None = None

    @property
    def trial(self) -> PendingTrial | None:
        """The trial being run, if any."""
        return None if self._goal is None else self._goal.trial

    def destroy(self) -> None:
        """Drop the action client (a new session gets a new link)."""
        self.client.destroy()

    def graph(self) -> RunnerGraph:
        """Who serves the action now: the goal service's servers, the status and feedback publishers.

        Graph queries only; the goal servers are named (a walk over the nodes' services) only when
        there is more than one server of some interface."""
        node, name = self.node, self.resolved

        def publishers(topic: str) -> tuple[str, ...]:
            return tuple(f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                         for i in node.get_publishers_info_by_topic(f"{name}/_action/{topic}"))

        service = f"{name}/_action/send_goal"
        servers = node.count_services(service)
        status, feedback = publishers("status"), publishers("feedback")
        named: tuple[str, ...] = ()
        if max(servers, len(status), len(feedback)) > 1 or len({*status, *feedback}) > 1:
            named = tuple(f"{ns.rstrip('/')}/{n}" for n, ns in node.get_node_names_and_namespaces()
                          if any(s == service for s, _ in node.get_service_names_and_types_by_node(n, ns)))
        return RunnerGraph(self.action_name, servers, named, status, feedback)

    def start(self, trial: PendingTrial) -> bool:
        """Send ``trial``'s goal; ``False`` (and ``state`` ``"waiting"``) while the runner is not there, or
        while the one-runner check holds the goals (:attr:`held`)."""
        if self.held:
            return False
        if not self.client.server_is_ready():
            if self.state != "waiting":
                self.node.get_logger().warning(
                    f"trial {trial.trial_id}: waiting for runner action server '{self.action_name}'")
                self.state = "waiting"
            return False
        if self.state == "waiting":
            self.state = ""
        self._goal = _Goal(trial, RunTrial.Goal(
            session_id=trial.session_id, trial_id=trial.trial_id, label=trial.label, task=trial.task,
            initial_condition=trial.initial_condition, attempt=trial.attempt,
            **self.sealer.goal_fields(trial.trial_id, trial.attempt, trial.policy_id)))
        self._send(self._goal)
        return True

    def cancel(self) -> None:
        """Stop the rollout in flight (its trial was voided or given up, or the session ended)."""
        goal, self._goal = self._goal, None
        if goal is not None and goal.handle is not None:
            goal.handle.cancel_goal_async()

    def cancel_and_report(self) -> None:
        """Cancel the rollout in flight at the stop but keep waiting for its result: it still goes to
        ``on_done`` (the session journals it as after the stop, docs/parallel.md)."""
        goal = self._goal
        if goal is not None and goal.handle is not None:
            goal.handle.cancel_goal_async()

    def _send(self, goal: _Goal) -> None:
        """Send (or send again) the goal; the same (session, trial, attempt) every time."""
        trial = goal.trial
        goal.sends += 1
        goal.sent_at = time.monotonic()
        again = f", send {goal.sends}" if goal.sends > 1 else ""
        self.node.get_logger().info(
            f"trial {trial.trial_id} (label {trial.label}, attempt {trial.attempt}{again}): runner goal sent")
        future = self.client.send_goal_async(goal.request)
        future.add_done_callback(lambda f, g=goal: self._on_response(g, f))

    def _on_response(self, goal: _Goal, future: Future) -> None:
        handle: ClientGoalHandle | None = future.result()
        if goal is not self._goal or goal.handle is not None:
            # a response to a goal sent again, or to a run that is over: stop that duplicate rollout
            if handle is not None and handle.accepted:
                handle.cancel_goal_async()
            return
        if handle is None or not handle.accepted:
            self._finish(goal, RunResult(False, 0.0, "goal rejected by the runner"))
            return
        goal.handle, goal.accepted_at = handle, time.monotonic()
        if self.state.startswith("no goal response"):
            self.state = ""
        self._ask_result(goal)

    def _ask_result(self, goal: _Goal) -> None:
        assert goal.handle is not None
        goal.result_asked_at = time.monotonic()
        goal.handle.get_result_async().add_done_callback(lambda f, g=goal: self._on_result(g, f))

    def watch(self, run_timeout: float) -> None:
        """Check the deadlines of the goal in flight (module docstring); call it periodically."""
        goal = self._goal
        if goal is None:
            return
        (timeout, max_sends), now, trial, log = self.limits(), time.monotonic(), goal.trial, self.node.get_logger()
        if goal.handle is None:
            if now - goal.sent_at < timeout:
                return
            if goal.sends >= max_sends:
                self._finish(goal, RunResult(False, 0.0, f"no answer from the runner to {goal.sends} goal requests"))
                return
            self.state = f"no goal response for trial {trial.trial_id}; re-sending the goal"
            log.warning(f"trial {trial.trial_id}: no goal response within {timeout:g} s; sending it again")
            self._send(goal)
            return
        if now - goal.accepted_at >= run_timeout:
            log.error(f"trial {trial.trial_id}: runner timed out; canceling the goal")
            goal.handle.cancel_goal_async()
            self._finish(goal, RunResult(False, math.nan, "runner timed out"))
            return
        if not self.client.server_is_ready():
            goal.gone_at = goal.gone_at or now
            if now - goal.gone_at >= timeout:
                log.error(f"trial {trial.trial_id}: the runner went away during the run")
                self._finish(goal, RunResult(False, math.nan, "the runner went away during the run"))
            return
        goal.gone_at = None
        if goal.handle.status in TERMINAL:
            goal.done_at = goal.done_at or now
            if now - max(goal.done_at, goal.result_asked_at) >= timeout:
                log.warning(f"trial {trial.trial_id}: the run is over but no result came; asking again")
                self._ask_result(goal)

    def _on_result(self, goal: _Goal, future: Future) -> None:
        if goal is not self._goal:
            return  # timed out (already reported), answered earlier, or canceled
        response = future.result()
        result: RunTrial.Result = response.result
        forged = self.sealer.result_problem(goal.request, result)
        if forged:
            self.node.get_logger().error(f"trial {goal.trial.trial_id}: result refused: {forged} (a node without "
                                         "the runner key answered the goal)")
            self._finish(goal, RunResult(False, math.nan, f"result refused: {forged}"))
            return
        ok = response.status == GoalStatus.STATUS_SUCCEEDED and result.ok
        message = result.message or ("" if ok else f"goal ended with status {response.status}")
        auto = (bool(result.auto_success), float(result.auto_progress)) if ok and result.auto_scored else None
        self._finish(goal, RunResult(ok, result.duration, message, auto))

    def _finish(self, goal: _Goal, result: RunResult) -> None:
        """Report the run's end once, with what its goal sealed (journaled with the result)."""
        seal = journal_seal(bytes(goal.request.sealed), goal.trial.attempt) if goal.request is not None else None
        result = dataclasses.replace(result, goal_seal=seal)
        self._goal = None
        if self.state.startswith("no goal response"):
            self.state = ""
        self.on_done(goal.trial, result)
