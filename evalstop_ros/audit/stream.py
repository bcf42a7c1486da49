"""A journal against the ``session_event`` stream a bag recorded of it, event by event (``stream_mismatch``; docs/audit.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from ..session.blinding import seal
from ..session.journal import Event
from ..session.public_view import PublicView
from .model import SessionRecord
from .report import Violation

__all__ = ["compare_streams"]

#: Kinds that end a session.
END_KINDS = ("finished", "aborted")


Published = Callable[[Event], tuple[str, int | None, dict[str, object]]]


def published_form(journal: SessionRecord) -> Published:
    """What must agree: kind, trial and the payload as published (header stamps are not compared:
    a recorder may re-stamp, and a stamp carries no result), through the journal's public view
    for the events before its ``key_revealed``."""
    reveal = next((e.seq for e in journal.events if e.kind == "key_revealed"), math.inf)
    try:
        policies = json.loads(journal.configs[0].config_json)["policies"] if journal.configs else []
    except (ValueError, KeyError, TypeError):
        policies = []
    key = bytes.fromhex(journal.plan_key) if journal.plan_key else None
    view = PublicView([str(p) for p in policies], key, journal.session_id) if policies else None

    def published(event: Event) -> tuple[str, int | None, dict[str, object]]:
        payload = seal(event.kind, event.payload)
        if view is not None and event.seq < reveal:
            payload = view.event_payload(event.kind, payload)
        return event.kind, event.trial_id, payload
    return published


def _describe(event: Event) -> str:
    return f"{event.seq} ({event.kind}{'' if event.trial_id is None else f', trial {event.trial_id}'})"


def compare_streams(journal: SessionRecord, recording: SessionRecord) -> tuple[list[Violation], list[str]]:
    """``(violations, notes)`` of ``journal`` (a journal file) against ``recording`` (a bag).

    :param journal: From :func:`~evalstop_ros.audit.journal.read_journal_record`.
    :param recording: From :func:`~evalstop_ros.audit.bag.read_bag`, of the same session.
    """
    violations: list[Violation] = []
    notes: list[str] = []
    if journal.session_id != recording.session_id:
        violations.append(Violation("stream_mismatch", (), f"the journal is session {journal.session_id!r}, the "
                                    f"recording session {recording.session_id!r}"))
        return violations, notes
    if not recording.events:
        notes.append("the recording has no session_event stream: the journal was not compared event by event")
        return violations, notes
    journaled = {e.seq: e for e in journal.events}
    _published = published_form(journal)
    for event, position in zip(recording.events, recording.event_positions):
        mine = journaled.get(event.seq)
        if mine is None:
            violations.append(Violation(
                "stream_mismatch", () if event.trial_id is None else (event.trial_id,),
                f"event {_describe(event)} was published but is missing from the journal (removed)", position,
                event.stamp_ns))
        elif _published(mine) != _published(event):
            violations.append(Violation(
                "stream_mismatch", () if event.trial_id is None else (event.trial_id,),
                f"event {event.seq}: the journal holds {_describe(mine)} {_published(mine)[2]}, the "
                f"recording {_describe(event)} {event.payload} (edited after it was published)", position,
                event.stamp_ns))
    last = max(e.seq for e in recording.events)
    ended = any(e.kind in END_KINDS for e in recording.events)
    later = [e for e in journal.events if e.seq > last]
    late_results = [e for e in later if e.kind == "result_after_stop"]
    if ended and later and len(late_results) == len(later):
        # several runners (docs/parallel.md): a run cancelled at the stop reports when its arm has stopped,
        # which may be after the recorder's linger; such a result is journaled and never used
        notes.append(f"journal event(s) {later[0].seq}-{later[-1].seq} came after the recording stopped: "
                     f"result(s) of trial(s) {', '.join(str(e.trial_id) for e in late_results)} that came after "
                     "the stop (never used), not compared")
        later = []
    if later and ended:
        violations.append(Violation(
            "stream_mismatch", tuple(sorted({e.trial_id for e in later if e.trial_id is not None})),
            f"{len(later)} journal event(s) after the last one published ({last}), though the recording reaches the "
            f"session's end: {', '.join(_describe(e) for e in later[:5])}{' ...' if len(later) > 5 else ''} were "
            "never published (added afterwards)", later[0].seq, later[0].stamp_ns))
    elif later:
        notes.append(f"the recording stops at event {last}: journal events {later[0].seq}-{later[-1].seq} could not "
                     "be compared")
    published = {e.seq for e in recording.events}
    unrecorded = [seq for seq in journaled if seq <= last and seq not in published]
    if unrecorded:
        notes.append(f"{len(unrecorded)} journal event(s) within the recording's range were not recorded (the "
                     "recorder started late or lost messages)")
    compared = sum(1 for e in recording.events if e.seq in journaled)
    notes.append(f"journal compared with the recorded session_event stream: {compared} event(s)")
    return violations, notes
