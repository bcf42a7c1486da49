"""A hub station's local journal: the standard journal with a station's kinds.

The file, its durability (WAL, ``synchronous=FULL``, one transaction per record), the triggers
refusing ``UPDATE``/``DELETE``, the SHA-256 hash chain, the head file, the writer lock and the
file modes are a session journal's (:class:`~evalstop_ros.session.journal_store.JournalStore`);
a station journal differs by its :data:`STATION_JOURNAL` spec only: its kinds
(:data:`STATION_KINDS`, each with the fields it must carry), its ``meta`` rows (``journal =
station``, ``station_id``, ``created_ns``) and the genesis of its chain (:func:`station_genesis`).
A session journal cannot be opened as a station journal, nor the reverse.

It is ``DIR/station.db`` (:data:`JOURNAL`).  Its first event, ``opened``, names the station and,
for a journal migrated from the JSON lines a station wrote before (``station.jsonl``,
:data:`LEGACY`), the old file's record count, unchained leading records and last hash
(:func:`~.chain.check_records`): :func:`open_station_journal` migrates such a directory on its
first open -- every old record becomes an event of its kind, its fields (``at`` included) as the
payload, written with ``opened`` in one transaction -- and renames the old file
``station.jsonl.migrated`` (:data:`MIGRATED`), so nothing is lost and the audit can tie the two
(:func:`migration_problem`).  An old journal that fails its own hash chain is not migrated (it
would launder the edit): the station refuses to start and says so.

A record, as :meth:`StationJournal.records` and :func:`read_station_journal` return it, is the
event's payload with its ``kind``, its ``seq`` and its time ``at`` (seconds since the epoch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..session.errors import JournalError
from ..session.journal_format import ChainBreak, Event
from ..session.journal_store import FirstEvent, JournalSpec, JournalStore, read_store
from .chain import GENESIS, check_records, record_link
from .errors import HubError

__all__ = ["JOURNAL", "LEGACY", "MIGRATED", "STATION_JOURNAL", "STATION_KINDS", "StationJournal",
           "StationJournalContents", "migration_problem", "open_station_journal", "read_legacy",
           "read_station_journal", "station_genesis"]

#: The journal's file inside a station's directory, and the JSON lines file of an older station.
JOURNAL = "station.db"
LEGACY = "station.jsonl"
#: The JSON lines file once migrated into :data:`JOURNAL` (kept: nothing is deleted).
MIGRATED = LEGACY + ".migrated"

#: A station journal's kinds and the payload fields each must carry (see :class:`~.work.StationWork`).
STATION_KINDS: dict[str, tuple[str, ...]] = {
    "opened": ("station_id",),
    "rules": ("max_faults", "trials", "scoring"),
    "control": ("command", "reason"),
    "leased": ("assignment_id", "task", "lease_deadline"),
    "result": ("assignment_id", "upload_id", "score_a", "score_b"),
    "ack": ("upload_id", "status"),
    "rejected": ("upload_id", "reason"),
    "fault": ("assignment_id", "arm", "attempt", "message"),
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
    """An event as a station record: its payload, ``kind``, ``seq`` and ``at`` (a migrated record keeps its own)."""
    return {"at": event.stamp_ns / 1e9, **event.payload, "kind": event.kind, "seq": event.seq}


def read_legacy(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """An older station's JSON lines journal, in order; a torn last line (a station killed
    mid-write, never acknowledged) is ignored.  :class:`OSError` if it cannot be read."""
    out = []
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def _legacy_summary(records: Sequence[Mapping[str, Any]], path: pathlib.Path) -> dict[str, Any]:
    """What ``opened`` records of a migrated JSON lines journal (refused if its chain is broken)."""
    unchained, broken = check_records(records)
    if broken is not None:
        raise HubError(f"station journal {str(path)!r} fails its hash chain ({broken}); it is not migrated into "
                       f"{JOURNAL}: audit it with `evalstop audit EXPORT --station {str(path.parent)!r}`")
    hashed = [str(r["hash"]) for r in records[unchained:]]
    return {"file": path.name, "records": len(records), "unchained": unchained,
            "last_hash": hashed[-1] if hashed else ""}


def _migrated_records(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The migrated records (the events after ``opened`` that it counts) as the old file held them, without ``hash``."""
    count = int(events[0].payload["migrated"]["records"]) if events else 0
    return [{"kind": e.kind, **e.payload} for e in events[1:1 + count]]


