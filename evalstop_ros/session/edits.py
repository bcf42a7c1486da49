"""The session's score edits (corrections, voids, undo) and the checks a score value must pass
(docs/protocol.md)."""

from __future__ import annotations

import copy
import logging

from ..stats.sequential import Decision
from .analysis import PairedTest
from .journal import Event
from .replay import JournalReplay
from .replay import locked as _locked
from .trials import TrialRecord
from .values import EditOutcome, SessionState, score_problem

__all__ = ["ScoreEdits"]

logger = logging.getLogger("evalstop_ros.session.session")


class ScoreEdits(JournalReplay):
    """:meth:`correct_score`, :meth:`void_score` and :meth:`undo_last` of :class:`~.session.EvaluationSession`."""

    @_locked
    def correct_score(self, trial_id: int, success: bool, progress: float, reason: str) -> EditOutcome:
        """Replace a trial's effective score (journaled as ``correction``, with the old one).

        Refused (nothing journaled) without a reason, for a trial without a score, for an
        invalid score, for no change, in an aborted session, and when it would change an
        announced decision: a decided comparison consumed the trial, sequential Holm would decide
        a decided comparison at another step, or AdaStop analysed the trial's interim.  The tests
        are rebuilt by replay.
        """
        refused = self._edit_refusal(trial_id, reason, need_score=True)
        if refused is not None:
            return refused
        record = self._book.trials[trial_id]
        assert record.score is not None
        problem = score_problem(success, progress)
        if problem:
            return EditOutcome(False, problem, trial_id)
        if record.score.success == success and record.score.progress == float(progress):
            return EditOutcome(False, f"trial {trial_id} already has this score", trial_id)
        payload = {"success": bool(success), "progress": float(progress), "reason": str(reason),
                   "previous": {"success": record.score.success, "progress": record.score.progress}}
        conflict = self._conflict(Event(0, 0, "correction", trial_id, payload))
        if conflict:
            return EditOutcome(False, conflict, trial_id)
        self._commit("correction", trial_id, **payload)
        logger.info("trial %d (label %s) corrected to success=%d progress=%.3g: %s", trial_id, record.label,
                    success, progress, reason)
        self._settle()
        return EditOutcome(True, f"trial {trial_id} corrected", trial_id)

    @_locked
    def void_score(self, trial_id: int, reason: str) -> EditOutcome:
        """Void a trial.

        A scored trial loses its score and is re-run: the next trial (new id and token) runs
        the same policy in the same round from the same condition, unless the policy has left
        the rotation.  A pending (unscored) trial is given up: the schedule moves on.

        Refused (nothing journaled) without a reason, for an unknown or already voided trial,
        in a finished or aborted session for a pending trial, and when it would change an
        announced decision (as :meth:`correct_score`).  Voiding shifts later pairs of the
        ``independent`` design, which is refused too if a decided comparison consumed any of them.
        Under ``design: adastop`` a voided pending trial is re-run too (its interim needs it).
        The decision to void must not depend on the outcome (voiding failures and re-running them
        is p-hacking); the reason is journaled for the audit.
        """
        refused = self._edit_refusal(trial_id, reason, need_score=False)
        if refused is not None:
            return refused
        record = self._book.trials[trial_id]
        payload = {"reason": str(reason), "had_score": record.score is not None}
        if record.score is None and self._state not in (SessionState.RUNNING, SessionState.PAUSED):
            return EditOutcome(False, f"session is {self._state.value}; pending trials can be voided only while it "
                               "runs or is paused", trial_id)
        conflict = self._conflict(Event(0, 0, "void", trial_id, payload))
        if conflict:
            return EditOutcome(False, conflict, trial_id)
        self._commit("void", trial_id, **payload)
        logger.info("trial %d (label %s) voided: %s", trial_id, record.label, reason)
        self._settle()
        self._release_held()  # a later trial's score held for this one's
        return EditOutcome(True, f"trial {trial_id} voided; {self._rerun_note(record)}", trial_id)

    def _rerun_note(self, record: TrialRecord) -> str:
        """What happens to voided ``record``: which trial runs it again, and when (for the operator)."""
        if record.trial_id not in self._schedule.state.reruns:
            return "given up (not run again)"
        if self._state not in (SessionState.RUNNING, SessionState.PAUSED) or record.policy not in self._schedule.active(
                record.task if self.config.claim != "pooled" else None):
            return "not run again (its policy has left the rotation)"
        queued = self._schedule.state.reruns.index(record.trial_id)
        pending = self._schedule.pending()
        new_id = len(self._book.trials) + 1 + queued
        when = f"after the pending trial {pending.trial_id}" if pending is not None else "next"
        return (f"it runs again as trial {new_id} {when} (label {record.label}, round {record.round}, "
                f"condition {record.initial_condition})")

    @_locked
    def undo_last(self, reason: str) -> EditOutcome:
        """Void the most recently scored trial (see :meth:`void_score`)."""
        scored = self._book.scored()
        if not scored:
            return EditOutcome(False, "no scored trial to undo")
        return self.void_score(scored[-1].trial_id, reason)

    def _edit_refusal(self, trial_id: int, reason: str, *, need_score: bool) -> EditOutcome | None:
        if not isinstance(reason, str) or not reason.strip():
            return EditOutcome(False, "a reason is required", trial_id)
        if self._state == SessionState.ABORTED:
            return EditOutcome(False, "session is aborted", trial_id)
        record = self._book.trials[trial_id] if self._known(trial_id) else None
        if record is None:
            return EditOutcome(False, f"unknown trial {trial_id!r}", trial_id)
        if record.voided:
            return EditOutcome(False, f"trial {trial_id} is voided", trial_id)
        if need_score and record.score is None:
            return EditOutcome(False, f"trial {trial_id} has no score to correct", trial_id)
        return None

    def _conflict(self, event: Event) -> str | None:
        """Why applying ``event`` would change an announced decision, or ``None``."""
        if self._adastop is not None:
            record = self._book.trials[event.trial_id]  # type: ignore[index]
            if record.round <= self._adastop.interims:
                return (f"trial {event.trial_id}: AdaStop already analysed interim {record.round}; the scores of an "
                        "analysed interim cannot change")
            return None
        book = copy.deepcopy(self._book)
        book.apply(event)
        for test in self._tests:
            assert isinstance(test, PairedTest)
            problem = test.conflict(test.wanted(book, self.config.design))
            if problem:
                return f"trial {event.trial_id}: {problem}"
        for family in self._families:
            trial = copy.deepcopy(family)
            for test in trial.tests:
                test.sync(test.wanted(book, self.config.design))
            for before, (decision, stop, reached) in zip(family.tests, trial.replayed()):
                announced = (before.decision, before.stop)
                until = before.stop if before.stop is not None else self.config.n_max
                if before.decided and (decision, stop) != announced and (decision != Decision.CONTINUE or reached >= until):
                    return (f"trial {event.trial_id}: comparison {before.label} was decided {before.decision.name} by "
                            f"sequential Holm at step {until}, and with this change Holm's step-down would decide it "
                            f"{'at step ' + str(stop) if stop else 'otherwise'}; decided comparisons cannot change")
        return None

    def _known(self, trial_id: object) -> bool:
        return isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in self._book.trials
