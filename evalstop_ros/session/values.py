"""The session's value types: its life-cycle state, the pending trial, the answers to a score or
an edit, and the snapshots the manager node publishes (see docs/protocol.md)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..stats.multitask import TaskClaim
from ..stats.sequential import Decision

__all__ = [
    "FINAL",
    "STATE_CODES",
    "ClaimSnapshot",
    "ComparisonSnapshot",
    "ComparisonState",
    "EditOutcome",
    "OperatorPrompt",
    "PendingTrial",
    "ScoreOutcome",
    "SessionState",
    "StatusSnapshot",
    "TrialRules",
    "score_problem",
]

class SessionState(str, enum.Enum):  # noqa: UP042 (str() of a StrEnum member differs)
    """Life cycle of a session."""

    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    ABORTED = "aborted"


#: SessionState -> ``SessionStatus.STATE_*`` (msg/SessionStatus.msg).
STATE_CODES: Mapping[SessionState, int] = {
    SessionState.IDLE: 0, SessionState.RUNNING: 1, SessionState.PAUSED: 2, SessionState.FINISHED: 3,
    SessionState.ABORTED: 4,
}
#: The states a session never leaves.
FINAL = frozenset({SessionState.FINISHED, SessionState.ABORTED})


@dataclasses.dataclass(frozen=True)
class TrialRules:
    """The journaled rules of a trial loop (:class:`~.driver.TrialDriver`), the same for a local
    session (its ``runner.max_attempts``, ``scoring`` and ``runner.action_name``) and a hub station
    (its journaled ``rules`` record)."""

    #: Failed runs of one trial in a row after which the loop pauses.
    max_attempts: int
    #: The runner scores (``scoring: auto``); the operator scores a run without a valid automatic score.
    auto: bool
    #: The runner's action name (automatic scores are journaled as scorer ``auto:<action>``).
    runner_action: str


def score_problem(success: object, progress: object) -> str | None:
    """Why ``(success, progress)`` is no valid score (``None`` if it is one): ``success`` a bool,
    ``progress`` a finite number in [0, 1]."""
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


@dataclasses.dataclass(frozen=True)
class _TrialView:
    """A trial as the operator may see it (the fields of :class:`OperatorPrompt`; see
    :class:`PendingTrial` for their meaning)."""

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
class OperatorPrompt(_TrialView):
    """What the operator may see about a trial: no policy id, only the blinded label.  (Not a
    base of :class:`PendingTrial`: a pending trial is never taken for a prompt.)"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PendingTrial(_TrialView):
    """The pending trial, for the manager node: what the operator may see, and ``round``,
    ``policy_id`` and ``rerun_of``.

    Attributes
    ----------
    session_id, trial_id:
        Trial ids are 1, 2, 3, ... within the session.
    attempt:
        1 for the first run, +1 after each failed run.
    label:
        Blinded policy label shown to the operator (``X``, ``Y``, ...).
    task, task_description, initial_condition, reset_instructions:
        Where the trial starts.
    token:
        12 hex characters the score must echo.
    round_labels:
        The blinded labels of the policies that run in the trial's round (sorted): what the
        operator may prefer (``preference``) without learning which policy is which.
    round:
        Scheduling round (each active policy once per round); the interim under ``design: adastop``.
    policy_id:
        The policy to run: for the runner only, never for the operator (use
        :meth:`operator_prompt`).
    rerun_of:
        The voided trial this one replaces, if any.
    """

    round: int
    policy_id: str
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
    held:
        Recorded, and held until every earlier trial is scored or voided (several runners: scores
        enter in plan order; ``reason`` names the trial it waits for).
    """

    accepted: bool
    duplicate: bool
    reason: str
    post_decision: bool = False
    held: bool = False


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
class ComparisonState:
    """One test's state as a row: what the session computes (:class:`ComparisonSnapshot`, whose
    fields these are), and what a recording says was published (the audit's
    :class:`~evalstop_ros.audit.model.StatusRecord`, which may carry anything: ``alternative`` is
    ``""`` and ``alpha`` ``None`` where the source has none, ``decision`` the raw code, a code
    that is no :class:`~evalstop_ros.stats.sequential.Decision` included)."""

    policy_a: str
    policy_b: str
    metric: str
    method: str
    alternative: str
    alpha: float | None
    n: int
    decision: int
    pvalue: float
    evalue: float
    mean_a: float
    mean_b: float
    stopping_trial: int | None
    task: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonSnapshot(ComparisonState):
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
    decided_at_result:
        A hub pair's analysis time of the decision: the hub's count of results when sequential
        Holm decided it (:class:`~evalstop_ros.hub.family.HolmPairs`); ``None`` while open and
        for a session's test (its analysis time is its round, ``stopping_trial``).

    The one JSON form of a row is :meth:`to_dict`: the session's audit
    (``evalstop audit --json``), its ``decisions.csv`` and the hub's leaderboard (``pairs``)
    publish it.
    """

    alpha: float
    decision: Decision
    decided_at_result: int | None = None

    @property
    def better(self) -> str | None:
        """The policy the decision claims better (``B_BETTER``: ``policy_b``), or ``None``."""
        return {Decision.B_BETTER: self.policy_b, Decision.A_BETTER: self.policy_a}.get(self.decision)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: every field (``decision`` by name, e.g. ``B_BETTER``; NaN becomes
        ``None``) and ``better``."""
        row: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(ComparisonSnapshot)}
        row.update({name: None if math.isnan(row[name]) else float(row[name])
                    for name in ("alpha", "pvalue", "evalue", "mean_a", "mean_b")})
        return {**row, "n": int(self.n), "decision": Decision(self.decision).name, "better": self.better}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClaimSnapshot(TaskClaim):
    """The multi-task claim of one comparison x metric (non-pooled ``claim``; seed 003 Eq. 11):
    the claim (:class:`~evalstop_ros.stats.multitask.TaskClaim`: ``claim``, ``correction``,
    ``alpha``, ``alternative``, ``task_alpha``, ``tasks``, ``task_claims``, ``established``) of the
    session's live task tests, and:

    Attributes
    ----------
    policy_a, policy_b, metric, method:
        As in :class:`ComparisonSnapshot`; ``alternative`` is the claimed direction
        (``"greater"``: ``policy_b`` better), ``alpha`` the comparison's level (``metric alpha / m``).
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
