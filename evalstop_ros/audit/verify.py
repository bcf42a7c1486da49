"""The verifier: rebuild a session from its record, re-run the statistics, check every claim.

:func:`verify` takes a :class:`~.model.SessionRecord` (a bag or a journal) and returns an
:class:`AuditReport`.  It

1. resolves the pre-registered configuration (one hash for the whole session);
2. folds what the manager *counted* into a :class:`~evalstop_ros.session.trials.TrialBook` --
   from the journal stream when there is one, otherwise from the wire (requests unblinded
   through the plan, scores the manager acknowledged as accepted) -- and cross-checks the two
   views when a bag has both;
3. checks the protocol (:data:`CODES`): trial ids, tokens, scores for trials never requested,
   trials requested but never scored, data after the stop, corrections without a reason,
   configuration, level or method changes;
4. re-runs every test with the session's own offline analysis (:mod:`evalstop_ros.session.offline`,
   the rows of ``offline_decisions``: the statistics core on the effective scores in collection
   order, with the configuration's levels, ``n_max`` and STEP seeds) -- Bonferroni, sequential
   Holm (``correction: holm``), per-task tests of a multi-task ``claim`` and ``design: adastop`` --
   and checks every published state (``comparison_status``, ``session_status``, ``decision``
   events) against the recomputation at its pair count: decision, stopping trial, p-value and
   e-value (relative 1e-9, far tighter than the 6 significant digits printed) and the running
   means (absolute 1e-9); a claim row (``task`` ``"*"``) is checked against ``offline_claims``;
5. replays STEP's randomization from the logged seed (:class:`StepReplay`).

A published state is compared with the recomputation *as of its time*: corrections and voids
published before it are applied, later ones are not (a correction re-runs a test, so earlier
states legitimately differ).  When a published state is not reproduced, the running means
published before and at that pair pin down which trial's value differs; a data violation found
earlier (a missing, altered or unrequested score) is named as the cause instead.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..session.analysis import interim_records, letters, test_keys
from ..session.auth import signed_score_problem
from ..session.blinding import revealed_key, unseal
from ..session.config import ConfigError, MetricConfig, SessionConfig, config_diff, parse_config
from ..session.errors import JournalError
from ..session.journal import Event

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..session.offline import OfflineClaim, OfflineResult, book_decisions, claims_of
from ..session.plan import Plan
from ..session.trials import TrialBook, TrialRecord, form_pairs, metric_value
from ..stats.families import Comparison
from ..stats.holm import DirectionalTests, side_alpha
from ..stats.registry import make_process
from ..stats.sequential import Decision, SequentialResult
from ..stats.step import StepProcess, step_uniforms
from .errors import AuditError
from .model import ConfigRecord, ScoreRecord, SessionRecord, StatusRecord

__all__ = ["CODES", "AuditReport", "StepReplay", "ComparisonAudit", "TrialAudit", "Violation", "verify"]

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
    "auth_replay": "an operator's journaled request counter did not increase: a replayed request was accepted",
    "auth_mac_mismatch": "a journaled score is not what its operator signed (checked with --operator-keys)",
}

#: Relative tolerance of p-values and e-values; absolute tolerance of means.
PVALUE_RTOL = 1e-9
MEAN_ATOL = 1e-9
#: Significant digits of printed p-values (the check above is much tighter).
PRINT_DIGITS = 6
_SCORE_KINDS = ("score_accepted", "post_decision_score", "score_duplicate", "score_rejected")
_EDIT_KINDS = ("correction", "void")
#: What a session journals after it finished or was aborted: its key, and messages it refused.
AFTER_END_KINDS = frozenset({"key_revealed", "score_rejected", "score_duplicate", "message_rejected", "request_noted"})


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


@dataclasses.dataclass(frozen=True)
class ComparisonAudit:
    """One comparison x metric, recomputed and checked.

    Attributes
    ----------
    index:
        Position in the session's test list (comparison, metric, task: as the session numbers them).
    policy_a, policy_b, metric, method, alternative:
        The test.
    alpha:
        Its level as the session reports it (after the Bonferroni split; Holm's first threshold; a
        per-task test's task level; AdaStop's family level).
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
    task:
        The task of a per-task test (non-pooled ``claim``); ``""`` for a test over every task.
    """

    index: int
    policy_a: str
    policy_b: str
    metric: str
    method: str
    alternative: str
    alpha: float
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
    task: str = ""

    @property
    def label(self) -> str:
        """E.g. ``policy_a vs policy_b progress/nscore`` (``policy_a vs policy_b@push ...`` per task)."""
        where = f"@{self.task}" if self.task else ""
        return f"{self.policy_a} vs {self.policy_b}{where} {self.metric}/{self.method}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (no NaN: ``None``)."""
        res = self.result
        pub = self.published
        return {
            "index": self.index, "policy_a": self.policy_a, "policy_b": self.policy_b, "metric": self.metric,
            "task": self.task,
            "method": self.method, "alternative": self.alternative, "alpha": self.alpha,
            "decision": res.decision.name, "stopping_trial": res.stopping_trial, "n": res.n_observed,
            "pvalue": _finite(res.pvalue), "evalue": _finite(float(res.evalues[-1])) if res.evalues.size else None,
            "mean_a": _finite(float(self.values_a.mean())) if self.values_a.size else None,
            "mean_b": _finite(float(self.values_b.mean())) if self.values_b.size else None,
            "published": None if pub is None else {
                "origin": pub.origin, "decision": _decision_name(pub.decision), "n": pub.n,
                "stopping_trial": pub.stopping_trial, "pvalue": _finite(pub.pvalue)},
            "checked": self.checked, "reproduced": self.reproduced,
            "step_replay": None if self.step is None else dataclasses.asdict(self.step),
        }


@dataclasses.dataclass(frozen=True)
class TrialAudit:
    """One trial as the audit reconstructed it (for reports and the CSV export).

    ``success``/``progress`` are the effective score (after corrections; ``None`` if unscored
    or voided); ``requested_ns``/``scored_ns`` the stamps of the request and the counted score.
    """

    trial_id: int
    round: int
    policy: str
    label: str
    task: str
    initial_condition: str
    attempts: int
    rerun_of: int | None
    requested_ns: int
    scored_ns: int | None
    success: bool | None
    progress: float | None
    scorer: str
    notes: str
    corrected: bool
    voided: bool
    post_decision: bool


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """Everything :func:`verify` found (see :meth:`to_dict` for the JSON form)."""

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


def _submission(payload: dict[str, Any]) -> dict[str, Any]:
    sub = payload.get("submission")
    return dict(sub) if isinstance(sub, dict) else {}


def _score_text(success: object, progress: object) -> str:
    return f"success={success} progress={progress}"


# -- the test state the manager published, recomputed ---------------------------------------------
class _Test(NamedTuple):
    """One test of the session: comparison x metric (x task), as ``EvaluationSession.comparisons()``."""

    ci: int
    mi: int
    comparison: Comparison
    metric: MetricConfig
    task: str  # "" unless the claim is per task

    @property
    def label(self) -> str:
        """E.g. ``a vs b progress/nscore`` (``a vs b@push ...`` for a per-task test)."""
        where = f"@{self.task}" if self.task else ""
        c, m = self.comparison, self.metric
        return f"{c.policy_a} vs {c.policy_b}{where} {m.name}/{m.method}"


