"""The evaluation session: a journaled state machine between the ROS nodes and the tests.

Protocol
--------
The manager node (or a test) drives one :class:`EvaluationSession`::

    session = EvaluationSession.open("session.db", config, "2024-06-01-droid")  # create or resume
    session.start()
    while (trial := session.next_trial()) is not None:
        prompt = trial.operator_prompt()            # label, task, reset instructions, token
        session.confirm_reset(trial.trial_id)       # with confirm_reset: the operator reset the scene
        ...                                         # the runner runs
        session.record_runner_result(trial.trial_id, ok=True, duration_s=41.0)
        outcome = session.submit_score(trial.trial_id, trial.token, success=True, progress=1.0)
    session.comparisons(); session.claims(); session.letters()

States: ``IDLE -> RUNNING <-> PAUSED -> FINISHED | ABORTED``.  One trial is pending at a time:
:meth:`next_trial` returns it (creating it first if needed) until it is scored or voided.  A
failed run (``ok=False``) keeps the trial pending; :meth:`next_trial` then returns the same
trial with ``attempt`` increased, so the retry runs the same policy from the same condition in
the same round.  Voiding (:meth:`void_score`, a reason is required) a *pending* trial gives up on
it (under ``design: adastop`` it is re-run, since an interim needs all its trials); voiding a
*scored* trial removes its score and schedules a re-run: the next trial (a new trial id and
token) runs the same policy in the same round from the same condition, so it pairs with the
same partners.  Public methods take an internal lock, so the node may call them from several
executor threads.

Scheduling
----------
``paired`` / ``independent`` (:mod:`.config`): rounds of every policy in the rotation, in a
random order (:meth:`~.plan.Plan.round_order`).  With ``claim: pooled`` the conditions cycle over
all tasks; with a non-pooled claim each round runs *one task*: the rounds walk through endless
shuffled cycles of the tasks (:meth:`~.plan.Plan.condition` at the walk's position), skipping a
task whose tests are all decided, and the round runs only the policies with an open test on that
task.  ``adastop``: interim ``k`` (the trials' ``round``) runs ``n_per_interim`` trials of every
agent AdaStop still needs, in one random order (:meth:`~.plan.Plan.interim_order`), each from its
own condition.  A policy (agent, task) whose tests are all decided leaves the rotation
(``drop_decided``; always under AdaStop).  ``schedule: active`` (seed 004,
:mod:`evalstop_ros.active.scheduler`): when a round ends, the next round's task is chosen by the
acquisition from the scores so far and journaled (``schedule_choice``) before the round's first
trial; the round then runs like a per-task round on that task, from the task's next condition.

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
    :meth:`next_trial`, before the request is returned: round (interim), label, task, condition,
    re-run of; the policy and the token are sealed (not stored: :mod:`.blinding`, restored from
    the plan's key on replay).  Replay recomputes it from the plan and checks it.
``reset_confirmed``
    :meth:`confirm_reset` (``confirm_reset: true``): the operator reset the scene for run
    ``attempt`` of the pending trial; only then may the runner run it.  The pending trial's phase
    (:attr:`StatusSnapshot.awaiting`) goes ``reset -> run -> score`` (back to ``reset`` after a
    failed run).
``runner_result``
    :meth:`record_runner_result`: ok, duration, the message an operator may see (a category and an
    error id, :mod:`.runner_messages`) and, when the runner said more, its full text sealed.
``score_accepted`` / ``post_decision_score``
    :meth:`submit_score`, before the tests are fed and the outcome returned (the second when all
    the tests the trial could feed were already decided).
``score_rejected`` / ``score_duplicate``
    :meth:`submit_score`, with the reason or the re-sent score.  Audit only: no state change.
``correction`` / ``void``
    :meth:`correct_score`, :meth:`void_score`, :meth:`undo_last` (with the reason).
``decision``
    Right after the event that made a test decide (the score that completed a pair, a Holm
    step or an AdaStop interim), one per newly decided test.  It is derived: replay recomputes
    and checks it, and writes it if the crash came between the score and the decision.
``finished``
    When every test is decided or out of budget (derived like ``decision``).
``active_embeddings``, ``schedule_choice``
    ``schedule: active`` only: the surrogate's embeddings (once, before the first choice) and
    each round's chosen task with the acquisition scores and a digest of the data it saw.
    Replay takes the journaled choice; the audit re-computes it (:mod:`evalstop_ros.audit.active`).
``key_revealed``
    Right after ``finished`` or ``aborted`` (derived): the session's secret randomization key,
    which the ``config`` event committed to (:mod:`.plan`), so the whole plan can be audited.
``message_rejected``
    :meth:`reject_message`: a message the node refused before it reached the session (e.g. a
    failed signature), in bounded form.  Audit only.
``request_noted``
    An authenticated request that journaled nothing else (refused, or a repeat such as pausing
    a paused session): its operator and counter (:meth:`authenticated`).  Audit only.

Authenticated requests (:mod:`.auth`): the first event a request causes carries an ``auth``
entry (``kind``, ``operator``, ``counter``, ``mac``); replay restores each operator's last
counter from them (:meth:`auth_counter`), so a replayed request is refused after a restart too.

A crash *before* an append leaves no trace, and the caller never got an answer, so it retries;
a crash *after* it leaves the event, which the restarted session has applied, so a retried score
is recognised as a byte-identical duplicate and acknowledged.  Every random choice comes from
stateless seeded streams (:mod:`.plan`; STEP's draws from ``(seed, n)``; AdaStop's permutation
paths from :meth:`~.plan.Plan.adastop_seed`), so nothing else needs saving.

Statistics
----------
A *test* is one comparison x metric (x task, with a non-pooled claim); :mod:`.analysis` holds
them.  Each is fed the pairs of :func:`~.trials.form_pairs` in collection order.  A test's
state is always *exactly* the result of feeding its current pair list to fresh processes: new
pairs are fed incrementally, and when a correction or void changes an earlier pair the state is
rebuilt and the whole list replayed.  A correction or void that would change an announced
decision is refused -- announced decisions never change.

**Bonferroni** (``correction: bonferroni``): each test is one
:class:`~evalstop_ros.stats.sequential.PairedProcess` (R = 1) at level ``metric.alpha / m``
(``m`` comparisons; :meth:`~.config.SessionConfig.comparison_alpha`), stopped at its first
decision (seed 003 §IV: the guarantee covers the first stop) or after ``n_max`` pairs (``BUDGET_EXHAUSTED``).  Valid for every
method, STEP and Lai included, under any dependence between comparisons (union bound).

**Sequential Holm** (``correction: holm``; N-SCORE, WSR, SAVI -- methods with an anytime-valid
p-value; config refuses it for STEP and Lai).  The rule is
:class:`~evalstop_ros.stats.families.FamilyProcess`'s, through the same helper
(:func:`~evalstop_ros.stats.families.holm_step`): each comparison contributes its directional
hypotheses (two-sided: "B better" and "A better", ``H = 2 m``; one-sided: ``H = m``), each a
one-sided e-process at ``alpha / H`` with running-minimum p-value
``p_{h,n} = min(1, 1 / max_{n' <= n} X_{h,n'})``.  Analysis step ``n`` runs as soon as every
comparison still open has ``n`` pairs: Holm's step-down at the metric's ``alpha`` over the ``H``
p-values -- the open comparisons' after exactly ``n`` pairs, a decided comparison's from its stop
-- and each newly rejected hypothesis decides its comparison at step ``n`` in its direction.
After step ``n_max`` the open ones are ``BUDGET_EXHAUSTED``.  Valid because each ``p_{h,n}`` is
anytime-valid and never increases, so every claim made at any step is a Holm rejection of the
limits, which are p-values (Ville); Holm controls the family-wise error under arbitrary
dependence; its first threshold is Bonferroni's, so it never claims less.  Synchronising on
pair counts (not on each score) makes the session's decisions those of
:func:`~evalstop_ros.stats.families.run_family` on the same scores: in a paired session without
gaps step ``n`` is round ``n``.  A correction or void that spares the decided comparisons'
pairs cannot undo a Holm decision (a hypothesis's rejection depends on the other p-values only
through those rejected before it); one that would let Holm decide a decided comparison at an
earlier step is refused, so the live decisions always equal the offline analysis of the journal.

**Multi-task claims** (``claim: every | any | per-task``, seed 003 Eq. 11,
:mod:`evalstop_ros.stats.multitask`): each comparison x metric x task is its own Bonferroni
test, on the trials of that task only, at ``task_alpha(metric.alpha / m, T, claim,
task_correction)``: ``every`` with ``iut`` runs each task at the comparison's level
(intersection-union: "better on every task" needs every task's claim), ``bonferroni`` at
``level / T``; ``any``/``per-task`` at ``level / T``, with ``holm`` applying Holm's step-down
over the tasks' anytime-valid p-values when the claim is combined.  :meth:`claims` combines the
per-task results with :func:`~evalstop_ros.stats.multitask.combine_tasks` (as
:func:`~evalstop_ros.stats.multitask.run_multitask` does offline) into a :class:`ClaimSnapshot`,
published as a ``ComparisonStatus`` row with ``task="*"`` (:meth:`ClaimSnapshot.as_comparison`);
Holm over the tasks uses their current p-values, valid at any time, so a claim can only grow
until :attr:`ClaimSnapshot.final`.  A task leaves the rotation when all its tests are decided.

**AdaStop** (``design: adastop``, seed 002, :class:`~evalstop_ros.stats.adastop.AdaStop`): a
group-sequential permutation test of all comparisons of one metric at the metric's ``alpha``
(family-wise, by its own step-down boundaries).  At the end of each interim the ``(agents, N)``
block of the interim's scores is fed to :meth:`AdaStop.update`; each newly decided comparison
is journaled as a ``decision``: ``"larger"``/``"smaller"`` become ``A_BETTER``/``B_BETTER``
(``policy_a`` is AdaStop's first agent), and ``"equal"`` -- no difference detected at the last
interim -- becomes ``BUDGET_EXHAUSTED``.  No p-value or e-value (NaN); ``n`` and
``stopping_trial`` count scores per agent (``k N``).  The session finishes when AdaStop does.
"""

