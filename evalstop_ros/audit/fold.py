"""The audit's view of what the manager counted: the event stream (the journal's, or one
synthesized from the wire) folded into a :class:`~evalstop_ros.session.trials.TrialBook`
(steps 1 and 2 of :mod:`.verify`).  :class:`VerifierState` holds what the later steps share."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..session.analysis import test_keys
from ..session.blinding import revealed_key, unseal
from ..session.config import SessionConfig
from ..session.config_sections import MetricConfig
from ..session.errors import JournalError
from ..session.goal_sealing import seal_problem, session_seal_key
from ..session.journal import Event

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..session.offline import OfflineClaim
from ..session.plan import Plan
from ..session.trials import TrialBook, TrialRecord
from ..stats.families import Comparison
from .errors import AuditError
from .model import ScoreRecord, SessionRecord
from .report import (
    Violation,
    _ranges,
)

__all__ = ["AFTER_END_KINDS", "VerifierState"]

_SCORE_KINDS = ("score_accepted", "post_decision_score", "score_duplicate", "score_rejected")
_EDIT_KINDS = ("correction", "void")
#: What a session journals after it finished or was aborted: its key, and messages it refused.
AFTER_END_KINDS = frozenset({"key_revealed", "score_rejected", "score_duplicate", "message_rejected", "request_noted",
                             "trial_cancelled", "result_after_stop"})

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

class VerifierState:
    """The record under audit, its configuration and plan, and what the steps found so far."""

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
        code = ("key_mismatch" if "does not match" in problem else "key_reveal_repeated" if "times" in problem
                else "key_unrevealed")
        if record.plan_key:
            if code != "key_unrevealed":
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
            if report and event.kind == "runner_result" and "goal_seal" in event.payload:
                self.check_seal(book, event, position)
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

    def check_seal(self, book: TrialBook, event: Event, position: int) -> None:
        """A sealed run: with the revealed key, its journaled goal seal must be the planned policy's
        (:func:`~evalstop_ros.session.goal_sealing.seal_problem`); the manager sent the runner what the plan said."""
        record, key, seal = book.trials[int(event.trial_id or 0)], self.plan.key, event.payload["goal_seal"]
        if key is None:
            return  # no key: key_unrevealed says so
        problem = seal_problem(seal if isinstance(seal, dict) else {}, session_seal_key(key, self.record.session_id),
                               self.record.session_id, record.trial_id, record.policy)
        if problem:
            self.violate("goal_seal_mismatch", [record.trial_id], problem, position, event.stamp_ns)

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
        book.add(TrialRecord(
            trial_id, int(p.get("round", 0)), str(p.get("policy_id", "")), str(p.get("label", "")),
            str(p.get("task", "")), str(p.get("initial_condition", "")), str(p.get("token", "")),
            None if p.get("rerun_of") is None else int(p["rerun_of"]),
        ))