@dataclasses.dataclass(frozen=True)
class _Computed:
    """One test recomputed on a trial book.

    ``result`` is the session's offline analysis (:func:`~evalstop_ros.session.offline.offline_decisions`
    row): decision, stopping trial, count consumed.  ``trials_*``/``values_*`` are the pairs
    (AdaStop: each agent's scores, interim by interim) as far as a published state may have
    read them (``limit``), with the p-/e-value trajectories and running means after each.
    ``kind``: ``"paired"`` (a test's own stop), ``"holm"`` (a family decides; a test may be fed
    ahead of its family's analysis), ``"adastop"`` (``unit`` scores per agent per interim).
    """

    kind: str
    unit: int
    trials_a: tuple[int, ...]
    trials_b: tuple[int, ...]
    values_a: NDArray[np.float64]
    values_b: NDArray[np.float64]
    result: SequentialResult
    pvalues: NDArray[np.float64]
    evalues: NDArray[np.float64]
    means_a: NDArray[np.float64]  # running means after each pair (score per agent)
    means_b: NDArray[np.float64]
    fresh_p: float
    fresh_e: float
    limit: int

    def decisions(self, n: int, n_max: int) -> tuple[int, ...]:
        """The decisions a state with ``n`` pairs may carry (the first is the one to expect)."""
        res = self.result
        final = int(res.decision)
        if self.kind == "holm":  # decided at the family's step; CONTINUE until its analysis ran
            at = res.stopping_trial if res.stopping_trial is not None else n_max
            if final != Decision.CONTINUE and n == at:
                return (final, int(Decision.CONTINUE))
            return (int(Decision.CONTINUE),)
        if self.kind == "adastop":
            return (final,) if final != Decision.CONTINUE and n == res.n_observed else (int(Decision.CONTINUE),)
        stop = res.stopping_trial
        if stop is not None and n >= stop:
            return (final,)
        return (int(Decision.BUDGET_EXHAUSTED),) if n >= n_max else (int(Decision.CONTINUE),)

    def expected(self, n: int, n_max: int, published: int | None = None) -> dict[str, Any] | None:
        """What a state with ``n`` pairs should say, or ``None`` if the recomputation has no such state."""
        if n > self.limit or n % self.unit:
            return None
        allowed = self.decisions(n, n_max)
        decision = published if published in allowed else allowed[0]
        stop = self.result.stopping_trial if decision != Decision.CONTINUE else None
        out: dict[str, Any] = {"decision": decision, "stopping_trial": stop}
        if n == 0:
            return out | {"pvalue": self.fresh_p, "evalue": self.fresh_e, "mean_a": math.nan, "mean_b": math.nan}
        p = float(self.pvalues[n - 1]) if self.pvalues.size >= n else math.nan
        e = float(self.evalues[n - 1]) if self.evalues.size >= n else math.nan
        return out | {"pvalue": p, "evalue": e, "mean_a": float(self.means_a[n - 1]),
                      "mean_b": float(self.means_b[n - 1])}


class _Epoch(NamedTuple):
    """The recomputation of one trial book: every test, and the multi-task claims (non-pooled)."""

    tests: list[_Computed]
    claims: list[OfflineClaim]


def _differences(status: StatusRecord, expected: dict[str, Any]) -> list[str]:
    out = []
    if status.decision != expected["decision"]:
        out.append(f"decision published {_decision_name(status.decision)}, recomputed "
                   f"{_decision_name(expected['decision'])}")
    if status.stopping_trial != expected["stopping_trial"]:
        out.append(f"stopping trial published {status.stopping_trial}, recomputed {expected['stopping_trial']}")
    for key in ("pvalue", "evalue"):
        if not _same(getattr(status, key), expected[key]):
            out.append(f"{key} published {fmt(getattr(status, key))}, recomputed {fmt(expected[key])}")
    if status.origin != "decision event":  # decision events carry no means
        for key in ("mean_a", "mean_b"):
            if math.isnan(getattr(status, key)):
                continue  # withheld while the session runs (blinding: session/publishing.py)
            if not _same(getattr(status, key), expected[key], rtol=0.0, atol=MEAN_ATOL):
                out.append(f"{key} published {fmt(getattr(status, key))}, recomputed {fmt(expected[key])}")
    return out