from __future__ import annotations

import collections
import contextlib
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
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ..stats.sequential import Decision
from .analysis import (
    AdaStopTest,
    PairedTest,
    Test,
    build_tests,
    combine_claims,
    interim_records,
    letters,
)
from .blinding import journal_payload, unseal_event
from .config import ROUND_DESIGNS, SessionConfig, config_diff
from .errors import JournalError, SessionError
from .journal import Event, Journal, encode_payload
from .offline import (
    OfflineClaim,
    OfflineResult,
    offline_claims,
    offline_decisions,
    offline_letters,
)
from .plan import Condition, Plan
from .runner_messages import operator_text
from .trials import TrialBook, TrialRecord, metric_value

__all__ = [
    "ClaimSnapshot",
    "ComparisonSnapshot",
    "EditOutcome",
    "EvaluationSession",
    "OfflineClaim",
    "OfflineResult",
    "OperatorPrompt",
    "ScoreOutcome",
    "score_fields",
    "score_submission",
    "SessionState",
    "StatusSnapshot",
    "PendingTrial",
    "offline_claims",
    "offline_decisions",
    "offline_letters",
]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[Concatenate[EvaluationSession, _P], _R]) -> Callable[Concatenate[EvaluationSession, _P], _R]:
    """Run a public method under the session's lock (calls may come from several threads)."""

    @functools.wraps(method)
    def wrapper(self: EvaluationSession, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class SessionState(str, enum.Enum):  # noqa: UP042 (str() of a StrEnum member differs)
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
    round_labels: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PendingTrial:
    """The pending trial, for the manager node.

    Attributes
    ----------
    session_id, trial_id:
        Trial ids are 1, 2, 3, ... within the session.
    round:
        Scheduling round (each active policy once per round); the interim under ``design: adastop``.
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
    round_labels:
        The blinded labels of the policies that run in the trial's round (sorted): what the
        operator may prefer (``preference``) without learning which policy is which.
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
    round_labels: tuple[str, ...] = ()

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
class StatusSnapshot:
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
        What the pending trial waits for: ``"reset"`` (``confirm_reset``: the operator has not
        confirmed the scene reset of its current run), ``"run"`` (no successful run recorded
        yet) or ``"score"``; ``None`` without a pending trial.
    active_policies:
        Policies still in the rotation (ids: not for the operator).
    comparisons_total, comparisons_decided:
        Tests (comparison x metric, x task with a non-pooled claim), and how many have stopped
        (decision or budget).
    max_trials_left:
        Upper bound on the trials still needed (no voids or failed runs assumed).
    active_tasks:
        Tasks still in the rotation (every task unless a non-pooled claim dropped some).
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
    active_tasks: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ComparisonSnapshot:
    """One test: a comparison x metric (x task).

    Attributes
    ----------
    policy_a, policy_b:
        Baseline (pi_0) and candidate (pi_1); ``B_BETTER`` means ``policy_b`` is better.
    metric, method, alternative:
        The scored quantity and its test (``method`` is ``"adastop"`` under that design).
    alpha:
        This test's level: ``metric alpha / m`` (Bonferroni; with ``correction: holm`` Holm's
        first threshold, which its step-down relaxes), the task level of a per-task test, or
        the metric's whole ``alpha`` for AdaStop (family-wise).
    n:
        Pairs consumed (the test reads nothing after its decision); scores per agent for AdaStop.
    decision:
        :class:`~evalstop_ros.stats.sequential.Decision` (with ``correction: holm``: Holm's).
    pvalue, evalue:
        Anytime-valid p-value and e-value now (NaN where the method defines none, e.g. STEP,
        AdaStop).
    mean_a, mean_b:
        Mean score of each side over the consumed pairs (NaN before the first pair).
    stopping_trial:
        Pair index (1-based) of the decision (scores per agent for AdaStop), or ``None``.
    task:
        The task of a per-task test (non-pooled claim); ``""`` for a test over every task; ``"*"``
        for the summary row of a multi-task claim (:meth:`ClaimSnapshot.as_comparison`).
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
    task: str = ""


@dataclasses.dataclass(frozen=True)
class ClaimSnapshot:
    """The multi-task claim of one comparison x metric (non-pooled ``claim``; seed 003 Eq. 11).

    Attributes
    ----------
    policy_a, policy_b, metric, method, alternative:
        As in :class:`ComparisonSnapshot`; ``alternative`` is the claimed direction
        (``"greater"``: ``policy_b`` better).
    claim, correction:
        ``every``/``any``/``per-task``, and how the level was shared among the tasks.
    alpha:
        Level of the claim: the comparison's level (``metric alpha / m``).
    task_alpha:
        Level of each task's test (:func:`~evalstop_ros.stats.multitask.task_alpha`).
    tasks:
        Task ids, in configuration order.
    task_claims:
        Per task, the claim the family licenses (the claimed direction, or ``CONTINUE`` for none):
        a task test's decision in the claimed direction, or with ``holm`` a rejection of Holm's
        step-down over the tasks' current p-values.  Under ``every`` with ``iut`` these are
        components of the intersection-union claim, not claims on their own.
    established:
        ``every``/``any``: the claim is made; ``per-task``: some task claim is made.
    final:
        The claim can no longer change (every task test has stopped, or the outcome is settled:
        ``any`` established, ``every`` established or refuted by a task that stopped unclaimed).
    n:
        Pairs consumed over all tasks (seed 003 §V-C3: the sum of the tasks' stopping times).
    mean_a, mean_b:
        Means over those pairs.
    """

    policy_a: str
    policy_b: str
    metric: str
    method: str
    alternative: str
    claim: str
    correction: str
    alpha: float
    task_alpha: float
    tasks: tuple[str, ...]
    task_claims: tuple[Decision, ...]
    established: bool
    final: bool
    n: int
    mean_a: float
    mean_b: float

    @property
    def decision(self) -> Decision:
        """The claim as a :class:`Decision`: the claimed direction once established,
        ``BUDGET_EXHAUSTED`` once final without it ("no claim"), ``CONTINUE`` before."""
        if self.established:
            return Decision.B_BETTER if self.alternative == "greater" else Decision.A_BETTER
        return Decision.BUDGET_EXHAUSTED if self.final else Decision.CONTINUE

    def as_comparison(self) -> ComparisonSnapshot:
        """The summary row for ``ComparisonStatus`` (``task="*"``, no p-value, no stopping trial)."""
        return ComparisonSnapshot(
            policy_a=self.policy_a, policy_b=self.policy_b, metric=self.metric, method=self.method,
            alternative=self.alternative, alpha=self.alpha, n=self.n, decision=self.decision, pvalue=math.nan,
            evalue=math.nan, mean_a=self.mean_a, mean_b=self.mean_b, stopping_trial=None, task="*",
        )


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """Where the schedule stands (derived from the journal like everything else).

    ``round``: the current round (interim); ``queue``: its policies still to request;
    ``reruns``: voided trials waiting for their re-run; ``position``: the walk position of the
    current round's task (:meth:`EvaluationSession._next_position`; equal to ``round`` when
    every task stays in the rotation).
    """

    round: int = 0
    queue: tuple[str, ...] = ()
    reruns: tuple[int, ...] = ()
    position: int = 0


#: Longest operator/scorer name and notes a score may carry (longer ones are rejected).
OPERATOR_CHARS = 64
NOTES_CHARS = 2000
INSTRUCTION_CHARS = 500
#: Strings kept of a rejected submission, and of a rejection reason, in the journal.
SUMMARY_CHARS = 64
REASON_CHARS = 256
#: Rejection warnings logged per window (the rest are counted and summarized in the next one).
LOG_BURST = 10
LOG_WINDOW_S = 60.0


#: Events a request causes directly (the first one carries the request's ``auth``); derived events
#: (decisions, the next trial, the reveal) never do.
REQUEST_KINDS = frozenset({"started", "paused", "resumed", "aborted", "score_accepted", "post_decision_score",
                           "score_rejected", "score_duplicate", "correction", "void"})


def bounded(value: object, limit: int = SUMMARY_CHARS) -> object:
    """``value`` with a long string (or repr) cut to ``limit`` characters and its length noted."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}... ({len(value)} characters)"
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        return bounded(repr(value)[:limit + 1], limit)
    return value


class RateLimit:
    """At most ``burst`` events per ``window`` seconds (monotonic clock); counts what it refuses."""

    def __init__(self, burst: int, window: float) -> None:
        self.burst, self.window = burst, window
        self._start, self._used, self._dropped = -math.inf, 0, 0

    def allow(self) -> bool:
        """True if one more event fits in the current window."""
        now = time.monotonic()
        if now - self._start >= self.window:
            self._start, self._used = now, 0
        if self._used < self.burst:
            self._used += 1
            return True
        self._dropped += 1
        return False

    def suppressed(self) -> str:
        """``" (N similar messages suppressed)"`` once, after some were refused; else ``""``."""
        dropped, self._dropped = self._dropped, 0
        return f" ({dropped} similar messages suppressed)" if dropped else ""


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _json_safe(value: object) -> object:
    """A submitted value as it can be journaled (non-finite floats and odd types as text)."""
    if isinstance(value, (bool, str, int)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)


def score_submission(token: object, success: object, progress: object, operator: object, notes: object,
                     preference: object, instruction: object = "", pair_invalid: object = False) -> dict[str, Any]:
    """A score as journaled (``submission``), from the fields of a ``TrialScore``.

    ``instruction`` and ``pair_invalid`` appear only when given, so the submissions of every
    other session are as before.  The audit builds the same dictionary from a bag's scores.
    """
    submission: dict[str, Any] = {
        "token": _json_safe(token), "success": _json_safe(success), "progress": _json_safe(progress),
        "operator": _json_safe(operator), "notes": _json_safe(notes), "preference": _json_safe(preference),
    }
    if instruction:
        submission["instruction"] = _json_safe(instruction)
    if pair_invalid:
        submission["pair_invalid"] = _json_safe(pair_invalid)
    return submission


def score_fields(submission: dict[str, Any]) -> dict[str, Any]:
    """The ``TrialScore`` fields (but ``trial_id``) a journaled ``submission`` was built from: the
    inverse of :func:`score_submission`, which :func:`~.auth.signed_score_problem` checks the
    operator's signature against.

    >>> fields = {"token": "k", "success": True, "progress": 0.5, "preference": "A", "notes": "",
    ...           "scorer": "alice", "instruction": "fold it", "pair_invalid": True}
    >>> score_fields(score_submission(*(fields[k] for k in ("token", "success", "progress", "scorer", "notes",
    ...                                                      "preference", "instruction", "pair_invalid")))) == fields
    True
    """
    return {"token": submission.get("token"), "success": submission.get("success"),
            "progress": submission.get("progress"), "preference": submission.get("preference"),
            "notes": submission.get("notes"), "scorer": submission.get("operator"),
            "instruction": submission.get("instruction", ""), "pair_invalid": submission.get("pair_invalid", False)}


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
        self.plan = Plan(config, journal.plan_key)
        self._lock = threading.RLock()
        self._journal = journal
        self._book = TrialBook()
        self._tests: list[Test]
        self._tests, self._families, self._adastop = build_tests(config, self.plan)
        self._state = SessionState.IDLE
        self._schedule = _Schedule()
        self._announced: set[int] = set()
        self._faults = 0  # failed runs of the pending trial in a row (since its request or a resume)
        self._runner_message = ""  # the last runner result's operator text
        #: ``schedule: active``: the journaled embeddings and each round's choice (round -> payload).
        self._embeddings: dict[str, list[list[float]]] | None = None
        self._choices: dict[int, dict[str, Any]] = {}
        self._revealed = False
        self._auth_counters: dict[str, int] = {}  # operator -> highest journaled request counter
        self._auth: dict[str, Any] | None = None  # the request being handled (:meth:`authenticated`)
        #: Scores rejected since this object was built (for diagnostics).
        self.rejections = 0
        self._log_limit = RateLimit(LOG_BURST, LOG_WINDOW_S)
        #: Called with every event right after it is journaled and applied (e.g. the node publishes it).
        self.on_commit: Callable[[Event], None] | None = None
        for event in journal.events():
            self._apply(self._unsealed(event))
        self._settle()  # a crash between a score and its decision event: write the decision now
        self._reveal()  # a crash between the end and the reveal

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: SessionConfig, session_id: str, *,
             durable: bool = True, plan_key: bytes | None = None) -> EvaluationSession:
        """Open (create or resume) the journal at ``path`` and the session over it.

        ``durable`` and ``plan_key`` are passed to :meth:`Journal.open` (``plan_key``: tests only;
        a live session's key comes from the OS).  Close the session (or use ``with``) to release
        the journal.
        """
        new = not os.path.exists(path)
        journal = Journal.open(path, session_id, config, durable=durable, plan_key=plan_key)
        try:
            return cls(config, journal, session_id)
        except BaseException:
            if new:  # a session that cannot start leaves no journal: its id stays usable
                journal.discard()
            else:
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
        """Pause (``RUNNING -> PAUSED``): scores are refused until :meth:`resume`.

        Pausing a paused session does nothing (a re-sent request whose answer was lost).
        """
        if self._state == SessionState.PAUSED:
            return
        self._transition("pause", (SessionState.RUNNING,))
        self._commit("paused", None, reason=str(reason))
        logger.info("session %s paused: %s", self.session_id, reason)

    @_locked
    def resume(self) -> None:
        """Resume (``PAUSED -> RUNNING``); resuming a running session does nothing (a re-send)."""
        if self._state == SessionState.RUNNING:
            return
        self._transition("resume", (SessionState.PAUSED,))
        self._commit("resumed", None)
        logger.info("session %s resumed", self.session_id)

    @_locked
    def abort(self, reason: str) -> None:
        """Abort for good (any non-final state); ``reason`` is required."""
        if not str(reason).strip():
            raise SessionError("cannot abort: a reason is required")
        if self._state == SessionState.ABORTED:
            return
        self._transition("abort", (SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED))
        self._commit("aborted", None, reason=str(reason))
        logger.info("session %s aborted: %s", self.session_id, reason)
        self._reveal()

    def _reveal(self) -> None:
        """Once the session is over, journal its key (checked against the commitment on replay)."""
        if self._state in (SessionState.FINISHED, SessionState.ABORTED) and not self._revealed:
            self._commit("key_revealed", None, key=self.plan.key.hex() if self.plan.key else "",
                         key_commitment=self._journal.key_commitment)
            logger.info("session %s: randomization key revealed (commitment %s)", self.session_id,
                        self._journal.key_commitment[:12])

    @_locked
    def reject_message(self, kind: str, reason: str, summary: dict[str, Any]) -> None:
        """Journal a message refused before it reached the session (audit only; no state change).

        ``summary`` must already be bounded (the node's :mod:`.auth` builds it).
        """
        self._commit("message_rejected", None, message=str(kind)[:64], reason=str(reason)[:256], summary=summary)

    @_locked
    def auth_counter(self, operator: str) -> int:
        """The highest request counter of ``operator`` journaled so far (0 if none)."""
        return self._auth_counters.get(operator, 0)

    @contextlib.contextmanager
    def authenticated(self, auth: dict[str, Any] | None) -> Iterator[None]:
        """Journal ``auth`` (an authenticated request's :class:`~.auth.Check` record) with the request.

        Inside the block, the first event of :data:`REQUEST_KINDS` committed carries ``auth``; if the request commits
        nothing (refused, or a repeat), a ``request_noted`` event does on leaving the block, so
        its counter is journaled either way and a replay stays refused after a restart.
        ``None`` (authentication off) does nothing.  Holds the session's lock for the block.
        """
        if auth is None:
            yield
            return
        with self._lock:
            self._auth = dict(auth)
            try:
                yield
            finally:
                pending, self._auth = self._auth, None
                if pending is not None:
                    self._commit("request_noted", None, auth=pending)

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
    def pending_trial(self) -> PendingTrial | None:
        """The trial waiting to be run or scored, if any (any state; creates nothing)."""
        record = self._pending()
        return None if record is None else self._request(record)

    @_locked
    def next_trial(self) -> PendingTrial | None:
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
            if self.config.schedule == "active":
                self._choose_round()
            trial_id, payload, _ = self._next_spec()
            self._commit("trial_requested", trial_id, **payload)
            record = self._book.trials[trial_id]
            logger.info("trial %d (label %s) requested: round %d, task %s, condition %s", trial_id, record.label,
                        record.round, record.task, record.initial_condition)
        return self._request(record)

    @_locked
    def confirm_reset(self, trial_id: int, attempt: int = 0) -> EditOutcome:
        """The operator confirms that the scene of the pending trial is reset (``confirm_reset``).

        Journals ``reset_confirmed`` for the trial's current run; the trial then waits for its
        run (:attr:`StatusSnapshot.awaiting`).  ``attempt`` (0: the current one) names the run the
        operator saw, so that a confirmation sent before a failed run cannot start the next one.
        Idempotent: confirming a confirmed run again answers ``applied`` and journals nothing (a
        re-sent request whose answer was lost), also once the run is over if it names the attempt.  Refused (nothing journaled) when the session
        does not ask for confirmations, is not running, ``trial_id`` is not the pending trial
        (a stale confirmation), or ``attempt`` is not its current run.
        """
        if not self.config.confirm_reset:
            return EditOutcome(False, "this session does not ask for reset confirmations (confirm_reset: false)",
                               trial_id)
        known = self._book.trials[trial_id] if self._known(trial_id) else None
        if known is not None and attempt == known.attempt and known.reset_confirmed == attempt:
            return EditOutcome(True, f"trial {trial_id}: reset already confirmed", trial_id)  # a re-send
        if self._state != SessionState.RUNNING:
            return EditOutcome(False, f"session is {self._state.value}; confirm the reset once it runs", trial_id)
        record = self._pending()
        if record is None or not self._known(trial_id) or record.trial_id != trial_id:
            pending = "none" if record is None else f"trial {record.trial_id}"
            return EditOutcome(False, f"trial {bounded(trial_id)} is not the pending trial ({pending} is); "
                               "nothing confirmed", None)
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt not in (0, record.attempt):
            return EditOutcome(False, f"trial {trial_id}: attempt {bounded(attempt)} is over (the current run is "
                               f"attempt {record.attempt}: reset the scene again)", trial_id)
        if record.reset_confirmed == record.attempt:
            return EditOutcome(True, f"trial {trial_id}: reset already confirmed", trial_id)
        self._commit("reset_confirmed", trial_id, attempt=record.attempt)
        logger.info("trial %d (label %s): scene reset confirmed for attempt %d", trial_id, record.label,
                    record.attempt)
        return EditOutcome(True, f"trial {trial_id}: reset confirmed", trial_id)

    @_locked
    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None) -> PendingTrial | None:
        """Record the runner's result for the pending trial.

        Returns the trial to run next: ``None`` after a successful run (the trial now waits
        for its score), or the same trial with ``attempt + 1`` after a failure (retry it, or
        :meth:`void_score` it).

        ``auto_score`` (``success``, ``progress``): the runner's own score of a successful run,
        journaled with the result so that it survives a pause or a restart until it is submitted
        (:meth:`held_auto_score`).

        Raises
        ------
        SessionError
            If ``trial_id`` is not the pending trial, the session is not running or paused, or
            (``confirm_reset``) the reset of this run was not confirmed.
        """
        self._transition("record a runner result", (SessionState.RUNNING, SessionState.PAUSED))
        record = self._pending()
        if record is None or record.trial_id != trial_id:
            pending = None if record is None else record.trial_id
            raise SessionError(f"runner result for trial {trial_id!r}, but the pending trial is {pending}")
        if self.config.confirm_reset and record.reset_confirmed != record.attempt:
            raise SessionError(f"runner result for trial {trial_id}, attempt {record.attempt}, whose scene reset "
                               "was not confirmed")
        duration = float(duration_s)
        if not (math.isfinite(duration) and duration >= 0):
            raise SessionError(f"`duration_s` must be a finite number >= 0; found {duration_s!r}")
        extra: dict[str, Any] = {}
        if ok and auto_score is not None:
            extra["auto_score"] = {"success": _json_safe(auto_score[0]), "progress": _json_safe(auto_score[1])}
        shown = operator_text(str(message), bool(ok))
        if shown != str(message):  # the full text: sealed in the journal, revealed with the key
            extra["detail"] = str(message)
        self._commit("runner_result", trial_id, ok=bool(ok), duration_s=duration, message=shown, **extra)
        logger.info("trial %d (label %s) run %s in %.1f s%s", trial_id, record.label, "ok" if ok else "FAILED",
                    duration, f": {shown}" if shown else "")
        return None if ok else self._request(record)

    @_locked
    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None:
        """The pending trial's journaled automatic score, not yet submitted (``None`` if none).

        Automatic scoring records the runner's score with its result
        (:meth:`record_runner_result`); the node submits it while the session runs.  A score that
        came while the session was paused, or before a crash, is held here until then.
        """
        record = self._pending()
        if record is None or not record.ran_ok or record.auto_score is None:
            return None
        success, progress = record.auto_score
        return self._request(record), success, progress

    @property
    def runner_message(self) -> str:
        """The last run's message as an operator channel may show it (a category and an error id,
        :mod:`.runner_messages`; its full text is sealed in the journal)."""
        return self._runner_message

    @property
    def runner_faults(self) -> int:
        """Failed runs of the pending trial in a row, since it was requested or the session resumed.

        Derived from the journal like everything else, so a restart does not forget it.
        """
        return self._faults

    @_locked
    def submit_score(self, trial_id: int, token: str, success: bool, progress: float, operator: str = "",
                     notes: str = "", *, preference: str = "", instruction: str = "",
                     pair_invalid: bool = False) -> ScoreOutcome:
        """Score the pending trial.

        Checks, in order (the first failing one is the reason; every rejection is journaled as
        ``score_rejected`` and changes no test): unknown trial; wrong token; already scored (a
        byte-identical resubmission is a *duplicate*: acknowledged, journaled as
        ``score_duplicate``, ignored); voided trial; session not running; no successful run
        recorded; ``success`` not a bool; ``progress`` not finite or outside [0, 1];
        ``preference`` not ``""``, ``"="`` or a label of the trial's round.  A valid score that
        can feed no undecided test (its policy's tests, on its task for a per-task claim) is
        journaled as ``post_decision_score`` and fed to no test.

        ``operator``, ``notes`` and ``preference`` (the operator's preferred label in the round,
        RoboArena-style; stored, not tested) are journaled with the score; so are, in a ``design:
        ab`` session, the round's ``instruction`` and ``pair_invalid`` (the operator judged the
        pair not valid: the round then forms no pair, :func:`~.trials.form_pairs`).
        """
        if isinstance(success, np.bool_):
            success = bool(success)
        submission = score_submission(token, success, progress, operator, notes, preference, instruction, pair_invalid)
        oversized = next((f"`{name}` is longer than {limit} characters ({len(value)})"
                          for name, value, limit in (("token", token, 64), ("operator", operator, OPERATOR_CHARS),
                                                     ("notes", notes, NOTES_CHARS), ("preference", preference, 16),
                                                     ("instruction", instruction, INSTRUCTION_CHARS))
                          if isinstance(value, str) and len(value) > limit), None)
        if oversized:
            return self._reject(trial_id, submission, oversized)
        if not isinstance(pair_invalid, bool) or not isinstance(instruction, str):
            return self._reject(trial_id, submission, "`pair_invalid` must be true or false and `instruction` a string")
        if (instruction or pair_invalid) and self.config.design != "ab":
            return self._reject(trial_id, submission, "`instruction` and `pair_invalid` apply only to design 'ab'; "
                                f"this session's design is {self.config.design!r}")
        if not self._known(trial_id):
            return self._reject(trial_id, submission, f"unknown trial {bounded(trial_id)!r}")
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
        undecided = [t for t in self._tests if t.feeds(record) and not t.decided]
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
        """Journal a rejected score (with the trial id as claimed) in bounded form and say why.

        Every string is cut to :data:`SUMMARY_CHARS` (with its full length), so one rejection adds
        at most about 1 KB to the journal whatever was sent; the warning is rate-limited.
        """
        reason = str(bounded(reason, REASON_CHARS))
        column = trial_id if isinstance(trial_id, int) and self._known(trial_id) else None
        self._commit("score_rejected", column, reason=reason, claimed_trial_id=bounded(_json_safe(trial_id)),
                     submission={key: bounded(value) for key, value in submission.items()})
        self.rejections += 1
        if self._log_limit.allow():
            logger.warning("score for trial %s rejected: %s", bounded(trial_id), reason + self._log_limit.suppressed())
        return ScoreOutcome(False, False, reason)

    # -- corrections -----------------------------------------------------------------------
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
        return EditOutcome(True, f"trial {trial_id} voided; {self._rerun_note(record)}", trial_id)

    def _rerun_note(self, record: TrialRecord) -> str:
        """What happens to voided ``record``: which trial runs it again, and when (for the operator)."""
        if record.trial_id not in self._schedule.reruns:
            return "given up (not run again)"
        if self._state not in (SessionState.RUNNING, SessionState.PAUSED) or record.policy not in self._active(
                record.task if self.config.claim != "pooled" else None):
            return "not run again (its policy has left the rotation)"
        queued = self._schedule.reruns.index(record.trial_id)
        pending = self._pending()
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

    # -- reports ---------------------------------------------------------------------------
    @_locked
    def status(self) -> StatusSnapshot:
        """A :class:`StatusSnapshot` snapshot."""
        pending = self._pending()
        live = self._state not in (SessionState.FINISHED, SessionState.ABORTED)
        active = self._active() if live else ()
        return StatusSnapshot(
            session_id=self.session_id,
            state=self._state,
            trials_requested=len(self._book.trials),
            trials_scored=self._book.n_scored,
            trials_voided=self._book.n_voided,
            rounds=self._schedule.round,
            pending_trial_id=None if pending is None else pending.trial_id,
            awaiting=None if pending is None else self._awaiting(pending),
            active_policies=active,
            comparisons_total=len(self._tests),
            comparisons_decided=sum(t.decided for t in self._tests),
            max_trials_left=self._max_trials_left() if live else 0,
            active_tasks=self._active_tasks() if live else (),
        )

    def _awaiting(self, record: TrialRecord) -> str:
        """The pending trial's phase: ``"reset"``, ``"run"`` or ``"score"`` (:class:`StatusSnapshot`)."""
        if record.ran_ok:
            return "score"
        if self.config.confirm_reset and record.reset_confirmed != record.attempt:
            return "reset"
        return "run"

    def _max_trials_left(self) -> int:
        if self._adastop is not None:
            run = self._adastop
            if run.finished or self.config.adastop is None:
                return 0
            per_agent = (self.config.adastop.n_interims - run.interims) * run.n_per_interim
            return sum(per_agent - len(interim_records(self._book, run.interims + 1, p, run.n_per_interim)) for p in run.active())
        n_max, total = self.config.n_max, 0
        groups: tuple[str | None, ...] = (None,) if self.config.claim == "pooled" else self._active_tasks()
        for task in groups:
            open_tests = [t for t in self._tests if not t.decided and t.task == task]
            active = self._active(task)
            if not active or not open_tests:
                continue
            if not self.config.drop_decided:
                total += len(active) * max(n_max - t.n for t in open_tests)
            else:
                total += sum(max((n_max - t.n for t in open_tests if t.involves(p)), default=0) for p in active)
        return total

    @_locked
    def comparisons(self) -> list[ComparisonSnapshot]:
        """One :class:`ComparisonSnapshot` per test, in the fixed order (comparison, metric, task)."""
        out = []
        for test in self._tests:
            mean_a, mean_b = test.means()
            out.append(ComparisonSnapshot(
                policy_a=test.comparison.policy_a, policy_b=test.comparison.policy_b, metric=test.metric.name,
                method=test.method, alternative=test.metric.alternative, alpha=test.alpha, n=test.n,
                decision=test.decision, pvalue=test.pvalue(), evalue=test.evalue(), mean_a=mean_a, mean_b=mean_b,
                stopping_trial=test.stopping_trial, task=test.task or "",
            ))
        return out

    @_locked
    def claims(self) -> list[ClaimSnapshot]:
        """One :class:`ClaimSnapshot` per comparison x metric with a non-pooled ``claim``; empty otherwise.

        Combines the per-task tests' current results with
        :func:`~evalstop_ros.stats.multitask.combine_tasks`, as
        :func:`~evalstop_ros.stats.multitask.run_multitask` does on the same scores.  Publish each
        one as a ``ComparisonStatus`` with :meth:`ClaimSnapshot.as_comparison`.
        """
        if self.config.claim == "pooled":
            return []
        tasks = tuple(t.id for t in self.config.tasks)
        paired = [t for t in self._tests if isinstance(t, PairedTest)]
        assert len(paired) == len(self._tests)
        out = []
        for start, combined in zip(range(0, len(paired), len(tasks)),
                                   combine_claims(self.config, [(t.metric, t.result()) for t in paired])):
            group = paired[start:start + len(tasks)]
            first = group[0]
            metric = first.metric
            level = self.config.comparison_alpha(metric)
            decided = [t.decided for t in group]
            final = all(decided)  # per-task: later task claims can still come
            if self.config.claim == "any":  # a claim, once made, stays (decisions are final, p-values fall)
                final = final or combined.established
            elif self.config.claim == "every":  # iut/bonferroni: a task that stopped unclaimed refutes it
                final = final or combined.established or any(
                    d and c == Decision.CONTINUE for d, c in zip(decided, combined.task_claims))
            fed = [pair for t in group if isinstance(t, PairedTest) for pair in t.fed]
            means = np.asarray(fed, dtype=np.float64)[:, 2:].mean(axis=0) if fed else np.full(2, np.nan)
            out.append(ClaimSnapshot(
                policy_a=first.comparison.policy_a, policy_b=first.comparison.policy_b, metric=metric.name,
                method=metric.method, alternative=metric.alternative, claim=self.config.claim,
                correction=combined.correction, alpha=level, task_alpha=combined.task_alpha, tasks=tasks,
                task_claims=combined.task_claims, established=combined.established, final=bool(final),
                n=len(fed), mean_a=float(means[0]), mean_b=float(means[1]),
            ))
        return out

    @_locked
    def letters(self, metric: str | None = None, task: str | None = None) -> dict[str, str]:
        """Compact letter display of one metric (default: the first configured).

        Policies sharing a letter were not found different; the best mean carries ``a``.
        "Different" means a directional decision of the pair's test (Holm's with ``correction:
        holm``, AdaStop's under that design); with a non-pooled claim, an established claim
        (:meth:`claims`), or with ``task`` a claim on that task, whose scores alone give the
        means.  Means are over every effective score of the policy.  Empty while some policy has
        no score yet.  :func:`~.offline.offline_letters` recomputes it from the journal.

        Raises
        ------
        SessionError
            For an unknown metric or task, or a task with ``claim: pooled``.
        """
        claims = self.claims()
        return letters(self.config, self._book, metric, task,
                       [(t.comparison.pair, t.metric.name, t.decision) for t in self._tests],
                       [(frozenset((c.policy_a, c.policy_b)), c.metric, c.established, c.task_claims) for c in claims])

    # -- the journaled state machine -------------------------------------------------------
    def _commit(self, kind: str, trial_id: int | None, **payload: Any) -> None:
        """Journal an event, apply it exactly as a replay would, then tell :attr:`on_commit`."""
        if self._auth is not None and kind in REQUEST_KINDS:
            payload, self._auth = {**payload, "auth": self._auth}, None
        key = self.plan.key
        assert key is not None  # a live session's plan always has the journal's key
        event = self._unsealed(self._journal.write(
            kind, trial_id, **journal_payload(kind, trial_id, payload, key, self.session_id)))
        self._apply(event)
        if self.on_commit is not None:
            self.on_commit(event)

    def _unsealed(self, event: Event) -> Event:
        """A journal event as the session works with it: what the journal sealed restored (:mod:`.blinding`)."""
        return unseal_event(event, self.plan, self.session_id)

    @_locked
    def events(self) -> list[Event]:
        """Every journaled event so far, in order, as the journal's owner reads them (sealed fields
        restored: :mod:`.blinding`; publish them through :func:`~.blinding.seal`)."""
        return [self._unsealed(event) for event in self._journal.events()]

    def _apply(self, event: Event) -> None:
        handler: Callable[[Event], None] | None = getattr(self, f"_on_{event.kind}", None)
        if handler is None:
            raise JournalError(f"event {event.seq}: unknown kind {event.kind!r}")
        handler(event)
        auth = event.payload.get("auth")
        if isinstance(auth, dict) and isinstance(auth.get("operator"), str) and isinstance(auth.get("counter"), int):
            self._auth_counters[auth["operator"]] = max(self._auth_counters.get(auth["operator"], 0), auth["counter"])

    def _diverged(self, event: Event, detail: str) -> JournalError:
        return JournalError(f"journal {str(self._journal.path)!r}, event {event.seq} ({event.kind}): replay diverged: "
                            f"{detail}")

    def _on_config(self, event: Event) -> None:
        if (event.seq != 1 or event.payload.get("config_hash") != self.config.config_hash
                or event.payload.get("key_commitment") != self._journal.key_commitment):
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
        self._faults = 0

    def _on_aborted(self, event: Event) -> None:
        self._expect_state(event, SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED)
        self._state = SessionState.ABORTED

    def _on_finished(self, event: Event) -> None:
        self._expect_state(event, SessionState.RUNNING, SessionState.PAUSED)
        if not all(t.decided for t in self._tests):
            raise self._diverged(event, "finished while some comparisons are undecided")
        self._state = SessionState.FINISHED

    def _on_key_revealed(self, event: Event) -> None:
        self._expect_state(event, SessionState.FINISHED, SessionState.ABORTED)
        key = self.plan.key.hex() if self.plan.key else ""
        if event.payload.get("key") != key or self._revealed:
            raise self._diverged(event, "the revealed key is not the journal's key, or was revealed twice")
        self._revealed = True

    def _on_message_rejected(self, event: Event) -> None:
        """Audit only."""

    _on_request_noted = _on_message_rejected

    def _expect_state(self, event: Event, *states: SessionState) -> None:
        if self._state not in states:
            raise self._diverged(event, f"{event.kind} in state {self._state.value}")

    def _on_trial_requested(self, event: Event) -> None:
        trial_id, payload, schedule = self._next_spec()
        if event.trial_id != trial_id or event.payload != payload:
            raise self._diverged(event, f"journal has trial {event.trial_id} {event.payload}, the plan gives "
                                 f"trial {trial_id} {payload}")
        self._book.apply(event)
        self._schedule = schedule
        self._faults = 0

    def _on_reset_confirmed(self, event: Event) -> None:
        record = self._pending()
        attempt = event.payload.get("attempt")
        if (not self.config.confirm_reset or record is None or record.trial_id != event.trial_id
                or attempt != record.attempt or record.reset_confirmed == attempt):
            raise self._diverged(event, f"reset confirmation of trial {event.trial_id} attempt {attempt}, but the "
                                 f"pending run is {None if record is None else (record.trial_id, record.attempt)}")
        self._book.apply(event)

    def _on_runner_result(self, event: Event) -> None:
        self._book.apply(event)
        self._faults = 0 if event.payload.get("ok") else self._faults + 1
        self._runner_message = str(event.payload.get("message", ""))

    def _on_score_accepted(self, event: Event) -> None:
        record = self._book.trials[event.trial_id]  # type: ignore[index]
        first = event.kind in ("score_accepted", "post_decision_score") and record.score is None
        self._book.apply(event)
        self._sync(record, first_score=first)

    _on_post_decision_score = _on_score_accepted
    _on_correction = _on_score_accepted

    def _on_void(self, event: Event) -> None:
        had_score = self._book.trials[event.trial_id].score is not None  # type: ignore[index]
        self._on_score_accepted(event)
        if had_score or self._adastop is not None:
            reruns = (*self._schedule.reruns, int(event.trial_id))  # type: ignore[arg-type]
            self._schedule = dataclasses.replace(self._schedule, reruns=reruns)

    def _on_active_embeddings(self, event: Event) -> None:
        if self.config.schedule != "active" or self._embeddings is not None:
            raise self._diverged(event, "embeddings outside schedule 'active', or twice")
        self._embeddings = {"policy": event.payload["policy"], "task": event.payload["task"]}

    def _on_schedule_choice(self, event: Event) -> None:
        round_number = int(event.payload["round"])
        if self.config.schedule != "active" or round_number != self._schedule.round + 1 or round_number in self._choices:
            raise self._diverged(event, f"choice for round {round_number} while round {self._schedule.round} runs")
        if event.payload["task"] not in self._active_tasks():
            raise self._diverged(event, f"task {event.payload['task']!r} is not in the rotation")
        self._choices[round_number] = dict(event.payload)

    def _on_score_rejected(self, event: Event) -> None:
        """Audit only."""

    _on_score_duplicate = _on_score_rejected

    def _on_decision(self, event: Event) -> None:
        index = int(event.payload["test"])
        test = self._tests[index] if 0 <= index < len(self._tests) else None
        if test is None:
            raise self._diverged(event, f"unknown test {index}")
        replayed = {"decision": test.decision.name, "n": test.n, "stopping_trial": test.stopping_trial}
        journaled = {key: event.payload.get(key) for key in replayed}
        if replayed != journaled:
            raise self._diverged(event, f"{test.label}: journal has {journaled}, replay gives {replayed}")
        self._announced.add(index)

    def _sync(self, record: TrialRecord, *, first_score: bool = False) -> None:
        """Feed the tests a change to ``record``'s score can affect, then decide what it implies.

        A trial's first score usually only appends pairs (O(1), :class:`~.trials.Pairing`); a
        correction or a void re-forms the affected tests' pair lists.
        """
        if self._adastop is not None:
            self._adastop.sync(self._book)
            return
        for test in self._tests:
            if isinstance(test, PairedTest) and test.feeds(record):
                test.follow(self._book, self.config.design, record if first_score else None)
        for family in self._families:
            family.resolve()

    def _settle(self) -> None:
        """Journal what the last change implies: new decisions, then the end of the session."""
        for test in self._tests:
            if test.decided and test.index not in self._announced:
                extra: dict[str, Any] = {}
                if test.task is not None:
                    extra["task"] = test.task
                if isinstance(test, AdaStopTest):
                    extra["interim"] = test.interim
                self._commit(
                    "decision", test.last_trial, test=test.index, policy_a=test.comparison.policy_a,
                    policy_b=test.comparison.policy_b, metric=test.metric.name, method=test.method,
                    decision=test.decision.name, n=test.n, stopping_trial=test.stopping_trial,
                    pvalue=_finite_or_none(test.pvalue()), evalue=_finite_or_none(test.evalue()), **extra,
                )
                logger.info("comparison %s: %s after %d %s", test.label, test.decision.name, test.n,
                            "scores per agent" if isinstance(test, AdaStopTest) else "pairs")
        live = self._state in (SessionState.RUNNING, SessionState.PAUSED)
        if live and all(t.decided for t in self._tests):
            self._commit("finished", None, reason="every comparison is decided or out of budget")
            logger.info("session %s finished after %d trials", self.session_id, len(self._book.trials))
            self._reveal()

    # -- scheduling --------------------------------------------------------------------------
    def _active(self, task: str | None = None) -> tuple[str, ...]:
        """Policies in the rotation (on ``task``, for a per-task claim), in configuration order."""
        if self._adastop is not None:
            return self._adastop.active()
        if not self.config.drop_decided:
            return self.config.policies
        open_tests = [t for t in self._tests if not t.decided and (task is None or t.task in (None, task))]
        return tuple(p for p in self.config.policies if any(t.involves(p) for t in open_tests))

    def _open_pairs(self) -> tuple[tuple[str, str], ...]:
        """``design: ab``: the comparisons a round may draw (with ``drop_decided``, the undecided
        ones; with ``ab_pairing: fewest``, of those the ones run in the fewest rounds so far)."""
        pairs = [(c.policy_a, c.policy_b) for c in self.config.comparison_list()]
        if self.config.drop_decided:
            open_pairs = {frozenset((t.comparison.policy_a, t.comparison.policy_b)) for t in self._tests if not t.decided}
            pairs = [p for p in pairs if frozenset(p) in open_pairs]
        if self.config.ab_pairing == "fewest" and pairs:
            rounds = collections.Counter(frozenset(m) for m in self._round_members().values())
            least = min(rounds[frozenset(p)] for p in pairs)
            pairs = [p for p in pairs if rounds[frozenset(p)] == least]
        return tuple(pairs)

    def _round_members(self) -> dict[int, set[str]]:
        """The policies of every round so far (O(trials), once per round)."""
        members: dict[int, set[str]] = {}
        for record in self._book.trials.values():
            members.setdefault(record.round, set()).add(record.policy)
        return members

    def _ucb_weights(self, pairs: tuple[tuple[str, str], ...]) -> dict[str, float] | None:
        """``ab_pairing: ucb``: each policy's :meth:`~.plan.Plan.ucb_weight` after its rounds so far."""
        if self.config.ab_pairing != "ucb":
            return None
        n = collections.Counter(p for m in self._round_members().values() for p in m)
        return {p: self.plan.ucb_weight(n[p], self.config.ab_ucb_threshold) for pair in pairs for p in pair}

    def _active_tasks(self) -> tuple[str, ...]:
        """Tasks in the rotation: with a non-pooled claim, those with an undecided test."""
        ids = tuple(t.id for t in self.config.tasks)
        if self.config.claim == "pooled" or not self.config.drop_decided:
            return ids
        return tuple(task for task in ids if any(t.task == task and not t.decided for t in self._tests))

    def _pending(self) -> TrialRecord | None:
        if not self._book.trials:
            return None
        last = self._book.trials[len(self._book.trials)]
        return None if last.closed else last

    def _round_task(self, position: int) -> str | None:
        """The task of the round at walk position ``position`` (``None``: pooled, any task).

        Under ``schedule: active`` the position is the round number and the task its choice.
        """
        if self.config.claim == "pooled" or position < 1:
            return None
        if self.config.schedule == "active":
            return str(self._choices[position]["task"])
        return self.plan.condition(position).task.id

    def _round_ends(self) -> bool:
        """The next request starts a new round (no re-run waits, the round's queue is done)."""
        schedule = self._schedule
        if any(self._book.trials[t].policy in self._active(self._book.trials[t].task) for t in schedule.reruns):
            return False
        return not [p for p in schedule.queue if p in self._active(self._round_task(schedule.position))]

    def _choose_round(self) -> None:
        """``schedule: active``: journal the embeddings (once) and the next round's task choice."""
        round_number = self._schedule.round + 1
        if not self._round_ends() or round_number in self._choices:
            return
        from ..active.scheduler import Observation, choose_task, session_embeddings  # torch: only when used

        if self._embeddings is None:
            self._commit("active_embeddings", None, **session_embeddings(self.config))
        assert self._embeddings is not None
        task_ids = [t.id for t in self.config.tasks]
        policy_ids = list(self.config.policies)
        metric = self.config.active_settings().metric or self.config.metrics[0].name
        data = [Observation(policy_ids.index(r.policy), task_ids.index(r.task), metric_value(r.score, metric))
                for r in self._book.scored() if r.score is not None]
        open_pairs = np.array([[p in self._active(task) and task in self._active_tasks() for task in task_ids]
                               for p in policy_ids])
        current = self._round_task(self._schedule.round) if self._schedule.round else None
        choice = choose_task(self.config, self._embeddings, data, round_number=round_number,
                             current_task=None if current is None else task_ids.index(current), open_pairs=open_pairs)
        task = task_ids[choice.task]
        visit = 1 + sum(1 for c in self._choices.values() if c["task"] == task)
        condition = self.plan.task_condition(choice.task, visit)
        self._commit("schedule_choice", None, round=round_number, task=task, initial_condition=condition.id,
                     strategy=self.config.active_settings().strategy if data else "random-task",
                     explored=choice.explored, scores=list(choice.scores), n_data=choice.n_data,
                     data_sha256=choice.data_sha256)
        logger.info("round %d: active schedule chose task %s (%s)", round_number, task,
                    "explore" if choice.explored else "acquisition")

    def _next_spec(self) -> tuple[int, dict[str, Any], _Schedule]:
        """The next trial to request: id, journal payload, and the schedule state after it.

        Re-runs of voided trials come first (same policy, round and condition), then the rest
        of the current round, then a new round; policies out of the rotation are skipped.
        """
        schedule, per_task = self._schedule, self.config.claim != "pooled"
        if len(self._active()) < 2:
            raise SessionError("no pair of active policies is left")  # _settle finishes before this
        trial_id = len(self._book.trials) + 1
        token = self.plan.token(self.session_id, trial_id)
        reruns = [t for t in schedule.reruns
                  if self._book.trials[t].policy in self._active(self._book.trials[t].task if per_task else None)]
        if reruns:
            old = self._book.trials[reruns.pop(0)]
            payload = {
                "round": old.round, "policy_id": old.policy, "label": self.plan.label(old.policy, old.round),
                "task": old.task, "initial_condition": old.initial_condition, "token": token,
                "rerun_of": old.trial_id,
            }
            return trial_id, payload, dataclasses.replace(schedule, reruns=tuple(reruns))
        round_number, position = schedule.round, schedule.position
        active = self._active(self._round_task(position))
        queue = [p for p in schedule.queue if p in active]
        while not queue:
            round_number += 1
            if self._adastop is not None:
                assert self.config.adastop is not None
                queue = list(self.plan.interim_order(round_number, active, self.config.adastop.n_per_interim))
                continue
            position = round_number if self.config.schedule == "active" else self._next_position(position)
            if self.config.schedule == "active" and round_number not in self._choices:
                raise SessionError(f"round {round_number} has no journaled task choice")
            active = self._active(self._round_task(position))
            if self.config.design == "ab":
                pairs = self._open_pairs()
                queue = list(self.plan.ab_pair(round_number, pairs, self._ucb_weights(pairs)))
            else:
                queue = list(self.plan.round_order(round_number, active))
        policy = queue.pop(0)
        condition = self._condition(trial_id, position)
        payload = {
            "round": round_number, "policy_id": policy, "label": self.plan.label(policy, round_number),
            "task": condition.task.id, "initial_condition": condition.initial_condition.id, "token": token,
            "rerun_of": None,
        }
        return trial_id, payload, _Schedule(round_number, tuple(queue), (), position)

    def _next_position(self, position: int) -> int:
        """The walk position of the next round: the next one whose task is in the rotation."""
        if self.config.claim == "pooled":
            return position + 1
        tasks = set(self._active_tasks())
        if not tasks:
            raise SessionError("no task is left in the rotation")  # _settle finishes before this
        position += 1
        while self.plan.condition(position).task.id not in tasks:
            position += 1
        return position

    def _condition(self, trial_id: int, position: int) -> Condition:
        """Where trial ``trial_id`` of the round at walk position ``position`` starts."""
        if self.config.schedule == "active":
            choice = self._choices[position]
            task = next(t for t in self.config.tasks if t.id == choice["task"])
            return Condition(task, next(c for c in task.initial_conditions if c.id == choice["initial_condition"]))
        if self.config.design in ROUND_DESIGNS:
            return self.plan.condition(position)
        if self.config.claim == "pooled":  # independent or adastop: a fresh condition per trial
            return self.plan.condition(trial_id)
        task = self.plan.condition(position).task
        index = [t.id for t in self.config.tasks].index(task.id)
        draws = sum(1 for r in self._book.trials.values() if r.task == task.id and r.rerun_of is None)
        return Condition(task, self.plan.task_condition(index, draws + 1))

    def _request(self, record: TrialRecord) -> PendingTrial:
        task = next(t for t in self.config.tasks if t.id == record.task)
        condition = next(c for c in task.initial_conditions if c.id == record.initial_condition)
        return PendingTrial(
            session_id=self.session_id, trial_id=record.trial_id, round=record.round,
            attempt=record.failed_runs + 1, label=record.label, policy_id=record.policy, task=task.id,
            task_description=task.description, initial_condition=condition.id,
            reset_instructions=condition.reset_instructions, token=record.token, rerun_of=record.rerun_of,
            round_labels=self._round_labels(record.round),
        )

    def _round_labels(self, round_number: int) -> tuple[str, ...]:
        """Labels of the policies of round ``round_number``: requested so far, or still in its queue."""
        policies = {r.policy for r in self._book.trials.values() if r.round == round_number}
        if self._schedule.round == round_number:
            policies.update(self._schedule.queue)
        return tuple(sorted(self.plan.label(p, round_number) for p in policies))


