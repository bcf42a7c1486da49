"""Trials, their effective scores, and how scores become pairs (in collection order, seed 003 §IV).

The pairing rules per design are in docs/session.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .config_sections import ROUND_DESIGNS
from .errors import JournalError
from .journal import Event

__all__ = ["Pair", "Pairing", "Score", "TrialBook", "TrialRecord", "form_pairs", "metric_value"]


@dataclasses.dataclass(frozen=True)
class Score:
    """A trial's effective score."""

    success: bool
    progress: float
    operator: str
    notes: str


@dataclasses.dataclass
class TrialRecord:
    """Everything known about one trial (mutable; owned by :class:`TrialBook`).

    Attributes
    ----------
    trial_id, round, policy, label, task, initial_condition, token:
        As requested (``trial_requested``).
    rerun_of:
        The voided trial this one re-runs, if any.
    failed_runs:
        Runner results with ``ok = false`` so far.
    reset_confirmed:
        The run (attempt) whose scene reset the operator confirmed (``confirm_reset``); 0 if none.
    ran_ok:
        The latest runner result said the trial ran.
    auto_score:
        The runner's own ``(success, progress)`` from that result, if it scored the run.
    held:
        A valid score's submission journaled while an earlier trial was open (``score_held``): it is
        accepted when its turn comes (scores enter in plan order, docs/parallel.md).
    submission:
        The payload of the accepted submission, used to recognise a byte-identical resubmission.
    score:
        The effective score: the submission, after corrections; ``None`` if unscored or voided.
    scored_seq:
        Journal position of the accepted submission (orders the pairs).
    post_decision:
        The score arrived after all the policy's comparisons were decided (fed to no test).
    voided:
        The trial (and its score, if any) was voided.
    """

    trial_id: int
    round: int
    policy: str
    label: str
    task: str
    initial_condition: str
    token: str
    rerun_of: int | None = None
    failed_runs: int = 0
    reset_confirmed: int = 0
    ran_ok: bool = False
    auto_score: tuple[bool, float] | None = None
    held: dict[str, object] | None = None
    submission: dict[str, object] | None = None
    score: Score | None = None
    scored_seq: int = 0
    post_decision: bool = False
    voided: bool = False

    @property
    def pair_invalid(self) -> bool:
        """``design: ab``: the trial's score says its round's pair is not valid."""
        return self.score is not None and self.submission is not None and bool(self.submission.get("pair_invalid"))

    @property
    def attempt(self) -> int:
        """The current run of the trial: 1, then +1 after each failed run."""
        return self.failed_runs + 1

    @property
    def closed(self) -> bool:
        """Scored or voided: the trial no longer waits for anything."""
        return self.voided or self.submission is not None


def _score(payload: dict[str, object]) -> Score:
    return Score(
        success=bool(payload["success"]),
        progress=float(payload["progress"]),  # type: ignore[arg-type]
        operator=str(payload.get("operator", "")),
        notes=str(payload.get("notes", "")),
    )


class TrialBook:
    """Trial records folded from journal events, in trial-id order."""

    def __init__(self) -> None:
        #: trial id -> record; ids are 1, 2, 3, ...
        self.trials: dict[int, TrialRecord] = {}
        #: Trials with an effective score, and voided trials (kept by :meth:`apply`: O(1) counts).
        self.n_scored = 0
        self.n_voided = 0
        #: (policy, task or None) -> [effective scores, successes, sum of progress], kept by :meth:`apply`.
        self._totals: dict[tuple[str, str | None], list[float]] = {}
        #: round -> the policies requested in it, kept by :meth:`add`.
        self.rounds: dict[int, set[str]] = {}

    def apply(self, event: Event) -> None:
        """Fold one event (events of other kinds are ignored)."""
        kind, p = event.kind, event.payload
        if kind == "trial_requested":
            trial_id = event.trial_id
            if trial_id != len(self.trials) + 1:
                raise JournalError(f"event {event.seq}: trial {trial_id} requested, expected trial {len(self.trials) + 1}")
            self.add(TrialRecord(
                trial_id, int(p["round"]), str(p["policy_id"]), str(p["label"]), str(p["task"]),
                str(p["initial_condition"]), str(p["token"]),
                None if p.get("rerun_of") is None else int(p["rerun_of"]),
            ))
            return
        if kind not in ("reset_confirmed", "runner_result", "score_held", "score_accepted", "post_decision_score",
                        "correction", "void"):
            return
        record = None if event.trial_id is None else self.trials.get(event.trial_id)
        if record is None:
            raise JournalError(f"event {event.seq} ({kind}) names unknown trial {event.trial_id}")
        if kind == "reset_confirmed":
            record.reset_confirmed = int(p["attempt"])
        elif kind == "runner_result":
            record.ran_ok = bool(p["ok"])
            record.failed_runs += not record.ran_ok
            auto = p.get("auto_score")
            record.auto_score = (bool(auto["success"]), float(auto["progress"])) if isinstance(auto, dict) else None
        elif kind == "score_held":
            record.held = dict(p["submission"])
        elif kind in ("score_accepted", "post_decision_score"):
            self.n_scored += record.score is None
            self._count(record, -1)
            record.submission = dict(p["submission"])
            record.score = _score(record.submission)
            self._count(record, 1)
            record.scored_seq = event.seq
            record.post_decision = kind == "post_decision_score"
        elif kind == "correction":
            if record.score is None:
                raise JournalError(f"event {event.seq}: correction of trial {event.trial_id}, which has no score")
            self._count(record, -1)
            record.score = dataclasses.replace(record.score, success=bool(p["success"]), progress=float(p["progress"]))
            self._count(record, 1)
        else:  # void
            self.n_scored -= record.score is not None
            self.n_voided += not record.voided
            self._count(record, -1)
            record.voided = True
            record.score = None

    def add(self, record: TrialRecord) -> None:
        """Enter a requested trial (its round's policies too)."""
        self.trials[record.trial_id] = record
        self.rounds.setdefault(record.round, set()).add(record.policy)

    def _count(self, record: TrialRecord, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) ``record``'s effective score in the running totals."""
        if record.score is None:
            return
        for key in ((record.policy, None), (record.policy, record.task)):
            totals = self._totals.setdefault(key, [0.0, 0.0, 0.0])
            totals[0] += sign
            totals[1] += sign * float(record.score.success)
            totals[2] += sign * record.score.progress

    def mean(self, policy: str, metric: str, task: str | None = None) -> float | None:
        """Mean effective ``metric`` score of ``policy`` (on ``task``), ``None`` without scores; O(1)."""
        count, successes, progress = self._totals.get((policy, task), (0.0, 0.0, 0.0))
        if count <= 0:
            return None
        return (successes if metric == "success" else progress) / count

    def fold(self, events: Iterable[Event]) -> TrialBook:
        """Apply every event; returns ``self``."""
        for event in events:
            self.apply(event)
        return self

    def scored(self, policy: str | None = None, task: str | None = None) -> list[TrialRecord]:
        """Trials with an effective score, in trial order (optionally of one policy, one task)."""
        return [
            r for r in self.trials.values()
            if r.score is not None and (policy is None or r.policy == policy) and (task is None or r.task == task)
        ]