# -- the verifier -------------------------------------------------------------------------------
class _Verifier:
    def __init__(self, record: SessionRecord, config: SessionConfig, config_origin: str,
                 given_key: bytes | None = None) -> None:
        self.violations: list[Violation] = []
        self.notes: list[str] = []
        self.operator_keys: Mapping[str, bytes] | None = None  # verify()'s operator_keys
        key = self._key(record, given_key)
        if key is not None:  # sealed trial requests of a session_event stream get their policy and token back
            record = dataclasses.replace(record, events=tuple(unseal(record.events, config, key, record.session_id)))
        self.record = record
        self.config = config
        self.config_origin = config_origin
        self.plan = Plan(config, key)
        # the session's tests, in the order of EvaluationSession.comparisons() / offline_decisions()
        keys = test_keys(config)
        self.tests = [_Test(k.comparison_index, k.metric_index, k.comparison, k.metric, k.task or "") for k in keys]
        self.test_index: dict[tuple[str, str, str, str], int] = {
            (t.comparison.policy_a, t.comparison.policy_b, t.metric.name, t.task): i for i, t in enumerate(self.tests)}
        #: the claims of the final book (non-pooled claims), set by :meth:`check_statuses`
        self.claims: list[OfflineClaim] = []
        # the counted stream: journal events (or events synthesized from the wire) and their positions
        self.events: list[Event] = []
        self.positions: list[int] = []
        self.request_positions: dict[int, int] = {}
        self.request_stamps: dict[int, int] = {}
        self.score_stamps: dict[int, int] = {}
        self.scorers: dict[int, tuple[str, str]] = {}
        self.data_trials: dict[int, int] = {}  # trial -> position of the first data violation naming it
        self.stop_position: int | None = None
        self.last_requested = 0
        # the level each test reports, as the session's tests (analysis.build_tests) set it
        self.alphas = [k.alpha for k in keys]

    def _key(self, record: SessionRecord, given: bytes | None) -> bytes | None:
        """The plan's key: revealed (and checked against its commitment), else the journal's own,
        else ``given`` (``--key``, for a bag without the journal stream).

        Also reports a journal that fails its hash chain or is truncated, first thing.
        """
        if record.chain_break is not None:
            seq, kind, trial = record.chain_break
            self.violations.append(Violation(
                "journal_edited", () if trial is None else (trial,),
                f"event {seq} ({kind}{'' if trial is None else f', trial {trial}'}) does not match the journal's "
                "hash chain: it (or the event before it) was edited after it was written", seq))
        if record.truncated:
            self.violations.append(Violation("journal_truncated", (), f"journal truncated: {record.truncated}"))
        if record.head_problem:
            self.violations.append(Violation("journal_head_missing", (), f"journal not vouched for by its head "
                                             f"file: {record.head_problem}"))
        if not record.events:
            if given is None:
                raise AuditError(f"{record.source}: the bag has no session_event stream, which carries the key that "
                                 "unblinds the labels (revealed at the session's end); record session_event, or pass "
                                 "the key (--key HEX, from the journal's `key_revealed` event)")
            return given
        key, problem = revealed_key(record.events, record.session_id)
        if key is not None:
            self.notes.append("randomization key revealed at the end and matches its commitment")
            return key
        code = "key_mismatch" if "does not match" in problem else "key_unrevealed"
        if record.plan_key:
            if code == "key_mismatch":
                self.violations.append(Violation(code, (), problem))
            else:
                self.notes.append(f"{problem}; the plan is replayed with the journal's own key")
            return bytes.fromhex(record.plan_key)
        self.violations.append(Violation(code, (), problem))
        return None

    # .. reporting .................................................................................
    def violate(self, code: str, trials: Iterable[int], message: str, position: int | None = None,
                stamp_ns: int | None = None, *, data: bool = True) -> None:
        ids = tuple(sorted(set(trials)))
        self.violations.append(Violation(code, ids, message, position, stamp_ns))
        if data:
            for trial in ids:
                self.data_trials.setdefault(trial, position if position is not None else 0)

    # .. 1. the counted stream ........................................................................
    def counted_stream(self) -> None:
        rec = self.record
        if rec.has_journal_stream:
            self.events = list(rec.events)
            self.positions = list(self.event_positions())
            seqs = [e.seq for e in rec.events]
            expected = range(1, seqs[-1] + 1)
            if seqs != list(expected):
                missing = sorted(set(expected) - set(seqs))
                self.violate("journal_gap", [], f"journal stream lacks {len(missing)} event(s): seq "
                             f"{_ranges(missing)} (recording started late or lost messages)", data=False)
            for seq, first, other in rec.event_conflicts:
                self.violate("journal_conflict", [t for t in (first.get("trial_id"), other.get("trial_id")) if t],
                             f"journal event seq {seq} published twice with different content: {first} vs {other}")
        else:
            self.events, self.positions = self.events_from_wire()

    def event_positions(self) -> Sequence[int]:
        """Positions of the journal events in the source (bag order or seq)."""
        positions = self.record.event_positions
        return positions if len(positions) == len(self.record.events) else [e.seq for e in self.record.events]

    def events_from_wire(self) -> tuple[list[Event], list[int]]:
        """Requests and accepted scores of a bag without a journal stream, as journal events."""
        rec = self.record
        if self.config.scoring == "auto":
            raise AuditError(f"{rec.source}: cannot audit: the session scores automatically (scoring: auto), but the "
                             "bag has no session_event topic, the only place the manager's automatic scores, "
                             "corrections and decisions appear; record session_event too")
        self.notes.append("the bag has no session_event stream: automatic scores, corrections and voids are "
                          "invisible; counted scores are those acknowledged as accepted on score_ack")
        out: list[tuple[int, Event]] = []
        seen: set[int] = set()
        for req in rec.requests:
            if req.trial_id == 0 or req.trial_id in seen:
                continue
            seen.add(req.trial_id)
            policy = self.unblind(req.label, req.round)
            if policy is None:
                self.violate("label_unknown", [req.trial_id], f"trial {req.trial_id}: label {req.label!r} is not a "
                             f"label of round {req.round} in this session's plan", req.position, req.stamp_ns)
                policy = ""
            payload = {"round": req.round, "policy_id": policy, "label": req.label, "task": req.task,
                       "initial_condition": req.initial_condition, "token": req.token, "rerun_of": None}
            out.append((req.position, Event(req.position, req.stamp_ns, "trial_requested", req.trial_id, payload)))
        answered = self.match_acks()
        if not rec.acks:
            self.notes.append("the bag has no score_ack messages: the first score of each trial is taken as counted")
        counted: set[int] = set()
        for score in rec.scores:
            ack = answered.get(score.position)
            accepted = (ack is not None and ack[0] and not ack[1]) if rec.acks else score.trial_id not in counted
            if accepted and score.trial_id not in counted:
                counted.add(score.trial_id)
                out.append((score.position, Event(score.position, score.stamp_ns, "score_accepted", score.trial_id,
                                               {"submission": score.submission()})))
        out.sort(key=lambda item: item[0])
        return [e for _, e in out], [p for p, _ in out]

    def match_acks(self) -> dict[int, tuple[bool, bool, str]]:
        """Score index -> (accepted, duplicate, reason) of the ack that answered it."""
        pending: dict[int, list[ScoreRecord]] = defaultdict(list)
        scores = iter(self.record.scores)
        upcoming = next(scores, None)
        answered: dict[int, tuple[bool, bool, str]] = {}
        for ack in self.record.acks:
            while upcoming is not None and upcoming.position < ack.position:
                pending[upcoming.trial_id].append(upcoming)
                upcoming = next(scores, None)
            if pending[ack.trial_id]:
                answered[pending[ack.trial_id].pop(0).position] = (ack.accepted, ack.duplicate, ack.reason)
            else:
                self.violate("ack_mismatch", [ack.trial_id], f"trial {ack.trial_id}: score_ack "
                             f"({'accepted' if ack.accepted else 'rejected'}) answers no recorded trial_score",
                             ack.position, ack.stamp_ns)
        return answered

    def unblind(self, label: str, round_number: int) -> str | None:
        for policy in self.config.policies:
            if self.plan.label(policy, round_number) == label:
                return policy
        return None

    # .. 2. fold ...................................................................................
    def fold(self, epoch: int | None = None) -> TrialBook:
        """The trial book of the counted stream.

        With ``epoch`` = ``e``: the book as it stood after the ``e``-th correction or void and
        before the next one, i.e. the stream cut just before edit ``e + 1``.  (Not "everything
        but the later edits": a void's re-run must not exist in a book where the void did not
        happen.)  Only the full fold (``None``) reports violations.
        """
        book = TrialBook()
        edit = 0
        report = epoch is None
        for event, position in zip(self.events, self.positions):
            if event.kind in _EDIT_KINDS:
                edit += 1
                if epoch is not None and edit > epoch:
                    break
            if event.kind == "trial_requested":
                self.add_request(book, event, position, report=report)
                continue
            if event.kind not in ("reset_confirmed", "runner_result", "score_accepted", "post_decision_score",
                                  *_EDIT_KINDS):
                continue
            if event.trial_id is not None and event.trial_id not in book.trials:
                if report and event.kind in ("score_accepted", "post_decision_score"):
                    self.violate("score_not_requested", [event.trial_id], f"trial {event.trial_id}: score counted "
                                 "by the manager for a trial that was never requested", position, event.stamp_ns)
                elif report:
                    self.violate("journal_inconsistent", [event.trial_id], f"journal event seq {event.seq} "
                                 f"({event.kind}) names trial {event.trial_id}, which was never requested",
                                 position, event.stamp_ns)
                continue
            if report and event.kind == "runner_result" and self.config.confirm_reset:
                self.check_reset(book, event, position)
            try:
                book.apply(event)
            except (JournalError, KeyError, TypeError, ValueError) as err:
                if report:
                    self.violate("journal_inconsistent", [event.trial_id] if event.trial_id else [],
                                 f"journal event seq {event.seq} ({event.kind}) cannot be applied: {err}",
                                 position, event.stamp_ns)
                continue
            if report and event.kind in ("score_accepted", "post_decision_score"):
                self.score_stamps[int(event.trial_id or 0)] = event.stamp_ns
                sub = _submission(event.payload)
                self.scorers[int(event.trial_id or 0)] = (str(sub.get("operator", "")), str(sub.get("notes", "")))
        return book

    def check_reset(self, book: TrialBook, event: Event, position: int) -> None:
        """``confirm_reset``: a run of a trial must follow the operator's confirmation of its reset."""
        record = book.trials[int(event.trial_id or 0)]
        if record.reset_confirmed != record.attempt:
            self.violate("reset_unconfirmed", [record.trial_id], f"trial {record.trial_id}: run (attempt "
                         f"{record.attempt}) recorded without the operator's confirmation that its scene was reset",
                         position, event.stamp_ns)

    def add_request(self, book: TrialBook, event: Event, position: int, *, report: bool) -> None:
        p = event.payload
        trial_id = int(event.trial_id or 0)
        if trial_id in book.trials:
            if report:
                self.violate("journal_inconsistent", [trial_id], f"trial {trial_id} requested twice", position,
                             event.stamp_ns)
            return
        if report:
            expected = self.last_requested + 1
            if trial_id != expected:
                if trial_id > expected:
                    missing = list(range(expected, trial_id))
                    self.violate("trial_missing", missing, f"trial(s) {_ranges(missing)} never requested: trial ids "
                                 f"jump from {expected - 1} to {trial_id}", position, event.stamp_ns)
                else:
                    self.violate("journal_inconsistent", [trial_id], f"trial {trial_id} requested out of order "
                                 f"(after trial {expected - 1})", position, event.stamp_ns)
            token = self.plan.token(self.record.session_id, trial_id)
            if str(p.get("token")) != token:
                self.violate("request_mismatch", [trial_id], f"trial {trial_id}: request token {p.get('token')!r} is "
                             f"not the session's token for this trial", position, event.stamp_ns)
            policy = str(p.get("policy_id", ""))
            if policy in self.config.policies and self.plan.label(policy, int(p.get("round", 0))) != p.get("label"):
                self.violate("request_mismatch", [trial_id], f"trial {trial_id}: label {p.get('label')!r} is not "
                             f"{policy}'s label in round {p.get('round')}", position, event.stamp_ns)
            self.request_positions[trial_id] = position
            self.request_stamps[trial_id] = event.stamp_ns
            self.last_requested = max(self.last_requested, trial_id)
        book.trials[trial_id] = TrialRecord(
            trial_id, int(p.get("round", 0)), str(p.get("policy_id", "")), str(p.get("label", "")),
            str(p.get("task", "")), str(p.get("initial_condition", "")), str(p.get("token", "")),
            None if p.get("rerun_of") is None else int(p["rerun_of"]),
        )

    # .. 3. protocol ..............................................................................
    def stop(self) -> None:
        """Position of the session's stop: its journaled ``finished``/``aborted`` event when the
        journal stream is there (one topic, so ordered with the scores it is compared with;
        DDS does not order messages across topics, so a status message may be recorded before
        the event that caused it), else the first published finished/aborted state."""
        if self.record.has_journal_stream:
            finals = [pos for e, pos in zip(self.events, self.positions) if e.kind in ("finished", "aborted")]
        else:
            finals = [s.position for s in self.record.states if s.state in ("finished", "aborted")]
        self.stop_position = min(finals) if finals else None

    def after_end(self) -> None:
        """Nothing but the key's reveal and refusals (audit-only events) may follow ``finished``/``aborted``:
        anything else was appended after the session ended (a forged event, re-chained or not)."""
        if not self.record.has_journal_stream:
            return
        end = next((e for e in self.events if e.kind in ("finished", "aborted")), None)
        if end is None:
            return
        late = [e for e in self.events if e.seq > end.seq and e.kind not in AFTER_END_KINDS]
        if late:
            first = late[0]
            self.violate("event_after_end", [e.trial_id for e in late if e.trial_id], f"{len(late)} event(s) after "
                         f"the session {end.kind} (event {end.seq}): first event {first.seq} ({first.kind}"
                         f"{'' if first.trial_id is None else f', trial {first.trial_id}'}); a session journals "
                         "nothing but its key and refused messages once it has ended", first.seq, first.stamp_ns,
                         data=False)

    def submissions(self) -> list[tuple[int, int, int | None, dict[str, Any], str, str]]:
        """(position, stamp, claimed trial, submission, outcome, origin) of every score seen."""
        out = []
        if self.record.has_journal_stream:
            for event, pos in zip(self.events, self.positions):
                if event.kind in _SCORE_KINDS:
                    claimed = event.trial_id if event.trial_id is not None else event.payload.get("claimed_trial_id")
                    claimed = claimed if isinstance(claimed, int) and not isinstance(claimed, bool) else None
                    outcome = {"score_accepted": "accepted", "post_decision_score": "accepted (post-decision)",
                               "score_duplicate": "duplicate", "score_rejected": "rejected"}[event.kind]
                    if event.kind == "score_rejected":
                        outcome += f": {event.payload.get('reason', '')}"
                    out.append((pos, event.stamp_ns, claimed, _submission(event.payload), outcome, "journal"))
        return out

    def protocol(self, book: TrialBook) -> None:
        rec = self.record
        stop = self.stop_position
        wire_unmatched = self.cross_check(book) if rec.has_journal_stream and rec.has_wire else None
        subs = self.submissions()
        if not rec.has_journal_stream:
            answered = self.match_acks_quiet()
            for s in rec.scores:
                ack = answered.get(s.position)
                outcome = "unanswered" if ack is None else ("duplicate" if ack[1] else "accepted" if ack[0]
                                                            else f"rejected: {ack[2]}")
                subs.append((s.position, s.stamp_ns, s.trial_id, {"token": s.token, "success": s.success,
                             "progress": s.progress, "operator": s.scorer}, outcome, "trial_score"))
                if ack is None and rec.acks:
                    self.violate("score_unacknowledged", [s.trial_id], f"trial {s.trial_id}: trial_score "
                                 f"({_score_text(s.success, s.progress)}) was never answered on score_ack",
                                 s.position, s.stamp_ns)
        elif wire_unmatched:
            for s in wire_unmatched:
                subs.append((s.position, s.stamp_ns, s.trial_id, {"token": s.token, "success": s.success,
                             "progress": s.progress, "operator": s.scorer}, "not journaled", "trial_score"))
        rejected = 0
        for pos, stamp, claimed, sub, outcome, origin in subs:
            rejected += outcome.startswith("rejected")
            where = f"({origin}, {outcome})"
            if claimed is None or claimed not in book.trials or self.request_positions.get(claimed, pos) > pos:
                label = "before its request" if claimed in book.trials else "never requested"
                self.violate("score_not_requested", [claimed] if claimed else [],
                             f"trial {claimed}: score {_score_text(sub.get('success'), sub.get('progress'))} for a "
                             f"trial {label} {where}", pos, stamp)
            elif sub.get("token") != book.trials[claimed].token:
                self.violate("token_mismatch", [claimed], f"trial {claimed}: score token {sub.get('token')!r} does "
                             f"not match the request's {book.trials[claimed].token!r} {where}", pos, stamp)
            if stop is not None and pos > stop:
                self.violate("after_stop", [claimed] if claimed else [], f"trial {claimed}: score "
                             f"{_score_text(sub.get('success'), sub.get('progress'))} arrived after the session "
                             f"stopped {where}", pos, stamp)
        if rejected:
            self.notes.append(f"{rejected} score(s) rejected by the manager (listed above if they break the protocol)")
        if stop is not None:
            for trial_id, pos in self.request_positions.items():
                if pos > stop:
                    self.violate("after_stop", [trial_id], f"trial {trial_id} was requested after the session "
                                 "stopped", pos, self.request_stamps.get(trial_id))
        for event, pos in zip(self.events, self.positions):
            if event.kind in _EDIT_KINDS and not str(event.payload.get("reason", "")).strip():
                self.violate("edit_without_reason", [event.trial_id] if event.trial_id else [],
                             f"trial {event.trial_id}: {event.kind} without a reason", pos, event.stamp_ns)
        self.authentication()
        self.unscored(book)
        posts = [r.trial_id for r in book.trials.values() if r.post_decision and r.score is not None]
        if posts:
            self.notes.append(f"trial(s) {_ranges(posts)} scored after all their policy's comparisons were decided "
                              "(recorded, fed to no test)")

    def authentication(self) -> None:
        """Each operator's journaled request counters strictly increase; refused messages are counted.

        (The MACs themselves need the operators' keys, which the audit does not have.)
        """
        last: dict[str, int] = {}
        refused: Counter[str] = Counter()
        macs = 0
        for event, pos in zip(self.events, self.positions):
            if self.operator_keys is not None and event.kind in _SCORE_KINDS and event.kind != "score_rejected":
                auth = event.payload.get("auth")
                if isinstance(auth, dict) and auth.get("kind") == "trial_score":
                    problem = signed_score_problem(self.operator_keys, self.record.session_id, int(event.trial_id or 0),
                                                   event.payload)
                    macs += not problem
                    if problem:
                        self.violate("auth_mac_mismatch", [event.trial_id] if event.trial_id else [],
                                     f"trial {event.trial_id}: {event.kind}: {problem}", pos, event.stamp_ns)
            if event.kind == "message_rejected":
                refused[str(event.payload.get("message", "?"))] += 1
            entry = event.payload.get("auth")
            if not (isinstance(entry, dict) and isinstance(entry.get("operator"), str)
                    and isinstance(entry.get("counter"), int)):
                continue
            operator, counter = entry["operator"], entry["counter"]
            if operator in last and counter <= last[operator]:
                self.violate("auth_replay", [event.trial_id] if event.trial_id else [],
                             f"{event.kind}: counter {counter} of operator {operator!r} is not above its earlier "
                             f"{last[operator]}: a replayed request was accepted", pos, event.stamp_ns)
            last[operator] = max(counter, last.get(operator, 0))
        if last:
            self.notes.append(f"requests signed by operator(s) {', '.join(sorted(last))} (counters increase)")
        if self.operator_keys is not None:
            self.notes.append(f"{macs} signed score(s) verified with the operators' keys")
        if refused:
            self.notes.append(f"{sum(refused.values())} message(s) refused before reaching the session "
                              f"(unauthenticated, unauthorized or replayed: "
                              f"{', '.join(f'{n} {kind}' for kind, n in sorted(refused.items()))})")

    def match_acks_quiet(self) -> dict[int, tuple[bool, bool, str]]:
        before = len(self.violations)
        answered = self.match_acks()
        del self.violations[before:]  # already reported while building the stream
        return answered

    def unscored(self, book: TrialBook) -> None:
        final = self.final_state()
        open_ids = [r.trial_id for r in book.trials.values() if not r.closed]
        for trial_id in open_ids:
            last = trial_id == max(book.trials)
            record = book.trials[trial_id]
            if last and final in ("running", "paused", "aborted", "unknown"):
                self.notes.append(f"trial {trial_id} was pending (requested, not scored) when the "
                                  f"{'session was aborted' if final == 'aborted' else 'source ends'}")
                continue
            self.violate("unscored_trial", [trial_id], f"trial {trial_id}: requested (round {record.round}, label "
                         f"{record.label}, {record.policy or 'unknown policy'}) but never scored",
                         self.request_positions.get(trial_id), self.request_stamps.get(trial_id))

    def final_state(self) -> str:
        states = sorted(self.record.states, key=lambda s: s.position)
        if self.stop_position is not None:
            return next(s.state for s in states if s.position == self.stop_position) if any(
                s.position == self.stop_position for s in states) else "finished"
        return states[-1].state if states else "unknown"

    def cross_check(self, book: TrialBook) -> list[ScoreRecord]:
        """Compare the wire of a bag with its journal stream; return wire scores with no journal entry."""
        rec = self.record
        for req in rec.requests:
            if req.trial_id == 0:
                continue
            record = book.trials.get(req.trial_id)
            if record is None:
                if req.trial_id not in {e.trial_id for e in self.events if e.kind == "trial_requested"}:
                    self.violate("request_mismatch", [req.trial_id], f"trial {req.trial_id}: trial_request message "
                                 "with no trial_requested event in the journal stream", req.position, req.stamp_ns)
                continue
            wire = (req.round, req.label, req.task, req.initial_condition, req.token)
            journal = (record.round, record.label, record.task, record.initial_condition, record.token)
            if wire != journal:
                self.violate("request_mismatch", [req.trial_id], f"trial {req.trial_id}: trial_request "
                             f"(round, label, task, condition, token) = {wire} but the journal has {journal}",
                             req.position, req.stamp_ns)
        # trial_request keeps only the latest request (reliable, depth 1, so a late operator sees
        # just the pending trial): a slow recorder may miss superseded ones.  The journal stream
        # (keep-all) is authoritative, so a request missing from the wire is a recording gap.
        on_wire = {r.trial_id for r in rec.requests}
        gaps = sorted(t for t in book.trials if t not in on_wire)
        if gaps:
            self.notes.append(f"trial_request of trial(s) {_ranges(gaps)} not recorded (the topic keeps only the "
                              "latest request); the journal stream has them")
        # scores: every wire score must be a journaled submission, and every journaled operator score on the wire
        journaled: dict[int | None, list[tuple[int, dict[str, Any], str]]] = defaultdict(list)
        for pos, _, claimed, sub, outcome, _ in self.submissions():
            journaled[claimed].append((pos, sub, outcome))
        unmatched: list[ScoreRecord] = []
        used: set[int] = set()
        refused = self.refused_scores()
        for s in rec.scores:
            wire_sub = s.submission()
            scorer = s.scorer if len(s.scorer) <= 64 else f"{s.scorer[:64]}... ({len(s.scorer)} characters)"
            key = (s.trial_id, scorer, s.success, s.progress)  # as auth.summary journals it
            if refused.get(key):  # refused before it reached the session (authentication): no score event
                refused[key] -= 1
                continue
            candidates = [(pos, sub) for pos, sub, _ in journaled.get(s.trial_id, []) if pos not in used]
            match = next((pos for pos, sub in candidates if all(sub.get(k) == v for k, v in wire_sub.items())), None)
            if match is not None:
                used.add(match)
                continue
            other = next(((pos, sub) for pos, sub in candidates if not self.auto_scorer(str(sub.get("operator", "")))),
                         None)
            if other is not None:
                used.add(other[0])
                self.violate("score_mismatch", [s.trial_id], f"trial {s.trial_id}: trial_score message "
                             f"({_score_text(s.success, s.progress)}, scorer {s.scorer!r}) differs from the score the "
                             f"manager journaled ({_score_text(other[1].get('success'), other[1].get('progress'))}, "
                             f"scorer {other[1].get('operator')!r})", s.position, s.stamp_ns)
            else:
                self.violate("score_mismatch", [s.trial_id], f"trial {s.trial_id}: trial_score message "
                             f"({_score_text(s.success, s.progress)}) has no counterpart in the journal stream",
                             s.position, s.stamp_ns)
                unmatched.append(s)
        for claimed, entries in journaled.items():
            for pos, sub, outcome in entries:
                if pos not in used and not self.auto_scorer(str(sub.get("operator", ""))):
                    self.violate("score_mismatch", [claimed] if claimed else [], f"trial {claimed}: the manager "
                                 f"journaled a score ({_score_text(sub.get('success'), sub.get('progress'))}, scorer "
                                 f"{sub.get('operator')!r}, {outcome}) that no recorded trial_score message carries",
                                 pos)
        # acks: per trial, the multiset of (accepted, duplicate) answers equals the journaled outcomes
        if rec.acks:
            outcomes: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
            for event in self.events:
                if event.kind in _SCORE_KINDS and event.trial_id is not None:
                    outcomes[event.trial_id].append((event.kind != "score_rejected", event.kind == "score_duplicate"))
            for trial_id, _, _, _ in self.refused_scores().elements():
                outcomes[trial_id].append((False, False))
            answers: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
            for ack in rec.acks:
                answers[ack.trial_id].append((ack.accepted, ack.duplicate))
            # score_ack is volatile: a recorder that matched the manager's publisher late never got
            # the answers to the trials before the first one it recorded (a gap of the recording,
            # not of the session; the journal stream, latched, is replayed to it in full)
            first_answered = min((ack.trial_id for ack in rec.acks if ack.trial_id), default=0)
            before_recording: list[int] = []
            for trial_id in sorted(set(outcomes) | set(answers)):
                if trial_id == 0 or sorted(outcomes.get(trial_id, [])) == sorted(answers.get(trial_id, [])):
                    continue
                if not outcomes.get(trial_id) and all(not a for a, _ in answers[trial_id]):
                    continue  # rejected scores for unknown trials are journaled without a trial id
                if not answers.get(trial_id) and trial_id < first_answered:
                    before_recording.append(trial_id)
                    continue
                self.violate("ack_mismatch", [trial_id], f"trial {trial_id}: score_ack answers "
                             f"{answers.get(trial_id, [])} (accepted, duplicate) but the journal has "
                             f"{outcomes.get(trial_id, [])}")
            if before_recording:
                self.notes.append(f"score_ack was recorded from its first answer on: the answers to trial(s) "
                                  f"{', '.join(map(str, before_recording))} came before it (a recording gap; the "
                                  "journal stream holds their outcomes)")
        return unmatched

    def refused_scores(self) -> Counter[tuple[int, str, object, object]]:
        """``trial_score`` messages journaled as ``message_rejected`` (trial, scorer, success, progress)."""
        out: Counter[tuple[int, str, object, object]] = Counter()
        for event in self.events:
            if event.kind == "message_rejected" and event.payload.get("message") == "trial_score":
                summary = event.payload.get("summary") or {}
                fields = summary.get("fields") or {} if isinstance(summary, dict) else {}
                trial_id = fields.get("trial_id")
                if isinstance(trial_id, int) and not isinstance(trial_id, bool):
                    out[(trial_id, str(summary.get("operator", "")), fields.get("success"), fields.get("progress"))] += 1
        return out

    def auto_scorer(self, operator: str) -> bool:
        """A score the manager took from the runner itself (never on trial_score)."""
        return self.config.scoring == "auto" and operator.startswith("auto:")

    def config_checks(self, statuses: Sequence[StatusRecord]) -> None:
        for s in statuses:
            index = self.test_index.get((s.policy_a, s.policy_b, s.metric, s.task))
            if index is None:
                continue
            metric = self.tests[index].metric
            alpha = self.alphas[index]
            if s.method and s.method != metric.method:
                self.violate("method_changed", [], f"{s.policy_a} vs {s.policy_b} {s.metric}: {s.origin} at pair "
                             f"{s.n} used method {s.method!r}, the configuration {metric.method!r} (changed "
                             "mid-session?)", s.position, s.stamp_ns, data=False)
                return
            if s.alpha is not None and not _same(s.alpha, alpha, rtol=1e-12):
                self.violate("alpha_changed", [], f"{s.policy_a} vs {s.policy_b} {s.metric}: {s.origin} at pair "
                             f"{s.n} ran at alpha {s.alpha:g}, the configuration gives {alpha:g} (changed "
                             "mid-session?)", s.position, s.stamp_ns, data=False)
                return

    # .. 4. recomputation ...........................................................................
    def compute(self, book: TrialBook) -> _Epoch:
        """Every test on ``book``: the session's offline analysis, with the pairs it read."""
        rows: list[OfflineResult] = book_decisions(self.config, book)
        if len(rows) != len(self.tests):
            raise AuditError(f"{self.record.source}: the session's offline analysis gives {len(rows)} tests, the "
                             f"configuration {len(self.tests)}")
        out = []
        for index, (test, row) in enumerate(zip(self.tests, rows)):
            if (row.policy_a, row.policy_b, row.metric, row.task) != (
                    test.comparison.policy_a, test.comparison.policy_b, test.metric.name, test.task):
                raise AuditError(f"{self.record.source}: the session's offline analysis orders its tests differently "
                                 f"({row.policy_a} vs {row.policy_b}@{row.task} {row.metric} for {test.label})")
            if self.config.design == "adastop":
                out.append(self.compute_adastop(book, row.result, test))
            else:
                out.append(self.compute_paired(book, row.result, test, self.alphas[index]))
        claims = claims_of(self.config, rows) if self.config.claim != "pooled" else []
        return _Epoch(out, claims)

    def compute_paired(self, book: TrialBook, res: SequentialResult, test: _Test, alpha: float) -> _Computed:
        """A paired or independent test (own pair formation, for the trial ids of each pair)."""
        ci, mi, comparison, metric, task = test
        pairs = form_pairs(book, self.config.design, comparison.policy_a, comparison.policy_b, task or None)
        a, b = (np.array([metric_value(book.trials[t].score, metric.name)  # type: ignore[arg-type]
                          for t in trials], dtype=np.float64)
                for trials in ([p.trial_a for p in pairs], [p.trial_b for p in pairs]))
        seed, bins, n_max = self.plan.step_seed(ci, mi), metric.bins or 2, self.config.n_max
        if self.config.correction == "holm":
            # the family decides (res); a test's own p-/e-values run ahead of the family's analysis
            limit = min(a.size, n_max)
            m = len(self.config.comparison_list())
            tests = DirectionalTests(metric.method, alternative=metric.alternative, n_max=n_max, seed=seed, bins=bins,
                                     side_alpha=side_alpha(metric.alpha or 0.0, m, metric.alternative))
            fresh_p, fresh_e = float(tests.pvalue()[0]), float(tests.evalue()[0])
            pvalues, evalues = [], []
            for n in range(limit):
                tests.update(a[n:n + 1], b[n:n + 1])
                pvalues.append(float(tests.pvalue()[0]))
                evalues.append(float(tests.evalue()[0]))
            used = res.stopping_trial if res.decision in (Decision.A_BETTER, Decision.B_BETTER) else (
                n_max if res.decision == Decision.BUDGET_EXHAUSTED else limit)
            used = min(used or 0, limit)
            res = dataclasses.replace(res, n_observed=used, pvalues=np.array(pvalues[:used]),
                                      evalues=np.array(evalues[:used]))
            kind, p_traj, e_traj = "holm", np.array(pvalues), np.array(evalues)
        else:
            limit = res.n_observed
            fresh = make_process(metric.method, 1, alpha=alpha,
                                 alternative=metric.alternative, n_max=n_max, seed=seed, bins=bins)
            fresh_p, fresh_e = float(fresh.pvalue()[0]), float(fresh.evalue()[0])
            kind, p_traj, e_traj = "paired", res.pvalues, res.evalues
        counts = np.arange(1, limit + 1, dtype=np.float64)
        return _Computed(
            kind, 1, tuple(p.trial_a for p in pairs[:limit]), tuple(p.trial_b for p in pairs[:limit]), a[:limit],
            b[:limit], res, p_traj, e_traj, np.cumsum(a[:limit]) / counts, np.cumsum(b[:limit]) / counts,
            fresh_p, fresh_e, limit,
        )

    def compute_adastop(self, book: TrialBook, res: SequentialResult, test: _Test) -> _Computed:
        """An AdaStop comparison: each agent's first ``N`` scores of every interim it was analysed on."""
        assert self.config.adastop is not None
        unit = self.config.adastop.n_per_interim
        interims = res.n_observed // unit
        sides = []
        for policy in (test.comparison.policy_a, test.comparison.policy_b):
            trials: list[int] = []
            for interim in range(1, interims + 1):
                trials += [r.trial_id for r in interim_records(book, interim, policy, unit)]
            sides.append(trials)
        limit = min(len(sides[0]), len(sides[1]))
        a, b = (np.array([metric_value(book.trials[t].score, test.metric.name)  # type: ignore[arg-type]
                          for t in side[:limit]], dtype=np.float64) for side in sides)
        counts = np.arange(1, limit + 1, dtype=np.float64)
        empty = np.empty(0)
        return _Computed("adastop", unit, tuple(sides[0][:limit]), tuple(sides[1][:limit]), a, b, res, empty, empty,
                         np.cumsum(a) / counts, np.cumsum(b) / counts, math.nan, math.nan, limit)

    def check_statuses(self, final_book: TrialBook) -> tuple[list[_Computed], dict[int, int], dict[int, bool],
                                                               dict[int, StatusRecord]]:
        edits = [pos for e, pos in zip(self.events, self.positions) if e.kind in _EDIT_KINDS]
        computed: dict[int, _Epoch] = {len(edits): self.compute(final_book)}

        def epoch_of(epoch: int) -> _Epoch:
            if epoch not in computed:
                computed[epoch] = self.compute(self.fold(epoch))
            return computed[epoch]

        def at(epoch: int) -> list[_Computed]:
            return epoch_of(epoch).tests

        self.claims = computed[len(edits)].claims

        checked: dict[int, int] = defaultdict(int)
        reproduced = {i: True for i in range(len(self.tests))}
        last: dict[int, StatusRecord] = {}
        mismatches: dict[int, list[tuple[StatusRecord, list[str], int]]] = defaultdict(list)
        seen: set[tuple[Any, ...]] = set()
        statuses = sorted(self.record.statuses, key=lambda s: s.position)
        history: dict[tuple[int, int], dict[int, StatusRecord]] = defaultdict(dict)  # (test, epoch) -> n -> status
        for s in statuses:
            if s.task == "*" and self.config.claim != "pooled":
                checked[-1] += 1
                self.check_claim(s, epoch_of(bisect.bisect_left(edits, s.position)).claims)
                continue
            index = self.test_index.get((s.policy_a, s.policy_b, s.metric, s.task))
            if index is None:
                where = f" on task {s.task!r}" if s.task else ""
                self.violate("status_mismatch", [], f"{s.origin} reports comparison {s.policy_a} vs {s.policy_b} "
                             f"{s.metric}{where}, which the configuration does not define", s.position, s.stamp_ns,
                             data=False)
                continue
            last[index] = s
            epoch = bisect.bisect_left(edits, s.position)
            key = (index, epoch, s.n, s.decision, s.stopping_trial, repr(s.pvalue), repr(s.evalue), repr(s.mean_a),
                   repr(s.mean_b), s.origin == "decision event")  # repr: NaN equals NaN
            if key in seen:
                continue
            seen.add(key)
            checked[index] += 1
            if s.origin != "decision event":
                history[(index, epoch)].setdefault(s.n, s)
            problems = None
            for candidate in (epoch, epoch - 1, epoch + 1):  # tolerate cross-topic receive order
                if 0 <= candidate <= len(edits):
                    expected = at(candidate)[index].expected(s.n, self.config.n_max, s.decision)
                    diffs = ([f"{s.n} pairs published, the recomputation has no such state (it reads "
                              f"{at(candidate)[index].limit})"] if expected is None
                             else _differences(s, expected))
                    if not diffs:
                        problems = None
                        break
                    if problems is None:
                        problems = diffs
            if problems:
                reproduced[index] = False
                mismatches[index].append((s, problems, epoch))
        pinned: list[int] = []  # trials an earlier state named: they explain later mismatches on the same trials
        for index, found in sorted(mismatches.items(), key=lambda item: item[1][0][0].position):
            s, problems, epoch = found[0]
            culprits, why = self.culprits(index, s, epoch, at(epoch)[index], history, pinned)
            pinned.extend(culprits)
            more = f"; {len(found) - 1} later published state(s) of this comparison differ too" if len(found) > 1 else ""
            self.violate("status_mismatch", culprits, f"{self.label(index)}: {s.origin} at pair {s.n} not reproduced "
                         f"({'; '.join(problems)}){why}{more}", s.position, s.stamp_ns, data=False)
        checked.pop(-1, None)
        return at(len(edits)), dict(checked), reproduced, last

    def check_claim(self, s: StatusRecord, claims: Sequence[OfflineClaim]) -> None:
        """A multi-task claim row (``task`` ``"*"``) against ``offline_claims`` as of its time.

        A claim only grows, so a published directional claim must be established on the
        recomputation, and a published "no claim" (``BUDGET_EXHAUSTED``, final) must not be.
        """
        claim = next((c for c in claims if (c.policy_a, c.policy_b, c.metric) == (s.policy_a, s.policy_b, s.metric)),
                     None)
        name = f"{s.policy_a} vs {s.policy_b} {s.metric} ({self.config.claim} claim)"
        if claim is None:
            self.violate("status_mismatch", [], f"{s.origin} reports a claim on {name}, which the configuration does "
                         "not define", s.position, s.stamp_ns, data=False)
            return
        established = claim.result.established
        direction = Decision.B_BETTER if claim.result.alternative == "greater" else Decision.A_BETTER
        problem = None
        if s.decision in (Decision.A_BETTER, Decision.B_BETTER) and (not established or s.decision != direction):
            problem = (f"published {_decision_name(s.decision)}, recomputed "
                       f"{direction.name if established else 'not established'}")
        elif s.decision == Decision.BUDGET_EXHAUSTED and established:
            problem = f"published no claim (BUDGET_EXHAUSTED), recomputed {direction.name}"
        elif s.decision not in Decision._value2member_map_:
            problem = f"published decision code {s.decision}"
        if problem:
            earlier = sorted(t for t, pos in self.data_trials.items() if pos <= s.position)
            why = f"; explained by the finding(s) on {_trial_words(earlier)} above" if earlier else ""
            self.violate("status_mismatch", earlier, f"{name}: {s.origin} at {s.n} pairs not reproduced ({problem})"
                         f"{why}", s.position, s.stamp_ns, data=False)

    def culprits(self, index: int, s: StatusRecord, epoch: int, computed: _Computed,
                 history: dict[tuple[int, int], dict[int, StatusRecord]], pinned: Sequence[int] = ()
                 ) -> tuple[list[int], str]:
        """The trial(s) behind an unreproduced state, and a clause saying how they were found.

        ``pinned``: trials named by earlier mismatches of other comparisons; when nothing pins a
        trial of this one (its running means are withheld while the session runs), those of
        them it consumed explain it.
        """
        comparison = self.tests[index].comparison
        policies = {comparison.policy_a, comparison.policy_b}
        earlier = sorted(t for t, pos in self.data_trials.items() if pos <= s.position and self.policy_of(t) in
                         (*policies, ""))
        if earlier:
            return earlier, f"; explained by the finding(s) on {_trial_words(earlier)} above"
        n = s.n
        if not 1 <= n <= len(computed.trials_a):
            return [], ""
        trial_a, trial_b = computed.trials_a[n - 1], computed.trials_b[n - 1]
        known = history.get((index, epoch), {})
        before = known.get(n - 1)
        consumed = sorted(t for t in set(pinned) if t in (*computed.trials_a[:n], *computed.trials_b[:n]))
        explained = (consumed, f"; explained by the finding(s) on {_trial_words(consumed)} above") if consumed else None
        withheld = before is not None and (math.isnan(before.mean_a) or math.isnan(before.mean_b))
        if s.origin != "decision event" and n > 1 and withheld and math.isfinite(s.mean_a):
            return explained or ([], "; the per-policy means are published only at the end (blinding), so they do "
                                 "not pin a trial: check this comparison's scores")
        if s.origin != "decision event" and (before is not None or n == 1):
            named = []
            for side, trial, value in (("a", trial_a, computed.values_a[n - 1]), ("b", trial_b, computed.values_b[n - 1])):
                mean_now = getattr(s, f"mean_{side}")
                mean_before = 0.0 if n == 1 else getattr(before, f"mean_{side}")
                published = n * mean_now - (n - 1) * mean_before
                if math.isfinite(published) and abs(published - value) > 1e-6:
                    named.append(trial)
            if named:
                return named, (f"; the published means imply a different value for {_trial_words(named)} than "
                               "the recorded score")
        return explained or ([trial_a, trial_b], f"; pair {n} is trials {trial_a} and {trial_b}")

    def policy_of(self, trial_id: int) -> str:
        for event in self.events:
            if event.kind == "trial_requested" and event.trial_id == trial_id:
                return str(event.payload.get("policy_id", ""))
        return ""

    def label(self, index: int) -> str:
        return self.tests[index].label

    def step_replay(self, index: int, computed: _Computed) -> StepReplay:
        ci, mi, _, metric, _ = self.tests[index]
        seed = self.plan.step_seed(ci, mi)
        process = StepProcess(1, alpha=self.alphas[index], alternative=metric.alternative,
                              n_max=self.config.n_max, seed=seed)
        for n in range(1, computed.values_a.size + 1):
            process.update(computed.values_a[n - 1 : n], computed.values_b[n - 1 : n])
            if process.decision[0] != Decision.CONTINUE:
                gap = process.successes_b - process.successes_a
                low = np.minimum(process.successes_a, process.successes_b)
                weight = float(process.table.reject_weight(n, low, np.abs(gap))[0])
                draw = float(step_uniforms(seed, n, 1)[0])
                return StepReplay(seed, n, n, draw, weight)
        return StepReplay(seed, computed.values_a.size, None, None, None)


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


