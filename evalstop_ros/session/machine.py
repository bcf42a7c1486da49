"""The session state machine: the life cycle, the runner's results and the scores of the pending trial.

One class for a local session (:class:`~.session.EvaluationSession`) and a hub station
(:class:`evalstop_ros.station.session.StationSession`): the owner journals what this class asks
for (``commit``) and hands every journaled event back to :meth:`TrialMachine.apply`, live and on
replay (docs/protocol.md, "Journal").
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .errors import SessionError
from .journal_format import Event, encode_payload
from .limits import (
    INSTRUCTION_CHARS,
    LOG_BURST,
    LOG_WINDOW_S,
    NOTES_CHARS,
    OPERATOR_CHARS,
    REASON_CHARS,
    RateLimit,
    bounded,
    json_safe,
    score_submission,
)
from .runner_messages import operator_text
from .trials import TrialBook, TrialRecord
from .values import FINAL, PendingTrial, ScoreOutcome, SessionState, score_problem

__all__ = ["Commit", "TrialMachine"]

logger = logging.getLogger(__name__)

#: The event kinds :meth:`TrialMachine.apply` folds.
KINDS = frozenset({"started", "paused", "resumed", "aborted", "finished", "trial_requested", "runner_result",
                   "score_held", "trial_dispatched"})


class Commit(Protocol):
    """The owner's journal: append one event, then hand it to :meth:`TrialMachine.apply` (and its own handlers)."""

    def __call__(self, kind: str, trial_id: int | None, **payload: Any) -> None: ...


