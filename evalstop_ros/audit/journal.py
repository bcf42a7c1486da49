"""Reading a session journal (the manager's SQLite event log) into a :class:`SessionRecord`.

The same helpers turn journal events into published states and decisions for a bag's
``session_event`` stream (:mod:`.bag`), so both sources are read alike.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from collections import Counter
from collections.abc import Sequence

from ..session.errors import JournalError
from ..session.journal import Event, read_journal
from ..stats.sequential import Decision
from .errors import AuditError
from .model import ConfigRecord, SessionRecord, StateRecord, StatusRecord

__all__ = ["event_states", "event_statuses", "read_journal_record"]

#: Journal kinds that change the session state, and the state they lead to.
STATE_KINDS = {"started": "running", "paused": "paused", "resumed": "running", "finished": "finished",
               "aborted": "aborted"}


def _float(value: object) -> float:
    return float("nan") if value is None else float(value)  # type: ignore[arg-type]


def event_statuses(events: Sequence[Event], positions: Sequence[int], *,
                   origin: str = "decision event") -> list[StatusRecord]:
    """The ``decision`` events as published states (``index``: the event's position).

    A decision event carries the decision, pair count, stopping trial, p-value and e-value;
    it has no level or means (``None``/NaN), which the verifier then does not compare.
    """
    out = []
    for event, position in zip(events, positions):
        if event.kind != "decision":
            continue
        p = event.payload
        stop = p.get("stopping_trial")
        out.append(StatusRecord(
            position=position, stamp_ns=event.stamp_ns, origin=origin, policy_a=str(p.get("policy_a", "")),
            policy_b=str(p.get("policy_b", "")), metric=str(p.get("metric", "")), method=str(p.get("method", "")),
            alternative="", alpha=None, n=int(p.get("n", 0)), decision=_decision(p.get("decision")),
            pvalue=_float(p.get("pvalue")), evalue=_float(p.get("evalue")), mean_a=math.nan, mean_b=math.nan,
            stopping_trial=None if stop is None else int(stop), task=str(p.get("task", "") or ""),
        ))
    return out


def event_states(events: Sequence[Event], positions: Sequence[int], *, origin: str = "journal") -> list[StateRecord]:
    """The state changes of the journal (started, paused, resumed, finished, aborted)."""
    return [StateRecord(pos, e.stamp_ns, origin, STATE_KINDS[e.kind], -1)
            for e, pos in zip(events, positions) if e.kind in STATE_KINDS]


def _decision(name: object) -> int:
    """A journaled decision name as its code (-1 for a name that is not a decision)."""
    return Decision[name].value if isinstance(name, str) and name in Decision.__members__ else -1


def read_journal_record(path: str | os.PathLike[str]) -> SessionRecord:
    """Read a session journal (read-only; safe while the session is still writing it).

    :param path: The SQLite journal, e.g. ``~/.ros/evalstop/<session_id>.db``.
    :returns: The :class:`SessionRecord`, without a wire view.
    :raises AuditError: If the file is missing or is not a session journal.
    """
    try:
        contents = read_journal(path)
    except JournalError as err:
        raise AuditError(str(err)) from err
    events = contents.events
    configs = [ConfigRecord(0, contents.created_ns, contents.session_id, contents.config_json, contents.config_hash,
                            "journal")]
    for event in events:
        if event.kind == "config":
            configs.append(ConfigRecord(event.seq, event.stamp_ns, contents.session_id,
                                        _canonical(event.payload.get("config")), str(event.payload.get("config_hash")),
                                        "journal"))
    stamps = [e.stamp_ns for e in events] or [contents.created_ns]
    return SessionRecord(
        source=str(pathlib.Path(path)), kind="journal", storage="journal", session_id=contents.session_id,
        configs=tuple(configs), events=events, event_positions=tuple(e.seq for e in events),
        statuses=tuple(event_statuses(events, [e.seq for e in events])),
        states=tuple(event_states(events, [e.seq for e in events])), topic_counts=tuple(sorted(Counter(e.kind for e in events).items())),
        start_ns=min(stamps), end_ns=max(stamps), plan_key=contents.plan_key,
        chain_break=None if (b := contents.chain_break) is None else (b.seq, b.kind, b.trial_id),
        truncated=contents.truncated, head_problem=contents.head_problem,
    )


def _canonical(config: object) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