def _resolve_config(record: SessionRecord, given: SessionConfig | None) -> tuple[SessionConfig, str, list[Violation]]:
    violations: list[Violation] = []
    configs: list[ConfigRecord] = list(record.configs)
    for c in configs:
        digest = hashlib.sha256(c.config_json.encode()).hexdigest()
        if digest != c.config_hash:
            violations.append(Violation("config_missing_hash", (), f"{c.origin} config hash {c.config_hash[:12]} is "
                                        f"not the SHA-256 of its JSON ({digest[:12]})", c.position, c.stamp_ns))
    if not configs:
        if given is None:
            raise AuditError(f"{record.source}: no session configuration in the {record.kind} (evaluation_manager "
                             "publishes it latched on session_config at session start); pass --config FILE")
        return given, "--config (not in the bag)", violations
    first = configs[0]
    for c in configs[1:]:
        if c.config_hash != first.config_hash:
            changes = config_diff(json.loads(first.config_json), json.loads(c.config_json))
            violations.append(Violation("config_changed", (), f"configuration changed mid-session ({c.origin}): "
                                        f"{'; '.join(changes) or 'hash only'}", c.position, c.stamp_ns))
    try:
        config = parse_config(json.loads(first.config_json), f"{first.origin} of {record.source}")
    except (ConfigError, json.JSONDecodeError) as err:
        raise AuditError(f"{record.source}: the recorded configuration is invalid: {err}") from err
    if given is not None and given.config_hash != config.config_hash:
        changes = config_diff(config.to_dict(), given.to_dict())
        violations.append(Violation("config_mismatch", (), f"--config differs from the recorded configuration: "
                                    f"{'; '.join(changes)}"))
    return config, first.origin, violations


