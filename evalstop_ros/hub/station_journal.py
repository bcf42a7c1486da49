"""A hub station's local journal: the standard journal with a station's kinds.

The file, its durability (WAL, ``synchronous=FULL``, one transaction per record), the triggers
refusing ``UPDATE``/``DELETE``, the SHA-256 hash chain, the head file, the writer lock and the
file modes are a session journal's (:class:`~evalstop_ros.session.journal_store.JournalStore`);
a station journal differs by its :data:`STATION_JOURNAL` spec only: its kinds
(:data:`STATION_KINDS`, each with the fields it must carry), its ``meta`` rows (``journal =
station``, ``station_id``, ``created_ns``) and the genesis of its chain (:func:`station_genesis`).
A session journal cannot be opened as a station journal, nor the reverse.

It is ``DIR/station.db`` (:data:`JOURNAL`); its first event, ``opened``, names the station.  A
directory holding the JSON lines journal of an earlier development version (:data:`JSON_LINES`)
is refused with a clear error, its file untouched: there is one journal format.

A record, as :meth:`StationJournal.records` and :func:`read_station_journal` return it, is the
event's payload with its ``kind``, its ``seq`` and its time ``at`` (seconds since the epoch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import time
from collections.abc import Mapping
from typing import Any

from ..session.errors import JournalError
from ..session.journal_format import ChainBreak, Event
from ..session.journal_store import FirstEvent, JournalSpec, JournalStore, read_store

__all__ = ["JOURNAL", "JSON_LINES", "STATION_JOURNAL", "STATION_KINDS", "StationJournal", "StationJournalContents",
           "check_no_json_lines", "open_station_journal", "read_station_journal", "station_genesis"]

#: The journal's file inside a station's directory.
JOURNAL = "station.db"
#: The JSON lines journal an earlier development version kept there: refused (:func:`check_no_json_lines`).
JSON_LINES = "station.jsonl"

#: A station journal's kinds and the payload fields each must carry: a session's state machine's
#: (:class:`~evalstop_ros.session.machine.TrialMachine`) and the hub's (:class:`~evalstop_ros.station.session.StationSession`).
STATION_KINDS: dict[str, tuple[str, ...]] = {
    "opened": ("station_id",),
    "rules": ("max_faults", "trials", "scoring"),
    "started": (),
    "paused": ("reason",),
    "resumed": (),
    "aborted": ("reason",),
    "finished": ("reason",),
    "leased": ("assignment_id", "task", "lease_deadline"),
    "trial_requested": ("assignment_id", "round", "policy_id", "label", "task", "initial_condition", "token"),
    "runner_result": ("ok", "duration_s", "message"),
    "score_accepted": ("submission",),
    "score_duplicate": ("submission",),
    "score_rejected": ("reason", "claimed_trial_id", "submission"),
    "void": ("reason", "had_score"),
    "result": ("assignment_id", "upload_id", "score_a", "score_b"),
    "ack": ("upload_id", "status"),
    "rejected": ("upload_id", "reason"),
    "given_up": ("assignment_id", "faults", "reason"),
}


def station_genesis(meta: Mapping[str, str]) -> str:
    """The chain's starting value of a station journal: SHA-256 of its type, station id and creation time."""
    return hashlib.sha256("\0".join(("evalstop-station-journal", meta["station_id"], meta["created_ns"])).encode()
                          ).hexdigest()


#: A station journal, to the standard journal's storage.
STATION_JOURNAL = JournalSpec(name="station", owner_row="station_id", kinds=frozenset(STATION_KINDS),
                              meta_rows=frozenset({"created_ns"}), genesis=station_genesis)


def record_of(event: Event) -> dict[str, Any]:
    """An event as a station record: its payload, ``kind``, ``seq``, ``at`` and the ``trial_id`` it names (if any)."""
    trial = {} if event.trial_id is None else {"trial_id": event.trial_id}
    return {"at": event.stamp_ns / 1e9, **event.payload, **trial, "kind": event.kind, "seq": event.seq}


def check_no_json_lines(directory: pathlib.Path) -> None:
    """Refuse a station directory that holds :data:`JSON_LINES` (:class:`~evalstop_ros.session.errors.JournalError`)."""
    if (directory / JSON_LINES).exists():
        raise JournalError(
            f"station directory {str(directory)!r} holds {JSON_LINES}, the journal of an earlier development version "
            f"of evalstop; this version keeps {JOURNAL} only: finish or audit that station's work with the version "
            "that wrote it, or start this station in another directory")


