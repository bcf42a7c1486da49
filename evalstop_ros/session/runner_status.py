"""One ``/diagnostics`` status per runner of a session served by several (docs/parallel.md, docs/ros.md).

What each arm does now (the node's view of its link) and what it has done (counted from the journal's
events, so a resumed session counts its earlier runs too). Trial ids only: nothing names a policy.
"""

from __future__ import annotations

import collections
import dataclasses

from .journal import Event
from .publishing import OK, WARN, Diagnostic

__all__ = ["RunnerNow", "RunnerTally", "runner_diagnostics"]


class RunnerTally:
    """Runs and faults per runner, from the journal: ``trial_dispatched`` says which runner runs a trial,
    its ``runner_result`` (or ``result_after_stop``) that a run ended, a ``runner_result`` with ``ok`` false
    that it failed (a run given up at the stop ends as cancelled: no fault).

    >>> tally = RunnerTally()
    >>> for kind, trial, payload in [("trial_dispatched", 1, {"runner": "arm_1/run_trial"}),
    ...                              ("trial_dispatched", 2, {"runner": "arm_2/run_trial"}),
    ...                              ("runner_result", 2, {"ok": False}), ("runner_result", 1, {"ok": True}),
    ...                              ("result_after_stop", 3, {"runner": "arm_1/run_trial", "ok": False})]:
    ...     tally.observe(Event(0, 0, kind, trial, payload))
    >>> dict(tally.runs), dict(tally.faults)
    ({'arm_2/run_trial': 1, 'arm_1/run_trial': 2}, {'arm_2/run_trial': 1})
    """

    def __init__(self) -> None:
        #: Runner -> runs that ended (any result, after the stop included).
        self.runs: collections.Counter[str] = collections.Counter()
        #: Runner -> runs that failed during the session (``ok`` false: a robot or runner fault).
        self.faults: collections.Counter[str] = collections.Counter()
        self._runner: dict[int, str] = {}  # trial -> the runner of its latest dispatch

    def observe(self, event: Event) -> None:
        """Count ``event`` (every journal event, in order; other kinds are ignored)."""
        runner = event.payload.get("runner")
        if event.kind == "trial_dispatched" and event.trial_id is not None and isinstance(runner, str):
            self._runner[event.trial_id] = runner
            return
        during = event.kind == "runner_result"
        if during:
            runner = self._runner.get(event.trial_id) if event.trial_id is not None else None
        elif event.kind != "result_after_stop":
            return
        if isinstance(runner, str):
            self.runs[runner] += 1
            if during and not event.payload.get("ok", False):
                self.faults[runner] += 1


@dataclasses.dataclass(frozen=True)
class RunnerNow:
    """What one runner's link is doing now (the manager node's view)."""

    #: The runner's action as configured (``arm_1/run_trial``) and as resolved (``/lab1/arm_1/run_trial``).
    name: str
    action: str
    #: Its action server is there.
    reachable: bool
    #: Why no goal may go to it (the one-runner rule; ``""``: none).
    held: str = ""
    #: The trial on it now (0: none; a cancelled run stays until its result comes), and whether its run was
    #: cancelled (voided, or at the stop).
    trial_id: int = 0
    cancelled: bool = False
    #: The trial it waits to run until the operator confirms its scene reset (0: none).
    reset_trial_id: int = 0


def runner_diagnostics(runners: list[RunnerNow], tally: RunnerTally, *, node: str) -> list[Diagnostic]:
    """One status per runner, named ``<node>: runner <name>`` with the resolved action as ``hardware_id``:
    ``held`` or ``unreachable`` (WARN), else ``running`` trial k, ``cancelling`` it (until its result comes),
    ``reset`` (its next trial waits for the operator) or ``idle`` (OK); values ``state``, ``trial_id``,
    ``trials_run``, ``faults``.

    >>> [(d.level, d.message) for d in runner_diagnostics([RunnerNow("a", "/a", True, trial_id=3),
    ...     RunnerNow("b", "/b", False)], RunnerTally(), node="m")]
    [(0, 'running trial 3'), (1, "unreachable: no action server '/b'")]
    """
    out = []
    for r in runners:
        if r.held:
            level, state, message = WARN, "held", f"held: {r.held}"
        elif not r.reachable:
            level, state, message = WARN, "unreachable", f"unreachable: no action server '{r.action}'"
            if r.trial_id:
                message += f" (trial {r.trial_id} was on it)"
        elif r.trial_id and r.cancelled:
            level, state, message = OK, "cancelling", f"trial {r.trial_id} cancelled, waiting for the arm to stop"
        elif r.trial_id:
            level, state, message = OK, "running", f"running trial {r.trial_id}"
        elif r.reset_trial_id:
            level, state, message = OK, "reset", f"trial {r.reset_trial_id} waits for the operator's scene reset"
        else:
            level, state, message = OK, "idle", "idle"
        trial = r.trial_id or r.reset_trial_id
        out.append(Diagnostic(level, f"{node}: runner {r.name}", message, r.action, (
            ("state", state), ("trial_id", str(trial)), ("trials_run", str(tally.runs[r.name])),
            ("faults", str(tally.faults[r.name])))))
    return out