def verify(record: SessionRecord, *, config: SessionConfig | None = None, key: bytes | None = None,
           operator_keys: Mapping[str, bytes] | None = None) -> AuditReport:
    """Audit one session record (module docstring).

    :param record: From :func:`~evalstop_ros.audit.bag.read_bag` or
        :func:`~evalstop_ros.audit.journal.read_journal_record`.
    :param config: A configuration to use when the record has none (a bag recorded without
        ``session_config``); when it has one, the two must agree.
    :param key: The session's randomization key, for a bag without ``session_event`` (which
        otherwise carries it, revealed at the end).
    :param operator_keys: The manager's operator keys (:func:`~evalstop_ros.session.auth.read_keys`):
        every signed score journaled must verify (``auth_mac_mismatch`` otherwise).
    :returns: The :class:`AuditReport`; ``report.verified`` is the verdict.
    :raises AuditError: When there is no configuration to audit against.
    """
    resolved, origin, config_violations = _resolve_config(record, config)
    v = _Verifier(record, resolved, origin, key)
    v.operator_keys = operator_keys
    v.violations.extend(config_violations)
    v.counted_stream()
    book = v.fold()
    v.stop()
    v.after_end()
    v.protocol(book)
    if resolved.schedule == "active":  # re-run every scheduling choice from the journal (seed 004)
        from .active import check_choices
        try:
            for code, message in check_choices(resolved, v.events, v.plan):
                v.violate(code, [], message, data=False)
        except ImportError as err:
            v.notes.append(f"schedule 'active': the task choices were not re-run ({err}; install evalstop[active])")
    v.config_checks(record.statuses)
    final, checked, reproduced, last = v.check_statuses(book)
    tests = []
    for index, ((ci, mi, comparison, metric, task), computed) in enumerate(zip(v.tests, final)):
        res = computed.result
        used = res.n_observed
        if res.decision in (Decision.A_BETTER, Decision.B_BETTER, Decision.BUDGET_EXHAUSTED) and not any(
                s.decision != Decision.CONTINUE for s in record.statuses
                if v.test_index.get((s.policy_a, s.policy_b, s.metric, s.task)) == index):
            v.violate("decision_unpublished", [], f"{v.label(index)}: the recomputation gives {res.decision.name} at "
                      f"pair {res.stopping_trial or res.n_observed}, but no published state carries a decision",
                      data=False)
        tests.append(ComparisonAudit(
            index=index, policy_a=comparison.policy_a, policy_b=comparison.policy_b, metric=metric.name,
            method=metric.method, alternative=metric.alternative, alpha=v.alphas[index],
            seed=v.plan.step_seed(ci, mi), trials_a=computed.trials_a[:used], trials_b=computed.trials_b[:used],
            values_a=computed.values_a[:used], values_b=computed.values_b[:used], result=res,
            published=last.get(index), checked=checked.get(index, 0), reproduced=reproduced[index],
            step=v.step_replay(index, computed) if metric.method == "step" else None, task=task,
        ))
    final_state = v.final_state()
    if final_state == "finished":
        open_tests = [t.label for t in tests if t.result.decision == Decision.CONTINUE]
        if open_tests:
            v.violate("finished_undecided", [], f"the session was marked finished, but on recomputation "
                      f"{', '.join(open_tests)} is undecided", data=False)
    final_letters = _letters(resolved, book, tests, v.claims)
    published_letters = next((dict(s.letters) for s in sorted(record.states, key=lambda s: s.position, reverse=True)
                              if s.origin == "session_status"), None)
    if published_letters is not None and published_letters != final_letters:
        v.violate("letters_mismatch", [], f"final compact letter display published {published_letters}, recomputed "
                  f"{final_letters}", data=False)
    return AuditReport(
        record=v.record, config=resolved, config_origin=origin, trials=tuple(_trials(v, book)), tests=tuple(tests),
        letters=final_letters, violations=tuple(v.violations), notes=tuple(v.notes), final_state=final_state,
        statuses_checked=sum(checked.values()),
    )


