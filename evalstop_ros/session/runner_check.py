"""One runner per action: who serves a ``RunTrial`` action, judged from the ROS graph (docs/session.md)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

__all__ = ["DUPLICATE", "GRACE_S", "HELD", "RunnerCheck", "RunnerGraph"]

#: In the state while more than one runner serves the action.
DUPLICATE = "runners serve"
#: Seconds servers of one node name may coexist before they count as two runners: longer than the
#: DDS participant lease (Fast DDS: 20 s) after which a killed runner's entry leaves the graph.
GRACE_S = 30.0
#: Start of the state while goals wait for a second server of the same node name to go.
HELD = "goals held"


@dataclasses.dataclass(frozen=True)
class RunnerGraph:
    """What the ROS graph shows of one action: the number of goal-service servers and the node names
    (``/namespace/name``) of the goal servers (when known), status and feedback publishers."""

    action_name: str
    goal_servers: int
    goal_server_names: tuple[str, ...] = ()
    status_publishers: tuple[str, ...] = ()
    feedback_publishers: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many servers at least: the most of any of the three interfaces."""
        return max(self.goal_servers, len(self.goal_server_names), len(self.status_publishers),
                   len(self.feedback_publishers))

    @property
    def names(self) -> tuple[str, ...]:
        """Every node name seen on the action, sorted."""
        return tuple(sorted({*self.goal_server_names, *self.status_publishers, *self.feedback_publishers}))


class RunnerCheck:
    """The one-runner rule over successive :class:`RunnerGraph` snapshots (module docstring).

    >>> check = RunnerCheck(clock=lambda: 0.0)
    >>> check.look(RunnerGraph("/run_trial", 1, ("/sim_robot",), ("/sim_robot",), ("/sim_robot",)))
    ''
    >>> check.look(RunnerGraph("/run_trial", 2, ("/rogue", "/sim_robot"), ("/sim_robot",), ("/sim_robot",)))[:40]
    "2 runners serve the action '/run_trial' "
    """

    def __init__(self, grace_s: float = GRACE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace_s, self.clock = grace_s, clock
        #: What is wrong ("" nothing; starts with :data:`HELD` while goals wait, else a duplicate).
        self.state = ""
        self._since: float | None = None

    @property
    def duplicate(self) -> bool:
        """More than one runner serves the action (the session should pause)."""
        return DUPLICATE in self.state

    @property
    def hold(self) -> bool:
        """No goal may be sent now (a duplicate, or goals held)."""
        return bool(self.state)

    def look(self, graph: RunnerGraph) -> str:
        """Judge ``graph``; returns the duplicate's description ("" when there is none, or goals are only held)."""
        count, names = graph.count, graph.names
        if count <= 1 and len(names) <= 1:
            self._since, self.state = None, ""
            return ""
        now = self.clock()
        self._since = now if self._since is None else self._since
        shown = ", ".join(names) or "unnamed nodes"
        # a name the graph does not know yet (a just-started node: _NODE_NAME_UNKNOWN_) may be the same node
        unresolved = len(names) <= 1 or any("_UNKNOWN_" in name for name in names)
        if unresolved and now - self._since < self.grace_s:
            self.state = (f"{HELD}: {count} servers named {shown} on the action '{graph.action_name}' "
                          f"(a restarted runner, or two stations on one domain)")
            return ""
        self.state = (f"{count} {DUPLICATE} the action '{graph.action_name}' ({shown}): each goal would reach "
                      f"all of them; stop all but one (two stations on one ROS domain? set ROS_DOMAIN_ID or a "
                      f"namespace per station; a node serving only the goal service is an eavesdropper)")
        return self.state