def _legacy_last_hash(records: Sequence[Mapping[str, Any]], unchained: int) -> str:
    """The last link of the old chain over ``records`` (their ``hash`` recomputed), ``""`` without one."""
    previous = ""
    for record in records[unchained:]:
        previous = record_link(previous or GENESIS, record)
    return previous


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
        missing = [f for f in STATION_KINDS.get(kind, ()) if f not in fields]
        if kind in STATION_KINDS and missing:
            raise JournalError(f"a station's {kind!r} record needs {missing}; found {sorted(fields)}")
        return record_of(self._store.write(kind, None, fields))

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
    """Create ``DIR/station.db`` for ``station_id`` (migrating an older ``station.jsonl``), or open it again.

    :class:`~evalstop_ros.session.errors.JournalError` as a session journal's open (another
    writer, another station's or a session's journal, a broken chain, a truncated copy ...), or
    when an old JSON lines journal cannot be migrated.
    """
    if not isinstance(station_id, str) or not station_id:
        raise JournalError(f"`station_id` must be a non-empty string; found {station_id!r}")
    folder = pathlib.Path(directory)
    legacy = folder / LEGACY

    def create() -> tuple[dict[str, str], list[FirstEvent]]:
        meta = {"station_id": station_id, "created_ns": str(time.time_ns())}
        if not legacy.exists():
            return meta, [("opened", None, {"station_id": station_id})]
        old = _read_old(legacy)
        first: list[FirstEvent] = [("opened", None, {"station_id": station_id, "migrated": _legacy_summary(old, legacy)})]
        first += [(str(r.get("kind")), None, {k: v for k, v in r.items() if k not in ("kind", "hash")}) for r in old]
        return meta, first

    try:
        store = JournalStore.open(folder / JOURNAL, STATION_JOURNAL, station_id, durable=durable, create=create)
    except HubError as err:
        raise JournalError(str(err)) from err
    journal = StationJournal(store)
    if legacy.exists():
        try:
            _retire_legacy(journal, legacy)
        except BaseException:
            journal.close()
            raise
    return journal


def _read_old(legacy: pathlib.Path) -> list[dict[str, Any]]:
    try:
        return read_legacy(legacy)
    except OSError as err:
        raise JournalError(f"cannot read the old station journal {str(legacy)!r}: {err.strerror or err}") from err


def _retire_legacy(journal: StationJournal, legacy: pathlib.Path) -> None:
    """Rename the migrated ``station.jsonl`` once the journal holds it (also after a crash between
    the migration and the rename); refuse a JSON lines file the journal did not migrate."""
    opened = journal.events()[0].payload
    migrated = opened.get("migrated") or {}
    old = _read_old(legacy)
    if migrated.get("records") != len(old) or migrated.get("last_hash") != _legacy_summary(old, legacy)["last_hash"]:
        raise JournalError(
            f"station directory {str(legacy.parent)!r} holds both {JOURNAL} and an old {LEGACY} that {JOURNAL} did "
            f"not migrate ({len(old)} records): move one of them away (the station reads {JOURNAL})")
    try:
        os.replace(legacy, legacy.with_name(MIGRATED))
        fd = os.open(legacy.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        raise JournalError(f"cannot rename the migrated {str(legacy)!r}: {err.strerror or err}") from err


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
    station journal, or unreadable."""
    file = pathlib.Path(path)
    file = file / JOURNAL if file.is_dir() else file
    contents = read_store(file, STATION_JOURNAL)
    events = contents.events
    opened = dict(events[0].payload) if events and events[0].kind == "opened" else {}
    return StationJournalContents(file, contents.meta.get("station_id", ""), opened,
                                  [record_of(e) for e in events[1:]], events, contents.chain_break,
                                  contents.truncated, contents.head_problem)


def migration_problem(contents: StationJournalContents) -> str:
    """``""`` when a migrated journal's records re-link to the last hash its ``opened`` event
    recorded for the old file (and, where the renamed old file is still beside it, that file
    holds the same records); else what differs.  A journal that was not migrated: ``""``."""
    migrated = contents.opened.get("migrated")
    if not migrated:
        return ""
    records = _migrated_records(contents.events)
    if len(records) != migrated.get("records"):
        return f"its opened event records {migrated.get('records')} migrated records; it holds {len(records)}"
    if _legacy_last_hash(records, int(migrated.get("unchained", 0))) != migrated.get("last_hash"):
        return "its migrated records do not re-link to the last hash of the old station.jsonl its opened event records"
    old_file = contents.path.with_name(MIGRATED)
    if old_file.exists():
        try:
            old = [{k: v for k, v in r.items() if k != "hash"} for r in read_legacy(old_file)]
        except OSError as err:
            return f"cannot read {old_file.name}: {err.strerror or err}"
        if old != records:
            return f"its migrated records differ from {old_file.name} beside it"
    return ""