def _letters(config: SessionConfig, book: TrialBook, tests: Sequence[ComparisonAudit],
             claims: Sequence[OfflineClaim]) -> dict[str, str]:
    """The session's compact letter display of its first metric, as ``EvaluationSession.letters``
    (``offline_letters``): policies differ when a directional decision (with a non-pooled claim: an
    established claim) separates them; means over every effective score."""
    return letters(config, book, None, None,
                   [(frozenset((t.policy_a, t.policy_b)), t.metric, t.result.decision) for t in tests],
                   [(frozenset((c.policy_a, c.policy_b)), c.metric, c.result.established, c.result.task_claims)
                    for c in claims])


def _trials(v: _Verifier, book: TrialBook) -> list[TrialAudit]:
    corrected = {e.trial_id for e in v.events if e.kind == "correction"}
    out = []
    for record in book.trials.values():
        score = record.score
        scorer, notes = v.scorers.get(record.trial_id, ("", ""))
        out.append(TrialAudit(
            trial_id=record.trial_id, round=record.round, policy=record.policy, label=record.label,
            task=record.task, initial_condition=record.initial_condition, attempts=record.failed_runs + 1,
            rerun_of=record.rerun_of, requested_ns=v.request_stamps.get(record.trial_id, 0),
            scored_ns=v.score_stamps.get(record.trial_id), success=None if score is None else score.success,
            progress=None if score is None else score.progress, scorer=scorer, notes=notes,
            corrected=record.trial_id in corrected, voided=record.voided, post_decision=record.post_decision,
        ))
    return out