class TrialMachine:
    """States (idle, running, paused, finished, aborted), runner results and scores over a :class:`~.trials.TrialBook`.

    :param owner: How messages name the owner, e.g. ``session 'demo'`` or ``station 's1'``.
    :param log_name: How log lines name it (default: ``owner``).
    :param book: The owner's trial book (the machine folds ``runner_result`` into it).
    :param commit: The owner's journal (:class:`Commit`).
    :param pending: The pending trial's record (``None`` when no trial waits).
    :param request: A record as the trial the runner and the operator see.
    """

    def __init__(self, owner: str, book: TrialBook, commit: Commit, pending: Callable[[], TrialRecord | None],
                 request: Callable[[TrialRecord], PendingTrial], *, log_name: str = "",
                 open_trial: Callable[[Any], TrialRecord | None] | None = None) -> None:
        self.owner = owner
        self.log_name = log_name or owner
        self.book = book
        self._commit = commit
        self._pending = pending
        self._request = request
        #: The record of an open trial a runner result may be for (default: the pending one only).
        self._open_trial = open_trial
        #: The current state (changed by :meth:`apply` only).
        self.state = SessionState.IDLE
        self._serial_faults = 0  # failed runs of the pending trial in a row (one runner)
        #: Several runners (``trial_dispatched``): the runner of each trial's last run, and each open trial's
        #: failed runs in a row (its retries stay on its runner, so: the runner's), docs/parallel.md.
        self.runner_of: dict[int, str] = {}
        self._trial_faults: dict[int, int] = {}
        #: The last run's message as an operator channel may show it (:mod:`.runner_messages`).
        self.runner_message = ""
        #: Scores rejected since this object was built (for diagnostics).
        self.rejections = 0
        self._log_limit = RateLimit(LOG_BURST, LOG_WINDOW_S)

    # -- life cycle ------------------------------------------------------------------------
    def transition(self, action: str, allowed: tuple[SessionState, ...]) -> None:
        """:class:`~.errors.SessionError` unless the state is one of ``allowed``."""
        if self.state not in allowed:
            raise SessionError(f"cannot {action}: {self.owner} is {self.state.value}")

    def start(self) -> None:
        """``IDLE -> RUNNING``."""
        self.transition("start", (SessionState.IDLE,))
        self._commit("started", None)

    def pause(self, reason: str = "") -> None:
        """``RUNNING -> PAUSED``: no run starts, scores are refused; pausing a paused one does nothing (a re-send)."""
        if self.state == SessionState.PAUSED:
            return
        self.transition("pause", (SessionState.RUNNING,))
        self._commit("paused", None, reason=str(reason))
        logger.info("%s paused: %s", self.log_name, reason)

    def resume(self) -> None:
        """``PAUSED -> RUNNING`` (the fault count starts again); resuming a running one does nothing (a re-send)."""
        if self.state == SessionState.RUNNING:
            return
        self.transition("resume", (SessionState.PAUSED,))
        self._commit("resumed", None)
        logger.info("%s resumed", self.log_name)

    def abort(self, reason: str) -> None:
        """Abort for good (any state but a final one); ``reason`` is required."""
        if not str(reason).strip():
            raise SessionError("cannot abort: a reason is required")
        if self.state == SessionState.ABORTED:
            return
        self.transition("abort", (SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED))
        self._commit("aborted", None, reason=str(reason))
        logger.info("%s aborted: %s", self.log_name, reason)

    # -- runner results --------------------------------------------------------------------
    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None, goal_seal: dict[str, Any] | None = None,
                             unready: Callable[[TrialRecord], str] | None = None, detail: bool = True
                             ) -> PendingTrial | None:
        """Journal the runner's result of the pending trial: ``None`` after a successful run (it waits for its
        score), else the trial to run again (``attempt + 1``).

        ``auto_score``: the runner's own score, journaled with the result (:meth:`held_auto_score`);
        ``goal_seal``: the run's sealed goal; ``unready``: why the owner does not take this run now ("" if it
        does); ``detail``: journal the runner's full message too (an owner whose journal seals it). :class:`~.errors.SessionError` if the owner is neither running nor paused, ``trial_id`` is not
        an open trial (the pending one, or any the owner's ``open_trial`` knows), ``unready`` says so, or ``duration_s`` is not a finite number >= 0.
        """
        self.transition("record a runner result", (SessionState.RUNNING, SessionState.PAUSED))
        pending = self._pending()
        record = self._open_trial(trial_id) if self._open_trial is not None else (
            pending if pending is not None and pending.trial_id == trial_id else None)
        if record is None:
            head = None if pending is None else pending.trial_id
            raise SessionError(f"runner result for trial {trial_id!r}, but the pending trial is {head} (not open)")
        refusal = unready(record) if unready is not None else ""
        if refusal:
            raise SessionError(refusal)
        duration = float(duration_s)
        if not (math.isfinite(duration) and duration >= 0):
            raise SessionError(f"`duration_s` must be a finite number >= 0; found {duration_s!r}")
        extra: dict[str, Any] = {}
        if ok and auto_score is not None:
            extra["auto_score"] = {"success": json_safe(auto_score[0]), "progress": json_safe(auto_score[1])}
        if goal_seal is not None:
            extra["goal_seal"] = dict(goal_seal)
        shown = operator_text(str(message), bool(ok))
        if detail and shown != str(message):  # the full text: sealed in a session's journal, revealed with the key
            extra["detail"] = str(message)
        self._commit("runner_result", trial_id, ok=bool(ok), duration_s=duration, message=shown, **extra)
        logger.info("trial %d (label %s) run %s in %.1f s%s", trial_id, record.label, "ok" if ok else "FAILED",
                    duration, f": {shown}" if shown else "")
        return None if ok else self._request(record)

    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None:
        """The pending trial's journaled automatic score, not yet submitted (``None`` if none); one that came
        while paused, or before a crash, is held here until the owner runs again."""
        record = self._pending()
        if record is None or not record.ran_ok or record.auto_score is None:
            return None
        success, progress = record.auto_score
        return self._request(record), success, progress

    # -- scores ----------------------------------------------------------------------------
    def submit_score(self, trial_id: int, token: str, success: bool, progress: float, operator: str = "",
                     notes: str = "", *, preference: str = "", instruction: str = "", pair_invalid: bool = False,
                     form_problem: Callable[[], str | None] = lambda: None,
                     value_problem: Callable[[TrialRecord], str | None] = lambda record: None,
                     held_until: Callable[[TrialRecord], int | None] = lambda record: None,
                     accept: Callable[[TrialRecord, dict[str, Any]], ScoreOutcome]) -> ScoreOutcome:
        """Check a score of trial ``trial_id`` and hand a valid one to ``accept`` (which journals it).

        Checks, in order (the first failing one is the reason, journaled as ``score_rejected``): a field
        longer than its limit; the owner's ``form_problem``; unknown trial; wrong token; already scored (a
        byte-identical resubmission is a *duplicate*: acknowledged, journaled as ``score_duplicate``);
        voided trial; not running; no successful run; the value (:func:`~.values.score_problem`); the
        owner's ``value_problem``.  A valid score that must wait for an earlier trial (the owner's
        ``held_until`` names it: scores enter in plan order, docs/parallel.md) is journaled as
        ``score_held`` and acknowledged; the owner accepts it when that trial is scored or voided.
        """
        if isinstance(success, np.bool_):
            success = bool(success)
        submission = score_submission(token, success, progress, operator, notes, preference, instruction, pair_invalid)
        oversized = next((f"`{name}` is longer than {limit} characters ({len(value)})"
                          for name, value, limit in (("token", token, 64), ("operator", operator, OPERATOR_CHARS),
                                                     ("notes", notes, NOTES_CHARS), ("preference", preference, 16),
                                                     ("instruction", instruction, INSTRUCTION_CHARS))
                          if isinstance(value, str) and len(value) > limit), None)
        problem = oversized or form_problem()
        if problem:
            return self.reject(trial_id, submission, problem)
        record = self.book.trials.get(trial_id) if self.known(trial_id) else None
        if record is None:
            return self.reject(trial_id, submission, f"unknown trial {bounded(trial_id)!r}")
        if not (isinstance(token, str) and hmac.compare_digest(token, record.token)):
            return self.reject(trial_id, submission, f"wrong token for trial {trial_id}")
        if isinstance(progress, (int, float, np.floating, np.integer)) and not isinstance(progress, bool):
            submission["progress"] = json_safe(float(progress))
        if record.submission is not None:
            if json.loads(encode_payload(submission)) == record.submission:
                self._commit("score_duplicate", trial_id, submission=submission)
                logger.info("trial %d (label %s): duplicate score acknowledged", trial_id, record.label)
                return ScoreOutcome(True, True, f"duplicate of the recorded score of trial {trial_id}; ignored",
                                    record.post_decision)
            return self.reject(trial_id, submission, f"trial {trial_id} is already scored; use a correction to change it")
        if record.held is not None and not record.voided:
            if json.loads(encode_payload(submission)) == record.held:
                self._commit("score_duplicate", trial_id, submission=submission)
                return ScoreOutcome(True, True, f"duplicate of the held score of trial {trial_id}; ignored")
            return self.reject(trial_id, submission, f"trial {trial_id} already has a score held for its turn; "
                               "correct it once it is counted")
        if record.voided:
            return self.reject(trial_id, submission, f"trial {trial_id} was voided")
        if self.state != SessionState.RUNNING:
            return self.reject(trial_id, submission,
                               f"{self.owner.split()[0]} is {self.state.value}; scores are accepted only while it runs")
        if not record.ran_ok:
            return self.reject(trial_id, submission, f"trial {trial_id} has no successful run recorded yet")
        problem = score_problem(success, progress) or value_problem(record)
        if problem:
            return self.reject(trial_id, submission, problem)
        head = held_until(record)
        if head is not None:
            self._commit("score_held", trial_id, submission=submission, until=head)
            logger.info("trial %d (label %s): score held until trial %d is scored", trial_id, record.label, head)
            return ScoreOutcome(True, False, f"trial {trial_id}: score held until trial {head} is scored "
                                "(scores enter in plan order)", held=True)
        return accept(record, submission)

    def reject(self, trial_id: object, submission: dict[str, Any], reason: str) -> ScoreOutcome:
        """Journal a rejected score (with the trial id as claimed) in bounded form and say why.

        Every string is cut to :data:`~.limits.SUMMARY_CHARS` (with its full length), so one rejection adds
        at most about 1 KB to the journal whatever was sent; the warning is rate-limited.
        """
        reason = str(bounded(reason, REASON_CHARS))
        column = trial_id if isinstance(trial_id, int) and self.known(trial_id) else None
        self._commit("score_rejected", column, reason=reason, claimed_trial_id=bounded(json_safe(trial_id)),
                     submission={key: bounded(value) for key, value in submission.items()})
        self.rejections += 1
        if self._log_limit.allow():
            logger.warning("score for trial %s rejected: %s", bounded(trial_id), reason + self._log_limit.suppressed())
        return ScoreOutcome(False, False, reason)

    def known(self, trial_id: object) -> bool:
        """``trial_id`` names a requested trial."""
        return isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in self.book.trials

    # -- replay ------------------------------------------------------------------------------
    def apply(self, event: Event) -> str:
        """Fold a journaled event of :data:`KINDS` (live or on replay): "" or why it cannot follow the state."""
        allowed = {"started": (SessionState.IDLE,), "paused": (SessionState.RUNNING,),
                   "resumed": (SessionState.PAUSED,), "finished": (SessionState.RUNNING, SessionState.PAUSED),
                   "aborted": (SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED)}.get(event.kind)
        if allowed is not None:
            if self.state not in allowed:
                return f"{event.kind} in state {self.state.value}"
            self.state = {"started": SessionState.RUNNING, "paused": SessionState.PAUSED,
                          "resumed": SessionState.RUNNING, "finished": SessionState.FINISHED,
                          "aborted": SessionState.ABORTED}[event.kind]
            if event.kind == "resumed":
                self._serial_faults = 0
                self._trial_faults.clear()
        elif event.kind == "trial_requested":
            self.book.apply(event)
            self._serial_faults = 0
        elif event.kind == "trial_dispatched" and event.trial_id is not None:
            self.runner_of[event.trial_id] = str(event.payload.get("runner", ""))
        elif event.kind == "score_held":
            self.book.apply(event)  # an operator's score waiting for its turn: no run, no fault
        elif event.kind == "runner_result":
            self.book.apply(event)
            self._serial_faults = 0 if event.payload.get("ok") else self._serial_faults + 1
            if event.trial_id in self.runner_of:
                failed = 0 if event.payload.get("ok") else self._trial_faults.get(event.trial_id, 0) + 1
                self._trial_faults[event.trial_id] = failed
            self.runner_message = str(event.payload.get("message", ""))
        return ""

    @property
    def faults(self) -> int:
        """Failed runs in a row: of the pending trial (one runner), or the most of any open trial on one of several
        runners (another runner's successes do not clear them), since it was requested or the owner resumed."""
        return self.faulty_trial()[1] if self.runner_of else self._serial_faults

    def faulty_trial(self) -> tuple[int | None, int]:
        """Several runners: the open trial with the most failed runs in a row, and their number (``None``, 0: none)."""
        open_faults = [(count, -trial_id) for trial_id, count in self._trial_faults.items()
                       if count and trial_id in self.book.trials and not self.book.trials[trial_id].closed]
        if not open_faults:
            return None, 0
        count, trial_id = max(open_faults)
        return -trial_id, count

    @property
    def over(self) -> bool:
        """Finished or aborted."""
        return self.state in FINAL