@dataclasses.dataclass(frozen=True)
class Pair:
    """One paired observation of a comparison: the trials of ``policy_a`` and ``policy_b``."""

    trial_a: int
    trial_b: int


def form_pairs(book: TrialBook, design: str, policy_a: str, policy_b: str, task: str | None = None) -> list[Pair]:
    """The pairs of comparison ``(policy_a, policy_b)`` in collection order (module docstring).

    ``task``: pair only the trials of this task (``None``: of every task).
    """
    side_a, side_b = book.scored(policy_a, task), book.scored(policy_b, task)
    if design in ROUND_DESIGNS:
        by_round = {r.round: r for r in side_b}
        matched = [(a, by_round[a.round]) for a in side_a
                   if a.round in by_round and not (a.pair_invalid or by_round[a.round].pair_invalid)]
    else:
        matched = list(zip(side_a, side_b))
    matched.sort(key=lambda ab: max(ab[0].scored_seq, ab[1].scored_seq))
    return [Pair(a.trial_id, b.trial_id) for a, b in matched]


class Pairing:
    """The pairs of one comparison (:func:`form_pairs`), kept up to date score by score.

    A trial's first score usually only *appends*: its journal position is the latest, so a pair
    it completes comes last in collection order, and no earlier pair changes.  :meth:`add`
    returns those pairs in O(1); where that does not hold (a score arriving out of trial order,
    a second trial of one policy in a round) it returns ``None`` and the caller re-forms the
    whole list (:meth:`rebuild`), as after a correction or a void.
    """

    def __init__(self, design: str, policy_a: str, policy_b: str, task: str | None) -> None:
        self.design, self.policy_a, self.policy_b, self.task = design, policy_a, policy_b, task
        self._sides: dict[str, list[TrialRecord]] = {policy_a: [], policy_b: []}
        self._rounds: dict[str, dict[int, TrialRecord]] = {policy_a: {}, policy_b: {}}

    def rebuild(self, book: TrialBook) -> list[Pair]:
        """Every pair, formed from scratch (:func:`form_pairs`)."""
        for policy in (self.policy_a, self.policy_b):
            self._sides[policy] = book.scored(policy, self.task)
            self._rounds[policy] = {r.round: r for r in self._sides[policy]}
        return form_pairs(book, self.design, self.policy_a, self.policy_b, self.task)

    def add(self, record: TrialRecord) -> list[Pair] | None:
        """The pairs that ``record``'s first score appends, or ``None`` if the list must be re-formed."""
        if record.policy not in self._sides or (self.task is not None and record.task != self.task):
            return []
        side = self._sides[record.policy]
        if side and side[-1].trial_id > record.trial_id:
            return None  # out of trial order: the independent design's FIFO shifts
        other = self.policy_b if record.policy == self.policy_a else self.policy_a
        if self.design in ROUND_DESIGNS:
            rounds = self._rounds[record.policy]
            if record.round in rounds:
                return None  # a second trial of the policy in this round
            side.append(record)
            rounds[record.round] = record
            partner = self._rounds[other].get(record.round)
        else:
            side.append(record)
            k, others = len(side) - 1, self._sides[other]
            partner = others[k] if k < len(others) else None
        if partner is None or record.pair_invalid or partner.pair_invalid:
            return []
        a, b = (record, partner) if record.policy == self.policy_a else (partner, record)
        return [Pair(a.trial_id, b.trial_id)]


def metric_value(score: Score, metric: str) -> float:
    """The number a test is fed: ``1.0``/``0.0`` for success, the progress otherwise."""
    return float(score.success) if metric == "success" else score.progress
