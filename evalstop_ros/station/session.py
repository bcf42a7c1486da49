"""A hub station's session: the hub's A/B assignments as blinded trials under the session state machine.

The life cycle, the runner's results and the scores are :class:`~evalstop_ros.session.machine.TrialMachine`'s,
as in a local session; what differs is where trials come from (the assignments the hub leases,
:meth:`StationSession.assign`) and where a finished one goes (a ``result`` record that
:class:`~.work.StationWork` uploads).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import uuid
from collections.abc import Callable
from typing import Any

from ..hub.errors import HubError
from ..session.errors import JournalError
from ..session.journal_format import Event
from ..session.machine import TrialMachine
from ..session.trials import TrialBook, TrialRecord
from ..session.values import EditOutcome, PendingTrial, ScoreOutcome, SessionState, TrialRules
from .client import ARMS, StationClient

__all__ = ["SCORING", "StationSession", "StationStatus"]

#: ``scoring`` of a station's rules: the runner scores (the operator where it sends no valid score), or the operator.
SCORING = ("auto", "operator")

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Assignment:
    """The assignment in progress: its id, task and round, its arms' addresses (for the runner only)."""

    assignment_id: str
    task: str
    round: int
    addresses: dict[str, str]
    lease_seconds: float


@dataclasses.dataclass(frozen=True)
class StationStatus:
    """What the station's session is doing: its state, the pending trial's phase (``run``, ``score`` or ""),
    and why it is paused or aborted (``reason``)."""

    state: SessionState
    awaiting: str
    trials_done: int
    pending_trial_id: int
    assignment_id: str
    reason: str = ""


