"""One ``RunTrial`` goal at a time, with a deadline on every wait on the runner.

Used by ``evaluation_manager`` for its session and by ``station_manager`` for the hub's work. Fast DDS
loses goal responses, results and service answers under load and right after discovery, so
nothing here waits on a single message (:meth:`RunnerLink.watch`, called from a timer):

* no goal response within the response timeout: the same goal (same session, trial and
  attempt; the runners repeat a re-sent goal) is sent again, up to the maximum of sends, then
  the run fails (both from ``limits()``, read at every check: the node's parameters may change
  while it runs);
* an accepted goal that runs longer than the run timeout is canceled and fails;
* a runner that disappears during the run fails it after the response timeout;
* a goal the runner reports as ended but whose result never came is asked for again.

A response to a superseded send (the first answer after a re-send) cancels that duplicate
rollout. The outcome goes to ``on_done(trial, result)`` exactly once per started trial.

One runner per action: every action server publishes the action's ``_action/status`` topic, so
:meth:`RunnerLink.servers` counts the runners on the action name from the ROS graph. With two
(two stations on one domain and action name) each goal would run on both robots -- rclpy's client
only logs "Ignoring unexpected goal response" for the second -- so :meth:`RunnerLink.start` sends
nothing while there is more than one, and :meth:`RunnerLink.duplicate` says so (the manager pauses
the session): at once for servers of different nodes, after :data:`DUPLICATE_GRACE_S` for servers of
one node name, which is also what a runner restarted after ``kill -9`` looks like until DDS drops
the dead process's entry (its participant lease).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from action_msgs.msg import GoalStatus
from evalstop.action import RunTrial
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.task import Future

from ..session.session import PendingTrial

__all__ = ["RunResult", "RunnerLink"]

#: In ``RunnerLink.state`` while more than one runner serves the action (:meth:`RunnerLink.duplicate`).
DUPLICATE = "runners serve"
#: Seconds two servers of one node name may coexist before they count as two runners: longer than the
#: DDS participant lease (Fast DDS: 20 s) after which a killed runner's entry leaves the graph.
DUPLICATE_GRACE_S = 30.0
#: Start of ``RunnerLink.state`` while goals wait for a second server of the same node name to go.
HELD = "goals held"
#: Goal states after which the runner has a result to give.
TERMINAL = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED, GoalStatus.STATUS_CANCELED)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """How a run ended: ``auto_score`` is the runner's own ``(success, progress)``, if it scored."""

    ok: bool
    duration: float
    message: str
    auto_score: tuple[bool, float] | None = None


@dataclasses.dataclass
class _Goal:
    """The goal in flight for one trial and the times its deadlines count from."""

    trial: PendingTrial
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
                 on_done: Callable[[PendingTrial, RunResult], None]) -> None:
        self.node, self.action_name, self.limits, self.on_done = node, action_name, limits, on_done
        self.client = ActionClient(node, RunTrial, action_name)
        #: What is wrong with the link, for the log and ``/diagnostics`` (``""``: nothing).
        self.state = ""
        self._goal: _Goal | None = None
        self._duplicate_since: float | None = None  # since when more than one server is seen

    @property
    def trial(self) -> PendingTrial | None:
        """The trial being run, if any."""
        return None if self._goal is None else self._goal.trial

    def destroy(self) -> None:
        """Drop the action client (a new session gets a new link)."""
        self.client.destroy()

    def servers(self) -> list[str]:
        """The nodes serving this action name now (graph query: publishers of ``<action>/_action/status``)."""
        infos = self.node.get_publishers_info_by_topic(f"{self.action_name}/_action/status")
        return [f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in infos]

    def duplicate(self) -> str:
        """What is wrong when more than one runner serves the action (``""``: one or none, or two of one
        node name for less than :data:`DUPLICATE_GRACE_S`); sets ``state``."""
        servers = self.servers()
        if len(servers) <= 1:
            self._duplicate_since = None
            if DUPLICATE in self.state or self.state.startswith(HELD):
                self.state = ""
            return ""
        now = time.monotonic()
        self._duplicate_since = self._duplicate_since or now
        # a name the graph does not know yet (a just-started node: _NODE_NAME_UNKNOWN_) may be the same node
        unresolved = len(set(servers)) == 1 or any("_UNKNOWN_" in name for name in servers)
        if unresolved and now - self._duplicate_since < DUPLICATE_GRACE_S:
            if not self.state.startswith(HELD):
                self.node.get_logger().warning(
                    f"{len(servers)} servers named {servers[0]} on the runner action '{self.action_name}': no goal "
                    f"is sent until one is gone (the session pauses if both stay {DUPLICATE_GRACE_S:g} s)")
            self.state = (f"{HELD}: {len(servers)} servers named {servers[0]} on the action '{self.action_name}' "
                          f"(a restarted runner, or two stations on one domain)")
            return ""
        self.state = (f"{len(servers)} {DUPLICATE} the action '{self.action_name}' ({', '.join(sorted(servers))}): "
                      f"each goal would run on all of them; stop all but one (two stations on one ROS domain? set "
                      f"ROS_DOMAIN_ID or a namespace per station)")
        return self.state

    def start(self, trial: PendingTrial) -> bool:
        """Send ``trial``'s goal; ``False`` (and ``state`` ``"waiting"``) while the runner is not there, or
        while more than one runner serves the action (``state``: :meth:`duplicate`)."""
        if self.duplicate() or len(self.servers()) > 1:
            return False
        if not self.client.server_is_ready():
            if self.state != "waiting":
                self.node.get_logger().warning(
                    f"trial {trial.trial_id}: waiting for runner action server '{self.action_name}'")
                self.state = "waiting"
            return False
        if self.state == "waiting":
            self.state = ""
        self._goal = _Goal(trial)
        self._send(self._goal)
        return True

    def cancel(self) -> None:
        """Stop the rollout in flight (its trial was voided or given up, or the session ended)."""
        goal, self._goal = self._goal, None
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
        future = self.client.send_goal_async(RunTrial.Goal(
            session_id=trial.session_id, trial_id=trial.trial_id, policy_id=trial.policy_id, task=trial.task,
            initial_condition=trial.initial_condition, attempt=trial.attempt))
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
        ok = response.status == GoalStatus.STATUS_SUCCEEDED and result.ok
        message = result.message or ("" if ok else f"goal ended with status {response.status}")
        auto = (bool(result.auto_success), float(result.auto_progress)) if ok and result.auto_scored else None
        self._finish(goal, RunResult(ok, result.duration, message, auto))

    def _finish(self, goal: _Goal, result: RunResult) -> None:
        self._goal = None
        if self.state.startswith("no goal response"):
            self.state = ""
        self.on_done(goal.trial, result)
