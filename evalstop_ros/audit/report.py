"""What an audit reports: the violation codes (:data:`CODES`), one :class:`Violation` per finding,
per-comparison and per-trial rows, and the :class:`AuditReport` (see :mod:`.verify`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..session.config import SessionConfig
from ..session.offline import OfflineClaim
from ..session.trials import TrialRecord
from ..session.values import ComparisonSnapshot

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..stats.sequential import Decision, SequentialResult
from .model import SessionRecord, StatusRecord

__all__ = ["CODES", "MEAN_ATOL", "PRINT_DIGITS", "PVALUE_RTOL", "AuditReport", "ComparisonAudit", "StepReplay", "TrialAudit",
           "Violation", "fmt"]

#: Violation codes and what each means.
CODES = {
    "schedule_choice_mismatch": "a round's task choice is not what the active scheduler gives on the journaled data",
    "schedule_choice_missing": "a round of schedule 'active' ran without a journaled task choice, or off it",
    "config_missing_hash": "the configuration's hash does not match its JSON",
    "config_changed": "the configuration (alpha, n_max, method, ...) changed mid-session",
    "config_mismatch": "the configuration given on the command line differs from the recorded one",
    "alpha_changed": "a published comparison ran at a level other than the configuration's",
    "method_changed": "a published comparison used a method other than the configuration's",
    "journal_gap": "journal events are missing from the journal stream",
    "journal_conflict": "a journal event was published twice with different content",
    "journal_inconsistent": "a journal event cannot be applied (e.g. it names an unknown trial)",
    "trial_missing": "trial ids skip a trial: it was never requested",
    "request_mismatch": "a trial request disagrees with the journal or with the session's plan",
    "label_unknown": "a request's blinded label is not a label of its round",
    "score_not_requested": "a score names a trial that was never requested (or not yet)",
    "token_mismatch": "a score's token does not match its trial's request",
    "score_mismatch": "a score on trial_score differs from the one the manager journaled, or has no counterpart",
    "score_unacknowledged": "a score on trial_score was never answered on score_ack",
    "ack_mismatch": "score_ack answers disagree with the journaled outcomes",
    "unscored_trial": "a trial was requested but never scored (nor voided)",
    "reset_unconfirmed": "a trial ran before the operator confirmed its scene reset (confirm_reset)",
    "after_stop": "data (a request or a score) arrived after the session stopped",
    "edit_without_reason": "a correction or void has no reason",
    "status_mismatch": "a published state (decision, stopping trial, p-value, e-value, means) is not reproduced",
    "decision_unpublished": "the recomputation decides but no published state carries a decision",
    "finished_undecided": "the session was marked finished while a comparison is undecided on recomputation",
    "letters_mismatch": "the final compact letter display is not reproduced",
    "journal_edited": "a journal event fails the hash chain: it was edited after it was written",
    "journal_truncated": "the journal holds fewer events than its head file records",
    "journal_head_missing": "the journal's head file is missing or does not vouch for its last events (events may "
                            "have been removed or appended without the session)",
    "event_after_end": "the journal has a state change or data event after the session finished or was aborted",
    "stream_mismatch": "the journal and the published session_event stream disagree, event by event",
    "key_unrevealed": "the randomization key was not revealed: labels, tokens and the plan cannot be checked",
    "key_mismatch": "the revealed randomization key does not match the commitment published at the start",
    "key_reveal_repeated": "the journal reveals its key more than once (exactly one key_revealed may end it)",
    "goal_seal_mismatch": "a runner goal did not seal the planned policy of its trial (checked with the revealed key)",
    "auth_replay": "an operator's journaled request counter did not increase: a replayed request was accepted",
    "auth_mac_mismatch": "a journaled score is not what its operator signed (checked with --operator-keys)",
}

#: Relative tolerance of p-values and e-values; absolute tolerance of means.
PVALUE_RTOL = 1e-9
MEAN_ATOL = 1e-9
#: Significant digits of printed p-values (the check above is much tighter).
PRINT_DIGITS = 6

@dataclasses.dataclass(frozen=True)
class Violation:
    """One protocol violation or unreproduced claim.

    Attributes
    ----------
    code:
        One of :data:`CODES`.
    trial_ids:
        The trials concerned (empty for session-level findings).
    message:
        One line for a person, naming the trial(s) and the values.
    position:
        Where in the source it was found (bag message index or journal ``seq``), if anywhere.
    stamp_ns:
        Its time (ns since the epoch), if known.
    """

    code: str
    trial_ids: tuple[int, ...]
    message: str
    position: int | None = None
    stamp_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self) | {"trial_ids": list(self.trial_ids)}


@dataclasses.dataclass(frozen=True)
class StepReplay:
    """STEP's randomization replayed from the configuration's seed.

    Attributes
    ----------
    seed:
        The test's seed, ``Plan(config).step_seed(comparison, metric)``, fixed before the data.
    draws:
        Trials whose draw ``U_n`` was replayed (the pairs the test consumed).
    stopping_trial:
        Pair at which the replay stops (``U_n < w_n`` with a success gap), or ``None``.
    draw, weight:
        ``U_n`` and the table's rejection weight ``w_n`` at that pair.
    """

    seed: int
    draws: int
    stopping_trial: int | None
    draw: float | None
    weight: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonAudit(ComparisonSnapshot):
    """One comparison x metric (x task), recomputed and checked: the session's row
    (:class:`~evalstop_ros.session.values.ComparisonSnapshot`) as the recomputation gives it, with
    the evidence.  Build it with :meth:`recomputed`.

    Attributes
    ----------
    policy_a, policy_b, metric, method, alternative, task:
        The test (:class:`~evalstop_ros.session.values.ComparisonSnapshot`).
    alpha:
        Its level as the session reports it (after the Bonferroni split; Holm's first threshold; a
        per-task test's task level; AdaStop's family level).
    n, decision, pvalue, evalue, mean_a, mean_b, stopping_trial:
        The recomputed state (``result``'s, the means over ``values_a``/``values_b``; NaN where none).
    index:
        Position in the session's test list (comparison, metric, task: as the session numbers them).
    seed:
        STEP seed of the test (every method gets one; only STEP uses it).
    trials_a, trials_b:
        Trial ids of each consumed pair, in collection order.
    values_a, values_b:
        The metric values fed to the test.
    result:
        The recomputation: the session's offline analysis (``offline_decisions`` row).
    published:
        The last published state of the test, if any.
    checked:
        Published states checked against the recomputation.
    reproduced:
        True when no published state of the test disagrees.
    step:
        STEP replay, for method ``step``.
    """

    index: int
    seed: int
    trials_a: tuple[int, ...]
    trials_b: tuple[int, ...]
    values_a: NDArray[np.float64]
    values_b: NDArray[np.float64]
    result: SequentialResult
    published: StatusRecord | None
    checked: int
    reproduced: bool
    step: StepReplay | None

    @classmethod
    def recomputed(cls, *, result: SequentialResult, values_a: NDArray[np.float64], values_b: NDArray[np.float64],
                   **fields: Any) -> ComparisonAudit:
        """The row of ``result`` over the pairs ``values_a``/``values_b``; ``fields``: the test and its checks."""
        return cls(n=result.n_observed, decision=result.decision, pvalue=result.pvalue,
                   evalue=float(result.evalues[-1]) if result.evalues.size else math.nan,
                   mean_a=float(values_a.mean()) if values_a.size else math.nan,
                   mean_b=float(values_b.mean()) if values_b.size else math.nan,
                   stopping_trial=result.stopping_trial, result=result, values_a=values_a, values_b=values_b,
                   **fields)

    @property
    def label(self) -> str:
        """E.g. ``policy_a vs policy_b progress/nscore`` (``policy_a vs policy_b@push ...`` per task)."""
        where = f"@{self.task}" if self.task else ""
        return f"{self.policy_a} vs {self.policy_b}{where} {self.metric}/{self.method}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (no NaN: ``None``)."""
        pub = self.published
        return {
            "index": self.index, **super().to_dict(),
            "published": None if pub is None else {
                "origin": pub.origin, "decision": _decision_name(pub.decision), "n": pub.n,
                "stopping_trial": pub.stopping_trial, "pvalue": _finite(pub.pvalue)},
            "checked": self.checked, "reproduced": self.reproduced,
            "step_replay": None if self.step is None else dataclasses.asdict(self.step),
        }


@dataclasses.dataclass(kw_only=True)
class TrialAudit(TrialRecord):
    """One trial as the audit reconstructed it (for reports and the CSV export): the session's
    record of it (:class:`~evalstop_ros.session.trials.TrialRecord`, as the audit's fold of the
    journal leaves it), and

    ``requested_ns``/``scored_ns``, the stamps of the request and the counted score; ``scorer``
    and ``notes``, who scored it and their notes; ``corrected``, whether its score was corrected.
    """

    requested_ns: int
    scored_ns: int | None
    scorer: str
    notes: str
    corrected: bool

    @property
    def success(self) -> bool | None:
        """The effective success (after corrections; ``None`` if unscored or voided)."""
        return None if self.score is None else self.score.success

    @property
    def progress(self) -> float | None:
        """The effective progress (after corrections; ``None`` if unscored or voided)."""
        return None if self.score is None else self.score.progress


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """Everything :func:`verify` found (see :meth:`to_dict` for the JSON form); ``claims`` are the
    multi-task claims of a non-pooled ``claim`` recomputed on the final scores (seed 003 Eq. 11)."""

    record: SessionRecord
    config: SessionConfig
    config_origin: str
    trials: tuple[TrialAudit, ...]
    tests: tuple[ComparisonAudit, ...]
    letters: dict[str, str]
    violations: tuple[Violation, ...]
    notes: tuple[str, ...]
    final_state: str
    statuses_checked: int
    claims: tuple[OfflineClaim, ...] = ()

    @property
    def verified(self) -> bool:
        """True when nothing is violated: the exit status of ``evalstop audit`` is then 0."""
        return not self.violations

    @property
    def named_trials(self) -> tuple[int, ...]:
        """Every trial some violation names, sorted."""
        return tuple(sorted({t for v in self.violations for t in v.trial_ids}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``evalstop audit --json`` prints)."""
        rec = self.record
        scored = [t for t in self.trials if t.success is not None]
        return {
            "source": rec.source, "kind": rec.kind, "storage": rec.storage, "session_id": rec.session_id,
            "config_hash": self.config.config_hash, "config_origin": self.config_origin,
            "verified": self.verified, "final_state": self.final_state,
            "counts": {
                "trials_requested": len(self.trials), "trials_scored": len(scored),
                "trials_voided": sum(t.voided for t in self.trials),
                "corrections": sum(t.corrected for t in self.trials),
                "journal_events": len(rec.events), "statuses_checked": self.statuses_checked,
                "messages": dict(rec.topic_counts),
            },
            "comparisons": [t.to_dict() for t in self.tests],
            "claims": [{"policy_a": c.policy_a, "policy_b": c.policy_b, "metric": c.metric, "claim": c.result.claim,
                        "alpha": c.result.alpha, "alternative": c.result.alternative,
                        "established": c.result.established, "n": c.result.n_trials,
                        "task_claims": {t: d.name for t, d in zip(c.result.tasks, c.result.task_claims)}}
                       for c in self.claims],
            "letters": self.letters,
            "violations": [v.to_dict() for v in self.violations],
            "notes": list(self.notes),
        }


# -- small helpers ------------------------------------------------------------------------------

def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None

def _decision_name(code: int) -> str:
    return Decision(code).name if code in Decision._value2member_map_ else f"UNKNOWN({code})"

def _same(a: float, b: float, *, rtol: float = PVALUE_RTOL, atol: float = 0.0) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)

def fmt(value: float | None, digits: int = PRINT_DIGITS) -> str:
    """A p-value as printed: ``digits`` significant digits, ``-`` for NaN/None.

    >>> fmt(0.0123456789), fmt(float("nan")), fmt(None)
    ('0.0123457', '-', '-')
    """
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _trial_words(ids: Sequence[int]) -> str:
    """``"trial 7"`` or ``"trials 7, 9-10"``.

    >>> _trial_words([7]), _trial_words([9, 7, 10])
    ('trial 7', 'trials 7, 9-10')
    """
    return f"trial {ids[0]}" if len(set(ids)) == 1 else f"trials {_ranges(ids)}"


def _ranges(ids: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``.

    >>> _ranges([1, 2, 3, 7, 9, 10])
    '1-3, 7, 9-10'
    """
    values = sorted(set(ids))
    parts: list[str] = []
    start = prev = None
    for value in values:
        if start is None:
            start = prev = value
        elif value == prev + 1:  # type: ignore[operator]
            prev = value
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = value
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
