"""Several runners, one session: which runner holds which trial (the bookkeeping of parallel dispatch).

A session with several runners (``runner.runners``: robots, or simulated workers) is driven by
the one trial loop, :class:`~.driver.TrialDriver`, built with the runners' names; this module
only keeps who holds what.  How to use it (no ROS needed; the manager node and a simulated
evaluation do the same)::

    session = EvaluationSession.open(path, config, session_id)
    session.start()
    driver = TrialDriver(session, runners=config.runner.actions, max_ahead=config.runner.max_ahead)
    while not driver.finished:
        for work in driver.dispatch():        # journals trial_requested / trial_dispatched
            if work.action is Action.RUN:     # Action.RESET: tell work.runner's operator to reset
                start(work.runner, work.trial)  # asynchronously: the policy, sealed, to that runner
        runner, trial, ok, seconds, score = wait_for_any_result()
        driver.run_done(trial, ok, seconds, auto_score=score, runner=runner)
    for work in driver.stop("the session is decided"):  # decided or aborted: give up what still runs
        cancel(work.runner, work.trial)
    # a result that still comes goes to driver.run_done too: journaled as result_after_stop, never used

Every result is journaled when it arrives; scores enter the tests in plan order (the session
scores only its earliest open trial, docs/parallel.md), so the decision is the serial session's
whatever the durations.  A round design (``paired``, ``ab``) keeps a round on one runner: both
arms of a pair run on the same robot, back to back, as in a serial session.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable

from .errors import SessionError
from .values import PendingTrial

__all__ = ["RunnerPool"]


@dataclasses.dataclass(eq=False)
class RunnerPool:
    """Which runner runs which trial, and which trials wait for which runner (no session calls here).

    ``runners``: the runner names (action names), distinct, in the order free runners get work.
    """

    runners: tuple[str, ...]
    #: runner -> the trial on it now (its goal sent, no result yet).
    running: dict[str, PendingTrial] = dataclasses.field(default_factory=dict, init=False)
    #: runner -> the trials issued for it and not yet run (the rest of its round, a failed run's retry).
    reserved: dict[str, collections.deque[PendingTrial]] = dataclasses.field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.runners = tuple(self.runners)
        if not self.runners or len(set(self.runners)) != len(self.runners):
            raise SessionError(f"a runner pool needs distinct runner names; found {list(self.runners)}")
        self.reserved = {r: collections.deque() for r in self.runners}

    def free(self) -> list[str]:
        """Runners with no trial on them, in configuration order."""
        return [r for r in self.runners if r not in self.running]

    def next_for(self, runner: str, is_open: Callable[[int], bool]) -> PendingTrial | None:
        """The first reserved trial of ``runner`` still open (closed ones, voided meanwhile, are dropped)."""
        queue = self.reserved[runner]
        while queue and not is_open(queue[0].trial_id):
            queue.popleft()
        return queue[0] if queue else None

    def reserve(self, runner: str, trials: Iterable[PendingTrial]) -> None:
        """Keep ``trials`` (in plan order) for ``runner``."""
        self.reserved[runner].extend(trials)

    def start(self, runner: str, trial: PendingTrial) -> None:
        """``trial`` (its first reserved one) goes to ``runner`` now."""
        queue = self.reserved[runner]
        if queue and queue[0].trial_id == trial.trial_id:
            queue.popleft()
        self.running[runner] = trial

    def holds(self, trial_id: int) -> bool:
        """Some runner runs ``trial_id`` or keeps it reserved."""
        return self.holder(trial_id) is not None or any(
            t.trial_id == trial_id for queue in self.reserved.values() for t in queue)

    def holder(self, trial_id: int) -> str | None:
        """The runner running ``trial_id`` now, if any."""
        return next((r for r, t in self.running.items() if t.trial_id == trial_id), None)

    def finish(self, runner: str, trial_id: int, retry: PendingTrial | None = None) -> None:
        """``runner`` reported on ``trial_id``; ``retry`` (a failed run's next attempt) stays with it."""
        if runner in self.running and self.running[runner].trial_id == trial_id:
            del self.running[runner]
        if retry is not None:
            self.reserved[runner].appendleft(retry)

    def hand_over(self, runner: str, avoid: Iterable[str] = ()) -> str | None:
        """Move the reserved trials of free ``runner`` (a failed run's retry, the rest of its round) to a free
        runner with nothing reserved, not in ``avoid``; the recipient (``None``: none such, or ``runner`` runs
        a trial: it keeps them)."""
        queue, barred = self.reserved[runner], {runner, *avoid}
        recipient = next((r for r in self.free() if r not in barred and not self.reserved[r]), None)
        if queue and recipient is not None and runner not in self.running:
            self.reserved[recipient].extend(queue)
            queue.clear()
            return recipient
        return None

    def release(self) -> tuple[list[tuple[str, PendingTrial]], list[tuple[str, PendingTrial]]]:
        """Empty the pool at the stop: (the trials running, the trials reserved and never started), by runner."""
        running = list(self.running.items())
        waiting = [(r, t) for r, queue in self.reserved.items() for t in queue]
        self.running.clear()
        for queue in self.reserved.values():
            queue.clear()
        return running, waiting
