"""Step 3 of :mod:`.verify`: the protocol checks (trial ids, tokens, scores for trials never
requested, trials never scored, data after the stop, edits, authentication, the wire against the
journal)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ..session.auth import signed_score_problem
from ..session.journal import Event

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..session.trials import TrialBook
from .fold import _EDIT_KINDS, _SCORE_KINDS, AFTER_END_KINDS, VerifierState, _score_text, _submission
from .model import ScoreRecord, StatusRecord
from .report import (
    _ranges,
    _same,
)

__all__ = ["ProtocolChecks"]

class ProtocolChecks(VerifierState):
    """The protocol checks of :class:`~.verify` (each reports through :meth:`violate`)."""

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

    def submissions(self, *, as_sent: bool = False) -> list[tuple[int, int, int | None, dict[str, Any], str, str]]:
        """(position, stamp, claimed trial, submission, outcome, origin) of every score seen.

        A score held for its turn (several runners, docs/parallel.md) is journaled when it comes
        (``score_held``) and again when it counts (``score_accepted`` marked ``held``), or never if the
        session stopped first; ``as_sent``: each score as the operator sent it, a held one once, at its
        ``score_held`` (the wire and ``score_ack`` have one message for it)."""
        out = []
        if self.record.has_journal_stream:
            for event, pos in zip(self.events, self.positions):
                if event.kind in _SCORE_KINDS or event.kind == "score_held":
                    if as_sent and _released(event):
                        continue
                    claimed = event.trial_id if event.trial_id is not None else event.payload.get("claimed_trial_id")
                    claimed = claimed if isinstance(claimed, int) and not isinstance(claimed, bool) else None
                    outcome = {"score_accepted": "accepted", "post_decision_score": "accepted (post-decision)",
                               "score_duplicate": "duplicate", "score_rejected": "rejected",
                               "score_held": "held"}[event.kind]
                    if _released(event):
                        outcome += " (held for its turn)"
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
        refused_late: list[int | None] = []
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
            if stop is not None and pos > stop and outcome.startswith(("rejected", "duplicate")):
                # refused, or a copy: nothing entered (several runners: an operator scoring an arm's trial
                # as the decision came from another's, docs/parallel.md)
                refused_late.append(claimed)
            elif stop is not None and pos > stop:
                self.violate("after_stop", [claimed] if claimed else [], f"trial {claimed}: score "
                             f"{_score_text(sub.get('success'), sub.get('progress'))} arrived after the session "
                             f"stopped {where}", pos, stamp)
        if rejected:
            self.notes.append(f"{rejected} score(s) rejected by the manager (listed above if they break the protocol)")
        if refused_late:
            self.notes.append(f"{len(refused_late)} score(s) came after the stop and were refused or duplicates "
                              f"(trial(s) {', '.join(str(t) for t in refused_late)}): never used")
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
            signed = (*_SCORE_KINDS, "score_held")  # a held score carries its request's signature
            if self.operator_keys is not None and event.kind in signed and event.kind != "score_rejected":
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
        given_up = {e.trial_id: e.payload for e in self.events if e.kind == "trial_cancelled"}
        late = {e.trial_id for e in self.events if e.kind == "result_after_stop"}
        for trial_id in open_ids:
            last = trial_id == max(book.trials)
            record = book.trials[trial_id]
            if trial_id in given_up:  # several runners: open at the stop (docs/parallel.md)
                self.notes.append(f"trial {trial_id} was cancelled at the stop on {given_up[trial_id].get('runner')}"
                                  f"{'; its result came after the stop, not used' if trial_id in late else ''}")
                continue
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
        # trial_request keeps the last 256 requests (reliable, transient-local: every open trial's for a
        # late operator): a slow recorder may miss older ones.  The journal stream
        # (keep-all) is authoritative, so a request missing from the wire is a recording gap.
        on_wire = {r.trial_id for r in rec.requests}
        gaps = sorted(t for t in book.trials if t not in on_wire)
        if gaps:
            self.notes.append(f"trial_request of trial(s) {_ranges(gaps)} not recorded (the topic keeps the last "
                              "256 requests); the journal stream has them")
        # scores: every wire score must be a journaled submission, and every journaled operator score on the wire
        journaled: dict[int | None, list[tuple[int, dict[str, Any], str]]] = defaultdict(list)
        for pos, _, claimed, sub, outcome, _ in self.submissions(as_sent=True):
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
            answered_in_order: list[tuple[int, tuple[bool, bool]]] = []  # the journal's
            for event in self.events:  # a held score is answered once, when it is held (accepted)
                if (event.kind in _SCORE_KINDS or event.kind == "score_held") and event.trial_id is not None \
                        and not _released(event):
                    answered_in_order.append((event.trial_id, (event.kind != "score_rejected", event.kind == "score_duplicate")))
                elif (refused_trial := _refused_trial(event)) is not None:
                    answered_in_order.append((refused_trial, (False, False)))
            answers: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
            for ack in rec.acks:
                answers[ack.trial_id].append((ack.accepted, ack.duplicate))
            # score_ack is volatile: a recorder that matched the manager's publisher late never got
            # the answers journaled before the first one it recorded (a gap of the recording, not of
            # the session; the journal stream, latched, is replayed to it in full)
            unanswered = Counter((trial_id, answer) for trial_id, given in answers.items() for answer in given)
            outcomes: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
            before_recording: set[int] = set()
            missing: set[int] = set()
            started = False
            for trial_id, answer in answered_in_order:
                outcomes[trial_id].append(answer)
                if unanswered[(trial_id, answer)] > 0:
                    unanswered[(trial_id, answer)] -= 1
                    started = True
                elif started:
                    missing.add(trial_id)
                else:
                    before_recording.add(trial_id)
            # answers the journal lacks (rejected scores for unknown trials are journaled without a trial id)
            extra = {trial_id for (trial_id, answer), count in unanswered.items()
                     if count > 0 and trial_id != 0 and (outcomes.get(trial_id) or answer[0])}
            for trial_id in sorted(missing | extra):
                self.violate("ack_mismatch", [trial_id], f"trial {trial_id}: score_ack answers "
                             f"{sorted(answers.get(trial_id, []))} (accepted, duplicate) but the journal has "
                             f"{sorted(outcomes.get(trial_id, []))}")
            if before_recording:
                self.notes.append(f"score_ack was recorded from its first answer on: the answers to trial(s) "
                                  f"{', '.join(map(str, sorted(before_recording)))} came before it (a recording gap; "
                                  "the journal stream holds their outcomes)")
        return unmatched

    def refused_scores(self) -> Counter[tuple[int, str, object, object]]:
        """``trial_score`` messages journaled as ``message_rejected`` (trial, scorer, success, progress)."""
        out: Counter[tuple[int, str, object, object]] = Counter()
        for event in self.events:
            trial_id = _refused_trial(event)
            if trial_id is not None:
                summary = event.payload["summary"]
                fields = summary.get("fields") or {}
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


def _refused_trial(event: Event) -> int | None:
    """The trial a ``trial_score`` journaled as ``message_rejected`` names (None for any other event)."""
    if event.kind != "message_rejected" or event.payload.get("message") != "trial_score":
        return None
    summary = event.payload.get("summary") or {}
    fields = summary.get("fields") or {} if isinstance(summary, dict) else {}
    trial_id = fields.get("trial_id")
    return trial_id if isinstance(trial_id, int) and not isinstance(trial_id, bool) else None


def _released(event: Event) -> bool:
    """A held score counted in its turn (``score_accepted`` marked ``held``): no message of its own."""
    return event.kind == "score_accepted" and event.payload.get("held") is True