class StationJournal:
    """An open station journal (the writer; the lock is held until :meth:`close`).

    Appends from the hub thread and the node's thread go to one chain (the store serializes
    them); each is durable when :meth:`append` returns.
    """

    def __init__(self, store: JournalStore) -> None:
        self._store = store
        self.path = store.path
        self.station_id = store.meta["station_id"]

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one record of ``kind`` (one of :data:`STATION_KINDS`, with its fields): the record.

        :class:`~evalstop_ros.session.errors.JournalError` for another kind, a missing field or
        a payload that is not strict JSON."""
        return record_of(self.write(kind, None, **fields))

    def write(self, kind: str, trial_id: int | None, /, **fields: Any) -> Event:
        """Append one event of ``kind`` naming ``trial_id`` (or none): the event (errors as :meth:`append`)."""
        missing = [f for f in STATION_KINDS.get(kind, ()) if f not in fields]
        if kind in STATION_KINDS and missing:
            raise JournalError(f"a station's {kind!r} record needs {missing}; found {sorted(fields)}")
        return self._store.write(kind, trial_id, fields)

    def events(self) -> list[Event]:
        """Every event, ``opened`` first."""
        return list(self._store.events())

    def records(self) -> list[dict[str, Any]]:
        """The station's records in order (the events after ``opened``)."""
        return [record_of(e) for e in self.events()[1:]]

    def pragma(self, name: str) -> str:
        """The value of ``PRAGMA name`` on the writer connection (e.g. ``journal_mode``)."""
        return self._store.pragma(name)

    @property
    def size(self) -> int:
        """Events in the journal (grows with every append)."""
        return self._store.head[0]

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._store.closed

    def close(self) -> None:
        """Close and release the lock (idempotent)."""
        self._store.close()


def open_station_journal(directory: str | os.PathLike[str], station_id: str, *, durable: bool = True) -> StationJournal:
    """Create ``DIR/station.db`` for ``station_id``, or open it again.

    :class:`~evalstop_ros.session.errors.JournalError` as a session journal's open (another
    writer, another station's or a session's journal, a broken chain, a truncated copy ...), or
    for a directory of an earlier development version (:func:`check_no_json_lines`).
    """
    if not isinstance(station_id, str) or not station_id:
        raise JournalError(f"`station_id` must be a non-empty string; found {station_id!r}")
    folder = pathlib.Path(directory)
    check_no_json_lines(folder)

    def create() -> tuple[dict[str, str], list[FirstEvent]]:
        return ({"station_id": station_id, "created_ns": str(time.time_ns())},
                [("opened", None, {"station_id": station_id})])

    return StationJournal(JournalStore.open(folder / JOURNAL, STATION_JOURNAL, station_id, durable=durable,
                                            create=create))


@dataclasses.dataclass(frozen=True)
class StationJournalContents:
    """A station journal read without the writer lock (:func:`read_station_journal`).

    ``records`` are the station's records (``opened`` excluded; its payload is ``opened``);
    ``chain_break``, ``truncated`` and ``head_problem`` as a session journal's
    (:class:`~evalstop_ros.session.journal.JournalContents`).
    """

    path: pathlib.Path
    station_id: str
    opened: dict[str, Any]
    records: list[dict[str, Any]]
    events: tuple[Event, ...]
    chain_break: ChainBreak | None = None
    truncated: str = ""
    head_problem: str = ""


def read_station_journal(path: str | os.PathLike[str]) -> StationJournalContents:
    """Read a station journal (``DIR/station.db``, or the file itself): read-only, safe while the
    station appends.  :class:`~evalstop_ros.session.errors.JournalError` if it is missing, not a
    station journal, or unreadable, or the directory is an earlier version's (:func:`check_no_json_lines`)."""
    file = pathlib.Path(path)
    if file.is_dir():
        check_no_json_lines(file)
        file = file / JOURNAL
    contents = read_store(file, STATION_JOURNAL)
    events = contents.events
    opened = dict(events[0].payload) if events and events[0].kind == "opened" else {}
    return StationJournalContents(file, contents.meta.get("station_id", ""), opened,
                                  [record_of(e) for e in events[1:]], events, contents.chain_break,
                                  contents.truncated, contents.head_problem)