class StationSession:
    """One station's trials (a :class:`~evalstop_ros.session.driver.DrivenSession`) in its local journal.

    :param client: The station's hub client; its directory holds the journal (opened here as its writer).
    :param station_id: The station's name (session id ``hub:<station_id>``).
    :param trials: A/B trials (assignments) after which the session finishes (earlier runs count); 0: no limit.
    :param max_faults: Runner faults in a row on one trial after which the trial loop pauses.
    :param scoring: One of :data:`SCORING`.

    The first start journals ``trials``, ``max_faults`` and ``scoring`` as a ``rules`` record; a restart keeps
    those (a changed parameter is logged and ignored) and gives up the assignment it held (its lease is lost:
    the hub requeues it).
    """

    def __init__(self, client: StationClient, station_id: str, *, trials: int = 0, max_faults: int = 3,
                 scoring: str = "auto") -> None:
        if trials < 0 or max_faults < 1 or scoring not in SCORING:
            raise HubError(f"trials must be >= 0, max_faults >= 1 and scoring one of {SCORING}")
        self.client, self.station_id = client, station_id
        self.session_id = f"hub:{station_id}"
        journal = client.open_journal(station_id)  # the writer: a second station on the directory is refused
        self._lock = threading.RLock()
        self._book = TrialBook()
        self._machine = TrialMachine(f"station {station_id!r}", self._book, self._commit, self._pending, self._request)
        self.trials, self.max_faults, self.scoring = trials, max_faults, scoring
        self._rules = False
        self._done = 0  # results journaled
        self._round = 0  # assignments leased
        self._current: _Assignment | None = None
        self._reason = ""  # why it is paused or aborted
        self._open = ""  # the assignment leased and neither done nor given up (after a restart: without addresses)
        self._trials_of: dict[str, list[int]] = {}  # assignment -> its trials
        #: Called after a change the hub thread acts on (a result to upload, an assignment given up).
        self.on_change: Callable[[], None] = lambda: None
        try:
            events = journal.events()[1:]
        except JournalError as err:
            raise HubError(f"station journal: {err}") from err
        for event in events:
            self._apply(event)
        if not self._rules:  # the first start: the parameters become the journaled rules
            self._commit("rules", None, max_faults=max_faults, trials=trials, scoring=scoring)
        elif (self.trials, self.max_faults, self.scoring) != (trials, max_faults, scoring):
            log.warning("station %s: its journal %s holds max_faults %d, trials %d, scoring %s; the parameters "
                        "(max_faults %d, trials %d, scoring %s) are ignored", station_id, client.journal_path,
                        self.max_faults, self.trials, self.scoring, max_faults, trials, scoring)
        if self._machine.state == SessionState.IDLE:
            self._machine.start()
        self._give_up("the station restarted: its lease is lost and the hub requeues it")
        self._finish_if_spent()

    # -- the journal ------------------------------------------------------------------------
    def _commit(self, kind: str, trial_id: int | None, **payload: Any) -> None:
        try:
            event = self.client.journal.write(kind, trial_id, **payload)
        except JournalError as err:
            raise HubError(f"station journal: {err}") from err
        self._apply(event)

    def _apply(self, event: Event) -> None:
        p = event.payload
        if event.kind == "rules":
            self.trials, self.max_faults, self.scoring = int(p["trials"]), int(p["max_faults"]), str(p["scoring"])
            self._rules = True
        elif event.kind == "leased":
            self._round += 1
            self._open = str(p["assignment_id"])
            self._trials_of[self._open] = []
        elif event.kind in ("score_accepted", "void"):
            self._book.apply(event)
        elif event.kind in ("result", "given_up"):
            self._done += event.kind == "result"
            if self._open == p["assignment_id"]:
                self._open, self._current = "", None
        else:
            if event.kind in ("paused", "resumed", "aborted"):
                self._reason = str(p.get("reason", ""))
            if event.kind == "trial_requested":
                self._trials_of.setdefault(str(p["assignment_id"]), []).append(int(event.trial_id or 0))
            problem = self._machine.apply(event)
            if problem:
                raise HubError(f"station journal {self.client.journal_path}, event {event.seq}: {problem}")

    # -- the hub's work -----------------------------------------------------------------------
    def assign(self, work: dict[str, Any], addresses: dict[str, str]) -> bool:
        """Take a leased assignment (``work`` as the hub sent it, its arms' ``addresses``): journal it and
        request arm ``A``. False (nothing journaled) if the station wants no work now (:meth:`wants_work`)."""
        with self._lock:
            if not self.wants_work():
                return False
            self._commit("leased", None, assignment_id=work["assignment_id"], task=work["task"],
                         lease_deadline=work["lease_deadline"])
            self._current = _Assignment(str(work["assignment_id"]), str(work["task"]), self._round,
                                        {arm: str(addresses[arm]) for arm in ARMS},
                                        float(work.get("lease_seconds") or 60.0))
            self._request_arm("A")
        log.info("assignment %s leased: task %s, arms A then B (round %d)", work["assignment_id"], work["task"],
                 self._round)
        return True

    def _request_arm(self, arm: str) -> None:
        a = self._current
        assert a is not None
        self._commit("trial_requested", len(self._book.trials) + 1, assignment_id=a.assignment_id, round=a.round,
                     policy_id=arm, label=arm, task=a.task, initial_condition="", token=secrets.token_hex(6),
                     rerun_of=None)

    def wants_work(self) -> bool:
        """Neither over, nor holding an assignment, nor at the end of its budget."""
        with self._lock:
            return not self._machine.over and not self._open and not self._spent()

    def _spent(self) -> bool:
        return self.trials > 0 and self._done >= self.trials

    def lease(self) -> tuple[str, float] | None:
        """The assignment in progress and its lease length (s), or ``None``."""
        with self._lock:
            a = self._current
            return None if a is None else (a.assignment_id, a.lease_seconds)

    def _give_up(self, reason: str) -> str:
        """Void the assignment in progress (its open trial) and journal it given up; its id ("" if none)."""
        assignment_id = self._open
        if not assignment_id:
            return ""
        open_trials = self._trials_of.get(assignment_id, [])
        for trial_id in open_trials:
            record = self._book.trials[trial_id]
            if not record.closed:
                self._commit("void", trial_id, reason=reason, had_score=False)
        self._commit("given_up", None, assignment_id=assignment_id, faults=self._machine.faults, reason=reason)
        log.warning("assignment %s given up (%s); the hub requeues it", assignment_id, reason)
        return assignment_id

    def _finish_if_spent(self) -> None:
        if self._spent() and not self._open and self._machine.state in (SessionState.RUNNING,
                                                                                SessionState.PAUSED):
            self._commit("finished", None, reason=f"{self._done} of {self.trials} trials journaled")
            log.info("station %s finished: %d trials journaled", self.station_id, self._done)

    # -- the session the trial loop drives (session/driver.py) -------------------------------
    @property
    def state(self) -> SessionState:
        """The state machine's state (the station runs while it waits for work)."""
        return self._machine.state

    @property
    def paused(self) -> bool:
        """Paused: no run starts, no score is taken."""
        return self._machine.state == SessionState.PAUSED

    @property
    def trial_rules(self) -> TrialRules:
        """The journaled rules (``max_faults``, ``scoring``) as the trial loop's."""
        return TrialRules(self.max_faults, self.scoring == "auto", "")

    @property
    def runner_faults(self) -> int:
        """Runner faults in a row on the pending trial, since it was requested or the station resumed."""
        return self._machine.faults

    @property
    def runner_message(self) -> str:
        """The last run's message as an operator may see it (a category and an error id)."""
        return self._machine.runner_message

    @property
    def rejections(self) -> int:
        """Scores rejected since this object was built."""
        return self._machine.rejections

    def pause(self, reason: str = "") -> None:
        """Pause (no new run starts; the lease is kept alive); :class:`~evalstop_ros.session.errors.SessionError`
        unless running."""
        with self._lock:
            self._machine.pause(reason or "paused by the operator")

    def resume(self) -> None:
        """Resume (``max_faults`` more runs)."""
        with self._lock:
            self._machine.resume()

    def abort(self, reason: str = "") -> None:
        """Abort for good: the assignment in progress is given up, no new work is leased; what is journaled is
        still uploaded."""
        with self._lock:
            reason = reason or "aborted by the operator"
            self._machine.abort(reason)
            self._give_up(f"station aborted: {reason}")
        self.on_change()

    def confirm_reset(self, trial_id: int, attempt: int = 0) -> EditOutcome:
        """A station asks for no reset confirmations: refused."""
        return EditOutcome(False, "a hub station does not ask for reset confirmations", trial_id)

    def _pending(self) -> TrialRecord | None:
        a = self._current
        if a is None:
            return None
        return next((self._book.trials[t] for t in self._trials_of.get(a.assignment_id, [])
                     if not self._book.trials[t].closed), None)

    def _request(self, record: TrialRecord) -> PendingTrial:
        a = self._current
        address = a.addresses[record.label] if a is not None and a.round == record.round else ""
        task = f"hub assignment {a.assignment_id}, arm {record.label}" if a is not None else ""
        return PendingTrial(
            session_id=self.session_id, trial_id=record.trial_id, round=record.round, attempt=record.attempt,
            label=record.label, policy_id=address, task=record.task, task_description=task, initial_condition="",
            reset_instructions="", token=record.token)

    def pending_trial(self) -> PendingTrial | None:
        """The trial to run or score next (arm A, then B), ``None`` while waiting for work.

        ``policy_id`` is the arm's policy-server address: for the runner's goal only.
        """
        with self._lock:
            record = self._pending()
            return None if record is None else self._request(record)

    def next_trial(self) -> PendingTrial | None:
        """The pending trial (the hub thread leases the work; ``None`` while there is none)."""
        return self.pending_trial()

    def status(self) -> StationStatus:
        """The state, the pending trial's phase, the trials journaled."""
        with self._lock:
            record = self._pending()
            awaiting = "" if record is None else "score" if record.ran_ok else "run"
            return StationStatus(self._machine.state, awaiting, self._done, record.trial_id if record else 0,
                                 self._current.assignment_id if self._current else "", self._reason)

    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None,
                             goal_seal: dict[str, Any] | None = None) -> PendingTrial | None:
        """The runner's result of the pending trial (:meth:`~evalstop_ros.session.machine.TrialMachine.record_runner_result`).

        Journaled with the runner's category and error id only: its own words may name the policy, and a station
        has no key to seal them (nor the goal's seal) with."""
        with self._lock:
            return self._machine.record_runner_result(trial_id, ok, duration_s, message, auto_score=auto_score,
                                                      detail=False)

    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None:
        """The pending trial's automatic score from its run, not yet submitted (``None`` if none)."""
        with self._lock:
            return self._machine.held_auto_score()

    def submit_score(self, trial_id: int, token: str, success: bool, progress: float,
                     operator: str = "", notes: str = "") -> ScoreOutcome:
        """Score a trial, checked as a session checks it (:meth:`~evalstop_ros.session.machine.TrialMachine.submit_score`);
        arm B's score journals the assignment's result, which the hub thread uploads."""
        with self._lock:
            outcome = self._machine.submit_score(trial_id, token, success, progress, operator, notes,
                                                 accept=self._accept)
        if outcome.accepted and not outcome.duplicate:
            self.on_change()
        return outcome

    def _accept(self, record: TrialRecord, submission: dict[str, Any]) -> ScoreOutcome:
        self._commit("score_accepted", record.trial_id, submission=submission)
        a = self._current
        assert a is not None and record.round == a.round  # only the current assignment's trial can have run
        if record.label == "A":
            self._request_arm("B")
            return ScoreOutcome(True, False, f"trial {record.trial_id} scored")
        scores = {self._book.trials[t].label: self._book.trials[t].score for t in self._trials_of[a.assignment_id]}
        value = {arm: (1.0 if s.success else s.progress) for arm, s in scores.items() if s is not None}
        # journaled (fsync'ed) before anything is uploaded; the hub thread uploads it
        self._commit("result", None, assignment_id=a.assignment_id, upload_id=uuid.uuid4().hex,
                     score_a=value["A"], score_b=value["B"])
        log.info("assignment %s done (scored by %s): result journaled locally, uploading", a.assignment_id,
                 str(submission.get("operator", ""))[:64])
        self._finish_if_spent()
        return ScoreOutcome(True, False, f"trial {record.trial_id} scored")

    def void_score(self, trial_id: int, reason: str) -> EditOutcome:
        """Void the pending trial (``correct_score``'s void, e.g. after the fault limit): its assignment is
        given up (journaled ``given_up``); the hub requeues it when its lease runs out."""
        with self._lock:
            record = self._pending()
            if record is None or record.trial_id != trial_id:
                return EditOutcome(False, f"trial {trial_id} is not the pending trial; at a hub station only "
                                   "the pending trial can be voided", None)
            given_up = self._give_up(reason or "voided")
        self.on_change()
        return EditOutcome(True, f"trial {trial_id} voided: assignment {given_up} given up", trial_id)
