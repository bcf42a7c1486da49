"""The evaluation session: a journaled state machine between the ROS nodes and the tests.

Protocol
--------
The manager node (or a test) drives one :class:`EvaluationSession`::

    session = EvaluationSession.open("session.db", config, "2024-06-01-droid")  # create or resume
    session.start()
    while (trial := session.next_trial()) is not None:
        prompt = trial.operator_prompt()            # label, task, reset instructions, token
        ...                                         # operator resets the scene; runner runs
        session.record_runner_result(trial.trial_id, ok=True, duration_s=41.0)
        outcome = session.submit_score(trial.trial_id, trial.token, success=True, progress=1.0)
    session.comparisons(); session.letters()

States: ``IDLE -> RUNNING <-> PAUSED -> FINISHED | ABORTED``.  One trial is pending at a time:
:meth:`next_trial` returns it (creating it first if needed) until it is scored or voided.  A
failed run (``ok=False``) keeps the trial pending; :meth:`next_trial` then returns the same
trial with ``attempt`` increased, so the retry runs the same policy from the same condition in
the same round.  Voiding (:meth:`void_score`, a reason is required) a *pending* trial gives up on
it; voiding a *scored* trial removes its score and schedules a re-run: the next trial (a new
trial id and token) runs the same policy in the same round from the same condition, so it pairs
with the same partners.  Public methods take an internal lock, so the node may call them from
several executor threads.

What is journaled when, and why a crash loses nothing
-----------------------------------------------------
Every change is first appended to the :class:`~.journal.Journal` (one durable transaction)
and only then applied to memory, by the very function that replays the journal
(``_apply``).  Constructing a session over an existing journal replays all events in order, so
the state after a restart is, by construction, the state before the crash:

``config``
    :meth:`Journal.open` on a new journal: the exact validated configuration and its hash.
``started``, ``paused``, ``resumed``, ``aborted``
    :meth:`start`, :meth:`pause`, :meth:`resume`, :meth:`abort` (with the reason).
``trial_requested``
    :meth:`next_trial`, before the request is returned: round, policy, label, task, condition,
    token, re-run of.  Replay recomputes it from the plan and checks it.
``runner_result``
    :meth:`record_runner_result`.
``score_accepted`` / ``post_decision_score``
    :meth:`submit_score`, before the tests are fed and the outcome returned (the second when all
    the policy's comparisons were already decided).
``score_rejected`` / ``score_duplicate``
    :meth:`submit_score`, with the reason or the re-sent score.  Audit only: no state change.
``correction`` / ``void``
    :meth:`correct_score`, :meth:`void_score`, :meth:`undo_last` (with the reason).
``decision``
    Right after the event that made a test decide.  It is derived: replay recomputes and
    checks it, and writes it if the crash came between the score and the decision.
``finished``
    When every comparison x metric is decided or out of budget (derived like ``decision``).

A crash *before* an append leaves no trace, and the caller never got an answer, so it retries;
a crash *after* it leaves the event, which the restarted session has applied, so a retried score
is recognised as a byte-identical duplicate and acknowledged.  Every random choice comes from
stateless seeded streams (:mod:`.plan`; STEP's draws from ``(seed, n)``), so nothing else needs
saving.

Statistics
----------
Each comparison x metric is one :class:`~evalstop_ros.stats.sequential.PairedProcess` (R = 1)
at level ``metric.alpha / m`` (Bonferroni over the ``m`` comparisons; :mod:`.config`), fed the
pairs of :func:`~.trials.form_pairs` in collection order, stopped at its first decision
(step.md pitfall 6) or after ``n_max`` pairs (``BUDGET_EXHAUSTED``).  A test's state is always
*exactly* the result of feeding its current pair list to a fresh process: new pairs are fed
incrementally, and when a correction or void changes an earlier pair the process is rebuilt and
the whole list replayed.  A correction or void that would change a pair a decided test
consumed is refused -- announced decisions never change.  With ``correction: holm`` the live
tests (and so the stops) are the same; Holm's step-down is applied to their anytime-valid
p-values in :meth:`EvaluationSession.comparisons` and :meth:`EvaluationSession.letters`, as a
non-directional "these differ" claim.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import hmac
import json
import logging
import math
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ..stats.families import Comparison, compact_letter_display, holm
from ..stats.registry import make_process, run_test
from ..stats.sequential import Decision, PairedProcess, SequentialResult
from .config import MetricConfig, SessionConfig, config_diff
from .errors import JournalError, SessionError
from .journal import Event, Journal, encode_payload, read_journal
from .plan import Plan
from .trials import TrialBook, TrialRecord, form_pairs, metric_value

__all__ = [
    "ComparisonStatus",
    "EditOutcome",
    "EvaluationSession",
    "OfflineResult",
    "OperatorPrompt",
    "ScoreOutcome",
    "SessionState",
    "SessionStatus",
    "TrialRequest",
    "offline_decisions",
]

logger = logging.getLogger(__name__)

#: (trial of policy_a, trial of policy_b, value of a, value of b): one pair as fed to a test.
FedPair = tuple[int, int, float, float]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[Concatenate[EvaluationSession, _P], _R]) -> Callable[Concatenate[EvaluationSession, _P], _R]:
    """Run a public method under the session's lock (calls may come from several threads)."""

    @functools.wraps(method)
    def wrapper(self: EvaluationSession, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class SessionState(str, enum.Enum):
    """Life cycle of a session."""

    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclasses.dataclass(frozen=True)
class OperatorPrompt:
    """What the operator may see about a trial: no policy id, only the blinded label."""

    session_id: str
    trial_id: int
    attempt: int
    label: str
    task: str
    task_description: str
    initial_condition: str
    reset_instructions: str
    token: str


@dataclasses.dataclass(frozen=True)
class TrialRequest:
    """The pending trial, for the manager node.

    Attributes
    ----------
    session_id, trial_id:
        Trial ids are 1, 2, 3, ... within the session.
    round:
        Scheduling round (each active policy once per round).
    attempt:
        1 for the first run, +1 after each failed run.
    label:
        Blinded policy label shown to the operator (``X``, ``Y``, ...).
    policy_id:
        The policy to run: for the runner only, never for the operator (use
        :meth:`operator_prompt`).
    task, task_description, initial_condition, reset_instructions:
        Where the trial starts.
    token:
        12 hex characters the score must echo.
    rerun_of:
        The voided trial this one replaces, if any.
    """

    session_id: str
    trial_id: int
    round: int
    attempt: int
    label: str
    policy_id: str
    task: str
    task_description: str
    initial_condition: str
    reset_instructions: str
    token: str
    rerun_of: int | None = None

    def operator_prompt(self) -> OperatorPrompt:
        """The request without the policy id."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(OperatorPrompt)}
        return OperatorPrompt(**fields)


@dataclasses.dataclass(frozen=True)
class ScoreOutcome:
    """Answer to :meth:`EvaluationSession.submit_score`.

    Attributes
    ----------
    accepted:
        The score is recorded (now, or earlier for a duplicate); the operator need not resend.
    duplicate:
        A byte-identical resubmission of the recorded score: acknowledged, nothing changed.
    reason:
        Why it was rejected, or what happened (one line, suitable for the operator and the log).
    post_decision:
        Recorded, but every comparison of the trial's policy was already decided, so it fed no
        test.
    """

    accepted: bool
    duplicate: bool
    reason: str
    post_decision: bool = False


@dataclasses.dataclass(frozen=True)
class EditOutcome:
    """Answer to :meth:`EvaluationSession.correct_score`, :meth:`~EvaluationSession.void_score`
    and :meth:`~EvaluationSession.undo_last`: ``applied``, and why not (or what was done)."""

    applied: bool
    reason: str
    trial_id: int | None = None


@dataclasses.dataclass(frozen=True)
class SessionStatus:
    """A snapshot of the session.

    Attributes
    ----------
    state:
        The :class:`SessionState`.
    trials_requested, trials_scored, trials_voided:
        Counts so far (scored = has an effective score, post-decision ones included).
    rounds:
        Rounds started.
    pending_trial_id:
        The trial waiting to be run or scored, if any.
    awaiting:
        What the pending trial waits for: ``"run"`` (no successful run recorded yet) or
        ``"score"``; ``None`` without a pending trial.
    active_policies:
        Policies still in the rotation (ids: not for the operator).
    comparisons_total, comparisons_decided:
        Tests (comparison x metric), and how many have stopped (decision or budget).
    max_trials_left:
        Upper bound on the trials still needed (no voids or failed runs assumed).
    """

    session_id: str
    state: SessionState
    trials_requested: int
    trials_scored: int
    trials_voided: int
    rounds: int
    pending_trial_id: int | None
    awaiting: str | None
    active_policies: tuple[str, ...]
    comparisons_total: int
    comparisons_decided: int
    max_trials_left: int


@dataclasses.dataclass(frozen=True)
class ComparisonStatus:
    """One comparison x metric.

    Attributes
    ----------
    policy_a, policy_b:
        Baseline (pi_0) and candidate (pi_1); ``B_BETTER`` means ``policy_b`` is better.
    metric, method, alternative:
        The scored quantity and its test.
    alpha:
        This test's level (after the Bonferroni split).
    n:
        Pairs consumed (the test reads nothing after its decision).
    decision:
        :class:`~evalstop_ros.stats.sequential.Decision`.
    pvalue, evalue:
        Anytime-valid p-value and e-value now (NaN where the method defines none, e.g. STEP).
    mean_a, mean_b:
        Mean score of each side over the consumed pairs (NaN before the first pair).
    stopping_trial:
        Pair index (1-based) of the decision, or ``None``.
    holm_reject:
        With ``correction: holm``: whether Holm's step-down over this metric's current p-values
        rejects equality (a non-directional claim; valid at any time because the p-values are
        anytime-valid).  ``None`` with Bonferroni.
    """

    policy_a: str
    policy_b: str
    metric: str
    method: str
    alternative: str
    alpha: float
    n: int
    decision: Decision
    pvalue: float
    evalue: float
    mean_a: float
    mean_b: float
    stopping_trial: int | None
    holm_reject: bool | None


@dataclasses.dataclass(frozen=True)
class OfflineResult:
    """One comparison x metric re-run by :func:`offline_decisions`."""

    policy_a: str
    policy_b: str
    metric: str
    result: SequentialResult


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _json_safe(value: object) -> object:
    """A submitted value as it can be journaled (non-finite floats and odd types as text)."""
    if isinstance(value, (bool, str, int)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)


class _Test:
    """One comparison x metric: its process and the pairs it has consumed."""

    def __init__(self, index: int, comparison: Comparison, metric: MetricConfig, *, alpha: float, n_max: int,
                 seed: int) -> None:
        self.index = index
        self.comparison = comparison
        self.metric = metric
        self.alpha = alpha
        self.n_max = n_max
        self.seed = seed
        self.fed: list[FedPair] = []
        self.process = self._fresh()

    def _fresh(self) -> PairedProcess:
        return make_process(self.metric.method, 1, alpha=self.alpha, alternative=self.metric.alternative,
                            n_max=self.n_max, seed=self.seed, bins=self.metric.bins or 2)

    @property
    def label(self) -> str:
        return f"{self.comparison.policy_a} vs {self.comparison.policy_b} [{self.metric.name}/{self.metric.method}]"

    def involves(self, policy: str) -> bool:
        return policy in (self.comparison.policy_a, self.comparison.policy_b)

    @property
    def decision(self) -> Decision:
        decision = Decision(int(self.process.decision[0]))
        if decision == Decision.CONTINUE and len(self.fed) >= self.n_max:
            return Decision.BUDGET_EXHAUSTED
        return decision

    @property
    def decided(self) -> bool:
        return self.decision != Decision.CONTINUE

    @property
    def stopping_trial(self) -> int | None:
        return int(self.process.stopping_trial[0]) or None

    def wanted(self, book: TrialBook, design: str) -> list[FedPair]:
        """The pair list the current effective scores define (:func:`form_pairs`)."""
        pairs = form_pairs(book, design, self.comparison.policy_a, self.comparison.policy_b)
        name = self.metric.name
        out: list[FedPair] = []
        for pair in pairs:
            score_a, score_b = book.trials[pair.trial_a].score, book.trials[pair.trial_b].score
            assert score_a is not None and score_b is not None
            out.append((pair.trial_a, pair.trial_b, metric_value(score_a, name), metric_value(score_b, name)))
        return out

    def sync(self, wanted: list[FedPair]) -> None:
        """Make the process equal to a fresh one fed ``wanted`` (up to its decision/budget)."""
        if wanted[: len(self.fed)] != self.fed:
            self.process, self.fed = self._fresh(), []  # an earlier pair changed: replay all
        for pair in wanted[len(self.fed):]:
            if self.decided:
                break
            self.process.update(np.array([pair[2]]), np.array([pair[3]]))
            self.fed.append(pair)

    def conflict(self, wanted: list[FedPair]) -> str | None:
        """Why ``wanted`` is not allowed (it changes pairs a decision consumed), or ``None``."""
        if not self.decided or wanted[: len(self.fed)] == self.fed:
            return None
        return (f"comparison {self.label} already decided {self.decision.name} after {len(self.fed)} pairs, "
                "and this change alters pairs it consumed; decided comparisons cannot change")


class EvaluationSession:
    """A journaled evaluation session (see the module docstring for the protocol).

    Parameters
    ----------
    config:
        The validated configuration; must be the one stored in ``journal``.
    journal:
        An open journal of this session (new or existing).  Its events are replayed now.
    session_id:
        Must match the journal's.

    Raises
    ------
    JournalError
        If the journal belongs to another session or configuration, or its replay diverges
        from what this code computes (e.g. the statistics core changed under a running
        session).
    """

    def __init__(self, config: SessionConfig, journal: Journal, session_id: str) -> None:
        if journal.session_id != session_id:
            raise JournalError(f"journal {str(journal.path)!r} belongs to session {journal.session_id!r}, not {session_id!r}")
        if journal.config_hash != config.config_hash:
            changes = config_diff(json.loads(journal.config_json), config.to_dict())
            raise JournalError(f"journal {str(journal.path)!r} holds a different configuration: {'; '.join(changes)}")
        self.config = config
        self.session_id = session_id
        self.plan = Plan(config)
        self._lock = threading.RLock()
        self._journal = journal
        self._book = TrialBook()
        n_metrics = len(config.metrics)
        self._tests = [
            _Test(ci * n_metrics + mi, comparison, metric, alpha=config.comparison_alpha(metric),
                  n_max=config.n_max, seed=self.plan.step_seed(ci, mi))
            for ci, comparison in enumerate(config.comparison_list())
            for mi, metric in enumerate(config.metrics)
        ]
        self._state = SessionState.IDLE
        self._round = 0
        self._queue: tuple[str, ...] = ()
        self._reruns: tuple[int, ...] = ()  # voided scored trials waiting for their re-run
        self._announced: set[int] = set()
        for event in journal.events():
            self._apply(event)
        self._settle()  # a crash between a score and its decision event: write the decision now

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: SessionConfig, session_id: str, *,
             durable: bool = True) -> EvaluationSession:
        """Open (create or resume) the journal at ``path`` and the session over it.

        ``durable`` is passed to :meth:`Journal.open`.  Close the session (or use ``with``) to
        release the journal.
        """
        journal = Journal.open(path, session_id, config, durable=durable)
        try:
            return cls(config, journal, session_id)
        except BaseException:
            journal.close()
            raise

    # -- life cycle ------------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        """The current :class:`SessionState`."""
        return self._state

    def _transition(self, action: str, allowed: tuple[SessionState, ...]) -> None:
        if self._state not in allowed:
            raise SessionError(f"cannot {action}: session {self.session_id!r} is {self._state.value}")

    @_locked
    def start(self) -> None:
        """Start the session (``IDLE -> RUNNING``)."""
        self._transition("start", (SessionState.IDLE,))
        self._commit("started", None)
        logger.info("session %s started: %d policies, %d tests", self.session_id, len(self.config.policies), len(self._tests))

    @_locked
    def pause(self, reason: str = "") -> None:
        """Pause (``RUNNING -> PAUSED``): scores are refused until :meth:`resume`."""
        self._transition("pause", (SessionState.RUNNING,))
        self._commit("paused", None, reason=str(reason))
        logger.info("session %s paused: %s", self.session_id, reason)

    @_locked
    def resume(self) -> None:
        """Resume (``PAUSED -> RUNNING``)."""
        self._transition("resume", (SessionState.PAUSED,))
        self._commit("resumed", None)
        logger.info("session %s resumed", self.session_id)

    @_locked
    def abort(self, reason: str) -> None:
        """Abort for good (any non-final state); ``reason`` is required."""
        if not str(reason).strip():
            raise SessionError("cannot abort: a reason is required")
        self._transition("abort", (SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED))
        self._commit("aborted", None, reason=str(reason))
        logger.info("session %s aborted: %s", self.session_id, reason)

    @_locked
    def close(self) -> None:
        """Close the journal.  The session object must not be used afterwards."""
        self._journal.close()

    def __enter__(self) -> EvaluationSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- trials ----------------------------------------------------------------------------
    @_locked
    def pending_trial(self) -> TrialRequest | None:
        """The trial waiting to be run or scored, if any (any state; creates nothing)."""
        record = self._pending()
        return None if record is None else self._request(record)

    @_locked
    def next_trial(self) -> TrialRequest | None:
        """The pending trial, creating (and journaling) the next one if none is pending.

        Returns ``None`` once the session is finished or aborted.

        Raises
        ------
        SessionError
            If the session is idle or paused.
        """
        if self._state in (SessionState.FINISHED, SessionState.ABORTED):
            return None
        self._transition("request a trial", (SessionState.RUNNING,))
        record = self._pending()
        if record is None:
            trial_id, payload, _ = self._next_spec()
            self._commit("trial_requested", trial_id, **payload)
            record = self._book.trials[trial_id]
            logger.info("trial %d (label %s) requested: round %d, task %s, condition %s", trial_id, record.label,
                        record.round, record.task, record.initial_condition)
        return self._request(record)

    @_locked
    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "") -> TrialRequest | None:
        """Record the runner's result for the pending trial.

        Returns the trial to run next: ``None`` after a successful run (the trial now waits
        for its score), or the same trial with ``attempt + 1`` after a failure (retry it, or
        :meth:`void_score` it).

        Raises
        ------
        SessionError
            If ``trial_id`` is not the pending trial, or the session is not running or paused.
        """
        self._transition("record a runner result", (SessionState.RUNNING, SessionState.PAUSED))
        record = self._pending()
        if record is None or record.trial_id != trial_id:
            pending = None if record is None else record.trial_id
            raise SessionError(f"runner result for trial {trial_id!r}, but the pending trial is {pending}")
        duration = float(duration_s)
        if not (math.isfinite(duration) and duration >= 0):
            raise SessionError(f"`duration_s` must be a finite number >= 0; found {duration_s!r}")
        self._commit("runner_result", trial_id, ok=bool(ok), duration_s=duration, message=str(message))
        logger.info("trial %d (label %s) run %s in %.1f s%s", trial_id, record.label, "ok" if ok else "FAILED",
                    duration, f": {message}" if message else "")
        return None if ok else self._request(record)

    @_locked
    def submit_score(self, trial_id: int, token: str, success: bool, progress: float, operator: str = "",
                     notes: str = "", *, preference: str = "") -> ScoreOutcome:
        """Score the pending trial.

        Checks, in order (the first failing one is the reason; every rejection is journaled as
        ``score_rejected`` and changes no test): unknown trial; wrong token; already scored (a
        byte-identical resubmission is a *duplicate*: acknowledged, journaled as
        ``score_duplicate``, ignored); voided trial; session not running; no successful run
        recorded; ``success`` not a bool; ``progress`` not finite or outside [0, 1];
        ``preference`` not ``""``, ``"="`` or a label of the trial's round.  A valid score whose
        policy has no undecided comparison left is journaled as ``post_decision_score`` and fed
        to no test.

        ``operator``, ``notes`` and ``preference`` (the operator's preferred label in the round,
        RoboArena-style; stored, not tested) are journaled with the score.
        """
        if isinstance(success, np.bool_):
            success = bool(success)
        submission: dict[str, Any] = {
            "token": _json_safe(token), "success": _json_safe(success), "progress": _json_safe(progress),
            "operator": _json_safe(operator), "notes": _json_safe(notes), "preference": _json_safe(preference),
        }
        if not self._known(trial_id):
            return self._reject(trial_id, submission, f"unknown trial {trial_id!r}")
        record = self._book.trials[trial_id]
        if not (isinstance(token, str) and hmac.compare_digest(token, record.token)):
            return self._reject(trial_id, submission, f"wrong token for trial {trial_id}")
        valid_number = isinstance(progress, (int, float, np.floating, np.integer)) and not isinstance(progress, bool)
        if valid_number:
            submission["progress"] = _json_safe(float(progress))
        if record.submission is not None:
            if json.loads(encode_payload(submission)) == record.submission:
                self._commit("score_duplicate", trial_id, submission=submission)
                logger.info("trial %d (label %s): duplicate score acknowledged", trial_id, record.label)
                return ScoreOutcome(True, True, f"duplicate of the recorded score of trial {trial_id}; ignored",
                                    record.post_decision)
            return self._reject(trial_id, submission, f"trial {trial_id} is already scored; use a correction to change it")
        if record.voided:
            return self._reject(trial_id, submission, f"trial {trial_id} was voided")
        if self._state != SessionState.RUNNING:
            return self._reject(trial_id, submission, f"session is {self._state.value}; scores are accepted only while it runs")
        if not record.ran_ok:
            return self._reject(trial_id, submission, f"trial {trial_id} has no successful run recorded yet")
        problem = self._score_problem(success, progress) or self._preference_problem(preference, record.round)
        if problem:
            return self._reject(trial_id, submission, problem)
        undecided = [t for t in self._tests if t.involves(record.policy) and not t.decided]
        kind = "score_accepted" if undecided else "post_decision_score"
        self._commit(kind, trial_id, submission=submission)
        logger.info("trial %d (label %s) scored: success=%d progress=%.3g%s", trial_id, record.label, success,
                    progress, "" if undecided else " (post-decision: fed to no test)")
        self._settle()
        if undecided:
            return ScoreOutcome(True, False, f"trial {trial_id} scored")
        return ScoreOutcome(True, False, f"trial {trial_id} recorded after all its comparisons were decided; "
                            "fed to no test", post_decision=True)

    @staticmethod
    def _score_problem(success: object, progress: object) -> str | None:
        if not isinstance(success, bool):
            return f"`success` must be true or false; found {success!r}"
        if isinstance(progress, bool) or not isinstance(progress, (int, float, np.floating, np.integer)):
            return f"`progress` must be a number in [0, 1]; found {progress!r}"
        value = float(progress)
        if not math.isfinite(value):
            return f"`progress` must be finite; found {value!r}"
        if not 0.0 <= value <= 1.0:
            return f"`progress` must lie in [0, 1]; found {value!r}"
        return None

    def _preference_problem(self, preference: object, round_number: int) -> str | None:
        labels = sorted(self.plan.label(p, round_number) for p in self.config.policies)
        if preference in ("", "=", *labels):
            return None
        return f"`preference` must be '', '=' or one of the labels {labels}; found {preference!r}"

    def _known(self, trial_id: object) -> bool:
        return isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in self._book.trials

    def _reject(self, trial_id: object, submission: dict[str, Any], reason: str) -> ScoreOutcome:
        """Journal a rejected score (with the trial id as claimed) and say why."""
        column = trial_id if isinstance(trial_id, int) and self._known(trial_id) else None
        self._commit("score_rejected", column, reason=reason, claimed_trial_id=_json_safe(trial_id),
                     submission=submission)
        logger.warning("score for trial %s rejected: %s", trial_id, reason)
        return ScoreOutcome(False, False, reason)

    # -- corrections -----------------------------------------------------------------------
    @_locked
    def correct_score(self, trial_id: int, success: bool, progress: float, reason: str) -> EditOutcome:
        """Replace a trial's effective score (journaled as ``correction``, with the old one).

        Refused (nothing journaled) without a reason, for a trial without a score, for an
        invalid score, for no change, in an aborted session, and when a decided comparison
        consumed the trial (its decision is final).  The tests are rebuilt by replay.
        """
        refused = self._edit_refusal(trial_id, reason, need_score=True)
        if refused is not None:
            return refused
        record = self._book.trials[trial_id]
        assert record.score is not None
        problem = self._score_problem(success, progress)
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
        in a finished or aborted session for a pending trial, and when a decided comparison
        consumed the trial's score.  Voiding shifts later pairs of the ``independent`` design,
        which is refused too if a decided comparison consumed any of them.  The decision to void
        must not depend on the outcome (voiding failures and re-running them is p-hacking);
        the reason is journaled for the audit.
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
        return EditOutcome(True, f"trial {trial_id} voided", trial_id)

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
        """Why applying ``event`` would change a decided test, or ``None``."""
        book = copy.deepcopy(self._book)
        book.apply(event)
        for test in self._tests:
            problem = test.conflict(test.wanted(book, self.config.design))
            if problem:
                return f"trial {event.trial_id}: {problem}"
        return None

    # -- reports ---------------------------------------------------------------------------
    @_locked
    def status(self) -> SessionStatus:
        """A :class:`SessionStatus` snapshot."""
        pending = self._pending()
        active = self._active() if self._state not in (SessionState.FINISHED, SessionState.ABORTED) else ()
        return SessionStatus(
            session_id=self.session_id,
            state=self._state,
            trials_requested=len(self._book.trials),
            trials_scored=len(self._book.scored()),
            trials_voided=sum(r.voided for r in self._book.trials.values()),
            rounds=self._round,
            pending_trial_id=None if pending is None else pending.trial_id,
            awaiting=None if pending is None else ("score" if pending.ran_ok else "run"),
            active_policies=active,
            comparisons_total=len(self._tests),
            comparisons_decided=sum(t.decided for t in self._tests),
            max_trials_left=self._max_trials_left(active),
        )

    def _max_trials_left(self, active: tuple[str, ...]) -> int:
        open_tests = [t for t in self._tests if not t.decided]
        if not active or not open_tests:
            return 0
        if not self.config.drop_decided:
            return len(active) * max(self.config.n_max - len(t.fed) for t in open_tests)
        return sum(max((self.config.n_max - len(t.fed) for t in open_tests if t.involves(p)), default=0) for p in active)

    @_locked
    def comparisons(self) -> list[ComparisonStatus]:
        """One :class:`ComparisonStatus` per comparison x metric, in the family's order."""
        holm_rejects: dict[int, bool] = {}
        if self.config.correction == "holm":
            for metric in self.config.metrics:
                tests = [t for t in self._tests if t.metric is metric]
                rejected = holm([float(t.process.pvalue()[0]) for t in tests], metric.alpha or 0.0)
                holm_rejects.update({t.index: bool(r) for t, r in zip(tests, rejected)})
        out = []
        for test in self._tests:
            fed = np.asarray(test.fed, dtype=np.float64).reshape(-1, 4)
            means = fed[:, 2:].mean(axis=0) if fed.size else np.full(2, np.nan)
            out.append(ComparisonStatus(
                policy_a=test.comparison.policy_a, policy_b=test.comparison.policy_b, metric=test.metric.name,
                method=test.metric.method, alternative=test.metric.alternative, alpha=test.alpha, n=len(test.fed),
                decision=test.decision, pvalue=float(test.process.pvalue()[0]), evalue=float(test.process.evalue()[0]),
                mean_a=float(means[0]), mean_b=float(means[1]), stopping_trial=test.stopping_trial,
                holm_reject=holm_rejects.get(test.index),
            ))
        return out

    @_locked
    def letters(self, metric: str | None = None) -> dict[str, str]:
        """Compact letter display of one metric (default: the first configured).

        Policies sharing a letter were not found different; the best mean carries ``a``.
        "Different" means a directional decision, or (with ``correction: holm``) a Holm
        rejection.  Means are over every effective score of the policy.  Empty while some
        policy has no score yet.

        Raises
        ------
        SessionError
            For an unknown metric.
        """
        name = metric or self.config.metrics[0].name
        if name not in {m.name for m in self.config.metrics}:
            raise SessionError(f"`metric` should be one of {[m.name for m in self.config.metrics]}; found {metric!r}")
        statuses = self.comparisons()
        differs = {
            frozenset((s.policy_a, s.policy_b)) for s in statuses if s.metric == name
            and (s.decision in (Decision.A_BETTER, Decision.B_BETTER) or s.holm_reject)
        }
        means = []
        for policy in self.config.policies:
            scores = self._book.scored(policy)
            if not scores:
                return {}
            means.append(float(np.mean([metric_value(r.score, name) for r in scores if r.score is not None])))
        return compact_letter_display(self.config.policies, means, differs)

    # -- the journaled state machine -------------------------------------------------------
    def _commit(self, kind: str, trial_id: int | None, **payload: Any) -> None:
        """Journal an event, then apply it exactly as a replay would."""
        seq = self._journal.append(kind, trial_id, **payload)
        self._apply(Event(seq, 0, kind, trial_id, json.loads(encode_payload(payload))))

    def _apply(self, event: Event) -> None:
        handler: Callable[[Event], None] | None = getattr(self, f"_on_{event.kind}", None)
        if handler is None:
            raise JournalError(f"event {event.seq}: unknown kind {event.kind!r}")
        handler(event)

    def _diverged(self, event: Event, detail: str) -> JournalError:
        return JournalError(f"journal {str(self._journal.path)!r}, event {event.seq} ({event.kind}): replay diverged: "
                            f"{detail}")

    def _on_config(self, event: Event) -> None:
        if event.seq != 1 or event.payload.get("config_hash") != self.config.config_hash:
            raise self._diverged(event, "the config event must be first and match the configuration")

    def _on_started(self, event: Event) -> None:
        self._expect_state(event, SessionState.IDLE)
        self._state = SessionState.RUNNING

    def _on_paused(self, event: Event) -> None:
        self._expect_state(event, SessionState.RUNNING)
        self._state = SessionState.PAUSED

    def _on_resumed(self, event: Event) -> None:
        self._expect_state(event, SessionState.PAUSED)
        self._state = SessionState.RUNNING

    def _on_aborted(self, event: Event) -> None:
        self._expect_state(event, SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED)
        self._state = SessionState.ABORTED

    def _on_finished(self, event: Event) -> None:
        self._expect_state(event, SessionState.RUNNING, SessionState.PAUSED)
        if not all(t.decided for t in self._tests):
            raise self._diverged(event, "finished while some comparisons are undecided")
        self._state = SessionState.FINISHED

    def _expect_state(self, event: Event, *states: SessionState) -> None:
        if self._state not in states:
            raise self._diverged(event, f"{event.kind} in state {self._state.value}")

    def _on_trial_requested(self, event: Event) -> None:
        trial_id, payload, (round_number, queue, reruns) = self._next_spec()
        if event.trial_id != trial_id or event.payload != payload:
            raise self._diverged(event, f"journal has trial {event.trial_id} {event.payload}, the plan gives "
                                 f"trial {trial_id} {payload}")
        self._book.apply(event)
        self._round, self._queue, self._reruns = round_number, queue, reruns

    def _on_runner_result(self, event: Event) -> None:
        self._book.apply(event)

    def _on_score_accepted(self, event: Event) -> None:
        self._book.apply(event)
        self._sync(self._book.trials[event.trial_id].policy)  # type: ignore[index]

    _on_post_decision_score = _on_score_accepted
    _on_correction = _on_score_accepted

    def _on_void(self, event: Event) -> None:
        had_score = self._book.trials[event.trial_id].score is not None  # type: ignore[index]
        self._on_score_accepted(event)
        if had_score:
            self._reruns += (int(event.trial_id),)  # type: ignore[arg-type]

    def _on_score_rejected(self, event: Event) -> None:
        """Audit only."""

    _on_score_duplicate = _on_score_rejected

    def _on_decision(self, event: Event) -> None:
        index = int(event.payload["test"])
        test = self._tests[index] if 0 <= index < len(self._tests) else None
        if test is None:
            raise self._diverged(event, f"unknown test {index}")
        replayed = {"decision": test.decision.name, "n": len(test.fed), "stopping_trial": test.stopping_trial}
        journaled = {key: event.payload.get(key) for key in replayed}
        if replayed != journaled:
            raise self._diverged(event, f"{test.label}: journal has {journaled}, replay gives {replayed}")
        self._announced.add(index)

    def _sync(self, policy: str) -> None:
        for test in self._tests:
            if test.involves(policy):
                test.sync(test.wanted(self._book, self.config.design))

    def _settle(self) -> None:
        """Journal what the last change implies: new decisions, then the end of the session."""
        for test in self._tests:
            if test.decided and test.index not in self._announced:
                trigger = max(test.fed[-1][:2]) if test.fed else None
                self._commit(
                    "decision", trigger, test=test.index, policy_a=test.comparison.policy_a,
                    policy_b=test.comparison.policy_b, metric=test.metric.name, method=test.metric.method,
                    decision=test.decision.name, n=len(test.fed), stopping_trial=test.stopping_trial,
                    pvalue=_finite_or_none(float(test.process.pvalue()[0])),
                    evalue=_finite_or_none(float(test.process.evalue()[0])),
                )
                logger.info("comparison %s: %s after %d pairs", test.label, test.decision.name, len(test.fed))
        live = self._state in (SessionState.RUNNING, SessionState.PAUSED)
        if live and all(t.decided for t in self._tests):
            self._commit("finished", None, reason="every comparison is decided or out of budget")
            logger.info("session %s finished after %d trials", self.session_id, len(self._book.trials))

    # -- scheduling --------------------------------------------------------------------------
    def _active(self) -> tuple[str, ...]:
        """Policies in the rotation, in configuration order."""
        if not self.config.drop_decided:
            return self.config.policies
        open_tests = [t for t in self._tests if not t.decided]
        return tuple(p for p in self.config.policies if any(t.involves(p) for t in open_tests))

    def _pending(self) -> TrialRecord | None:
        if not self._book.trials:
            return None
        last = self._book.trials[len(self._book.trials)]
        return None if last.closed else last

    def _next_spec(self) -> tuple[int, dict[str, Any], tuple[int, tuple[str, ...], tuple[int, ...]]]:
        """The next trial to request: id, journal payload, and the schedule state after it.

        Re-runs of voided trials come first (same policy, round and condition), then the rest
        of the current round, then a new round; policies out of the rotation are skipped.
        """
        active = self._active()
        if len(active) < 2:
            raise SessionError("no pair of active policies is left")  # _settle finishes before this
        trial_id = len(self._book.trials) + 1
        token = self.plan.token(self.session_id, trial_id)
        reruns = [t for t in self._reruns if self._book.trials[t].policy in active]
        if reruns:
            old = self._book.trials[reruns.pop(0)]
            payload = {
                "round": old.round, "policy_id": old.policy, "label": self.plan.label(old.policy, old.round),
                "task": old.task, "initial_condition": old.initial_condition, "token": token,
                "rerun_of": old.trial_id,
            }
            return trial_id, payload, (self._round, self._queue, tuple(reruns))
        round_number, queue = self._round, [p for p in self._queue if p in active]
        while not queue:
            round_number += 1
            queue = list(self.plan.round_order(round_number, active))
        policy = queue.pop(0)
        condition = self.plan.condition(round_number if self.config.design == "paired" else trial_id)
        payload = {
            "round": round_number, "policy_id": policy, "label": self.plan.label(policy, round_number),
            "task": condition.task.id, "initial_condition": condition.initial_condition.id, "token": token,
            "rerun_of": None,
        }
        return trial_id, payload, (round_number, tuple(queue), ())

    def _request(self, record: TrialRecord) -> TrialRequest:
        task = next(t for t in self.config.tasks if t.id == record.task)
        condition = next(c for c in task.initial_conditions if c.id == record.initial_condition)
        return TrialRequest(
            session_id=self.session_id, trial_id=record.trial_id, round=record.round,
            attempt=record.failed_runs + 1, label=record.label, policy_id=record.policy, task=task.id,
            task_description=task.description, initial_condition=condition.id,
            reset_instructions=condition.reset_instructions, token=record.token, rerun_of=record.rerun_of,
        )


def offline_decisions(config: SessionConfig, journal_path: str | os.PathLike[str]) -> list[OfflineResult]:
    """Re-run every comparison x metric on a journal's effective scores, in collection order.

    Independent of the live session object: it folds the journal with
    :class:`~.trials.TrialBook`, forms the pairs with :func:`~.trials.form_pairs` and calls
    each method's own ``*_test`` function (:func:`~evalstop_ros.stats.registry.run_test`)
    with the session's levels, ``n_max`` and STEP seeds.  For a consistent journal each
    result's decision, stopping trial and pair count equal the session's.

    Raises
    ------
    JournalError
        If the journal was written with a different configuration.
    """
    contents = read_journal(journal_path)
    if contents.config_hash != config.config_hash:
        changes = config_diff(contents.config_dict(), config.to_dict())
        raise JournalError(f"journal {str(journal_path)!r} holds a different configuration: {'; '.join(changes)}")
    book = TrialBook().fold(contents.events)
    plan = Plan(config)
    results = []
    for ci, comparison in enumerate(config.comparison_list()):
        pairs = form_pairs(book, config.design, comparison.policy_a, comparison.policy_b)
        for mi, metric in enumerate(config.metrics):
            values = [
                (metric_value(book.trials[p.trial_a].score, metric.name),  # type: ignore[arg-type]
                 metric_value(book.trials[p.trial_b].score, metric.name))  # type: ignore[arg-type]
                for p in pairs
            ]
            a = np.array([v[0] for v in values], dtype=np.float64)
            b = np.array([v[1] for v in values], dtype=np.float64)
            result = run_test(metric.method, a, b, alpha=config.comparison_alpha(metric), alternative=metric.alternative,
                              n_max=config.n_max, seed=plan.step_seed(ci, mi), bins=metric.bins or 2)
            results.append(OfflineResult(comparison.policy_a, comparison.policy_b, metric.name, result))
    return results
