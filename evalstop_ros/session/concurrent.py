"""Several trials of one session open at once: the session's side of parallel runners.

A session served by several runners (``runner.runners``) issues trials of its plan ahead, one
runner each, while earlier ones still run.  The plan stays what a serial session draws: the
trials are requested in plan order (``trial_requested``, exactly the serial schedule's next
trial), and their scores enter the tests in that order, because only the *head* trial (the
earliest open one, :meth:`~.schedule.Schedule.pending`) is scored; a later trial's result waits
in the journal (``runner_result`` with its automatic score, or an operator's ``score_held``) until
its predecessors are closed.
docs/parallel.md proves that the tests then see what a serial session with the same plan sees,
whatever the durations.

The events this adds are for the record and the audit only (no test reads them):
``trial_dispatched`` (a run went to a runner), ``trial_cancelled`` (an open trial was given up
at the stop: its robot held), ``result_after_stop`` (a runner's result that came after the
decision: reported, never used).  :class:`~.driver.TrialDriver` drives them.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from .errors import SessionError
from .journal import Event
from .limits import json_safe
from .replay import JournalReplay
from .replay import locked as _locked
from .runner_messages import operator_text
from .trials import TrialRecord
from .values import FINAL, PendingTrial, SessionState

__all__ = ["ConcurrentTrials"]

logger = logging.getLogger("evalstop_ros.session.session")


class ConcurrentTrials(JournalReplay):
    """:meth:`issue_trial`, :meth:`open_trials` and the dispatch records of :class:`~.session.EvaluationSession`."""

    @_locked
    def open_trials(self) -> list[PendingTrial]:
        """Every requested trial that is neither scored nor voided, in plan order (the first is the pending one)."""
        return [self._schedule.request(r) for r in self._schedule.open_records()]

    @_locked
    def trial_phase(self, trial_id: int) -> str:
        """What open trial ``trial_id`` waits for: ``"reset"``, ``"run"`` or ``"score"`` ("" if it is not open)."""
        record = self._book.trials.get(trial_id) if isinstance(trial_id, int) else None
        return "" if record is None or record.closed else self._awaiting(record)

    def _awaiting(self, record: TrialRecord) -> str:
        """An open trial's phase: ``"reset"``, ``"run"`` or ``"score"`` (:class:`~.values.StatusSnapshot`)."""
        if record.ran_ok:
            return "score"
        if self.config.confirm_reset and record.reset_confirmed != record.attempt:
            return "reset"
        return "run"

    @_locked
    def issue_trial(self) -> PendingTrial | None:
        """Request (journal) the plan's next trial even while others are open; ``None`` once the session is over.

        The trial is the one a serial session would request next (:meth:`~.schedule.Schedule.next_spec`).

        Raises
        ------
        SessionError
            If the session is not running, or its schedule chooses trials from the scores
            (``schedule: active``, ``design: adastop``) while a trial is open.
        """
        if self._state in FINAL:
            return None
        self._transition_to_issue()
        if self._schedule.pending() is not None and (self.config.schedule == "active" or self._adastop is not None):
            raise SessionError("schedule 'active' and design 'adastop' choose the next trial from the scores: "
                               "a trial cannot be issued while another is open (docs/parallel.md)")
        return self._schedule.request(self._request_next())

    def _request_next(self) -> TrialRecord:
        """Journal the plan's next trial (``trial_requested``; under ``schedule: active`` its round's task
        choice first) and return its record."""
        if self.config.schedule == "active":
            self._schedule.choose_round(self._commit)
        trial_id, payload, _ = self._schedule.next_spec()
        self._commit("trial_requested", trial_id, **payload)
        record = self._book.trials[trial_id]
        logger.info("trial %d (label %s) requested: round %d, task %s, condition %s", trial_id, record.label,
                    record.round, record.task, record.initial_condition)
        return record

    def _transition_to_issue(self) -> None:
        if self._state != SessionState.RUNNING:
            raise SessionError(f"cannot request a trial: session {self.session_id!r} is {self._state.value}")

    @_locked
    def round_continues(self) -> bool:
        """The next trial the plan issues belongs to the round of the last one issued (a round design keeps
        a round on one runner: its pair is run on one robot)."""
        if not self._book.trials or self._state != SessionState.RUNNING:
            return False
        return not self._schedule.round_ends() and not self._schedule.state.reruns

    @_locked
    def faulty_run(self) -> tuple[int | None, str]:
        """The open trial with the most failed runs in a row and the runner it runs on (``None``, "": none)."""
        trial_id, _ = self._machine.faulty_trial()
        return trial_id, "" if trial_id is None else self._machine.runner_of.get(trial_id, "")

    @_locked
    def record_dispatch(self, trial_id: int, runner: str) -> None:
        """Journal that the current run of open trial ``trial_id`` went to ``runner`` (``trial_dispatched``)."""
        record = self._open(trial_id, "dispatch")
        self._commit("trial_dispatched", trial_id, runner=str(runner)[:256], attempt=record.attempt)

    @_locked
    def record_cancel(self, trial_id: int, runner: str, reason: str) -> None:
        """Journal that trial ``trial_id`` was given up on ``runner`` (``trial_cancelled``): open at the stop,
        or voided during its run."""
        self._known_trial(trial_id)
        self._commit("trial_cancelled", trial_id, runner=str(runner)[:256], reason=str(reason)[:256])

    @_locked
    def record_late_result(self, trial_id: int, runner: str, ok: bool, duration_s: float, message: str = "", *,
                           auto_score: tuple[bool, float] | None = None,
                           goal_seal: dict[str, Any] | None = None) -> None:
        """Journal a runner's result that came after the session stopped (``result_after_stop``): for the
        report and the audit; it reaches no test."""
        self._known_trial(trial_id)
        if self._state not in FINAL:
            raise SessionError(f"trial {trial_id}: the session is {self._state.value}; a result is late only after "
                               "the stop")
        extra: dict[str, Any] = {}
        if ok and auto_score is not None:
            extra["auto_score"] = {"success": json_safe(auto_score[0]), "progress": json_safe(auto_score[1])}
        if goal_seal is not None:
            extra["goal_seal"] = dict(goal_seal)
        duration = float(duration_s) if math.isfinite(duration_s) and duration_s >= 0 else 0.0
        self._commit("result_after_stop", trial_id, runner=str(runner)[:256], ok=bool(ok), duration_s=duration,
                     message=operator_text(str(message), bool(ok)), **extra)
        logger.info("trial %d: result after the stop (runner %s), journaled and not used", trial_id, runner)

    def _open(self, trial_id: int, action: str) -> TrialRecord:
        record = self._known_trial(trial_id)
        if record.closed or self._state != SessionState.RUNNING:
            raise SessionError(f"cannot {action} trial {trial_id}: it is not open in a running session")
        return record

    def _known_trial(self, trial_id: int) -> TrialRecord:
        record = self._book.trials.get(trial_id) if isinstance(trial_id, int) else None
        if record is None:
            raise SessionError(f"unknown trial {trial_id!r}")
        return record

    def _on_trial_dispatched(self, event: Event) -> None:
        """Which runner runs which attempt: the state machine counts failed runs per runner's trial."""
        self._machine.apply(event)

    def _on_trial_cancelled(self, event: Event) -> None:
        """Audit only (an open trial given up, and on which runner)."""

    _on_result_after_stop = _on_trial_cancelled
