"""The standard journal's storage: one append-only, durable, hash-chained, locked, private SQLite file.

Shared by a session's journal and a hub station's (a :class:`JournalSpec` tells them apart);
integrity, durability and privacy are in docs/session.md and docs/integrity.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from .errors import JournalError
from .journal_files import COMPANIONS, check_directory, discard, open_private, private_file
from .journal_format import (
    SCHEMA,
    SCHEMA_VERSION,
    ChainBreak,
    Event,
    chain_hash,
    check_chain,
    connect,
    encode_payload,
    iter_events,
    read_meta,
)
from .journal_head import HeadFile, head_path, read_head

__all__ = ["FirstEvent", "JournalSpec", "JournalStore", "StoreContents", "check_file", "read_store"]

#: ``meta`` row naming a journal's type; a session journal has none (its format predates the row).
TYPE_ROW = "journal"

#: An event written with the ``meta`` rows when a journal is created: ``(kind, trial_id, payload)``.
FirstEvent = tuple[str, "int | None", dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class JournalSpec:
    """What one type of journal is.

    Attributes
    ----------
    name:
        ``session`` or ``station``: messages say "a session journal", and a journal whose type
        row (``meta.journal``; none for a session journal) names another type is refused.
    owner_row:
        The ``meta`` row naming the journal's owner (``session_id``, ``station_id``); a journal
        opened for another owner is refused.
    kinds:
        The event kinds it accepts (any other is refused by :meth:`JournalStore.write`).
    meta_rows:
        The ``meta`` rows it must hold (besides ``schema``).
    genesis:
        The chain's starting value from the ``meta`` rows.
    """

    name: str
    owner_row: str
    kinds: frozenset[str]
    meta_rows: frozenset[str]
    genesis: Callable[[Mapping[str, str]], str]

    def type_of(self, meta: Mapping[str, str]) -> str:
        """The type a journal's ``meta`` rows declare (``session`` without a type row)."""
        return meta.get(TYPE_ROW, "session")

    def check_type(self, file: pathlib.Path, meta: Mapping[str, str]) -> None:
        """Refuse a journal of another type, or of this type with a schema this code does not read."""
        found = self.type_of(meta)
        if found != self.name:
            owner = {"session": "session_id", "station": "station_id"}.get(found, "")
            whose = f" ({found} {meta[owner]!r})" if owner in meta else ""
            raise JournalError(f"{str(file)!r} is a {found} journal{whose}, not a {self.name} journal")
        if meta.get("schema") != SCHEMA_VERSION:
            raise JournalError(f"journal {str(file)!r} has schema {meta.get('schema')!r}, not {SCHEMA_VERSION!r}, "
                               "the one this version of evalstop reads: it was written by another (development) "
                               "version; resume or audit it with that version")


def check_file(file: pathlib.Path, spec_name: str = "session") -> None:
    """Refuse an existing file that cannot be a journal (empty) before SQLite would overwrite it."""
    try:
        size = file.stat().st_size
    except OSError as err:
        raise JournalError(f"journal {str(file)!r}: cannot read it: {err.strerror or err}") from err
    if size == 0:
        raise JournalError(
            f"journal {str(file)!r} is empty (0 bytes): it holds no {spec_name} to resume. Restore it from a "
            f"backup, or remove it (and its .head/-wal files) to start the {spec_name} afresh under this id")


class JournalStore:
    """An open journal (the writer).  Use :meth:`open`; it is a context manager.

    Attributes
    ----------
    path, spec, meta:
        The file, its type and its ``meta`` rows.
    """

    def __init__(self, path: pathlib.Path, spec: JournalSpec, connection: sqlite3.Connection, lock_fd: int,
                 meta: dict[str, str], head: tuple[int, str], head_file: HeadFile) -> None:
        self.path, self.spec, self.meta = path, spec, meta
        self._connection: sqlite3.Connection | None = connection
        self._lock_fd: int | None = lock_fd
        self._head, self._head_file = head, head_file
        self._mutex = threading.Lock()  # appends (and reads) from several threads of the process

    @classmethod
    def open(cls, path: str | os.PathLike[str], spec: JournalSpec, owner: str, *, durable: bool = True,
             create: Callable[[], tuple[dict[str, str], Sequence[FirstEvent]]],
             check: Callable[[pathlib.Path, dict[str, str]], None] | None = None) -> JournalStore:
        """Create the journal of ``owner``, or open it again.

        ``create()`` gives a new journal's ``meta`` rows (``schema`` is added) and the events
        written with them in one transaction (at least one); ``check(file, meta)`` may refuse an
        existing journal whose rows are this type's and this owner's (e.g. another configuration).
        ``durable``: ``synchronous=FULL`` (every append fsynced) or ``OFF`` (survives a killed
        process, not a power cut).

        Raises
        ------
        JournalError
            If the file cannot be opened or locked, is of another type or owner, is empty, is not
            a journal, misses events its head file records, or fails the hash chain.
        """
        file = pathlib.Path(path)
        check_directory(file.parent)
        lock_fd = cls._lock(file)
        existed = True
        try:
            existed = file.exists()
            if existed:
                check_file(file, spec.name)
            else:  # created 0600 first: SQLite gives its -wal and -shm files the database's mode
                try:
                    os.close(open_private(file, os.O_RDWR | os.O_CREAT | os.O_EXCL))
                except OSError as err:
                    raise JournalError(f"journal {str(file)!r}: cannot create it: {err.strerror or err}") from err
            for companion in ("", *COMPANIONS):
                private_file(file.with_name(file.name + companion))
            connection = connect(file)
            try:
                meta = read_meta(connection)   # checked before WAL mode: a journal refused is left as it was
                if meta is None and existed:
                    raise JournalError(
                        f"{str(file)!r} is not a {spec.name} journal (it has no {spec.name} tables): if it is a copy "
                        f"of a journal, its '-wal' file ({file.name}-wal) was left behind; copy the .db, -wal and "
                        f".head files together (or copy after the {spec.name} ended)")
                if meta is not None:
                    cls._check_meta(file, spec, meta, owner)
                    if check is not None:
                        check(file, meta)
                    head = cls._check_integrity(file, spec, connection, meta)
                mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise JournalError(f"journal {str(file)!r}: cannot switch to WAL mode (got {mode!r})")
                connection.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
                if meta is None:
                    meta, head = cls._create(connection, spec, *create())
                    head_file = HeadFile(file, new=True)
                    head_file.write(*head)
                else:
                    head_file = HeadFile(file, new=False)
            except BaseException:
                connection.close()
                raise
        except sqlite3.Error as err:
            cls._abandon(file, lock_fd, existed)
            raise JournalError(f"journal {str(file)!r} cannot be read as a journal ({err}); it is damaged or not "
                               f"a journal: restore it from a backup, or start a new {spec.name} id") from err
        except BaseException:
            cls._abandon(file, lock_fd, existed)
            raise
        return cls(file, spec, connection, lock_fd, meta, head, head_file)

    @staticmethod
    def _abandon(file: pathlib.Path, lock_fd: int, existed: bool) -> None:
        """A failed open: remove what it created (a journal that was never written), release the lock."""
        if not existed:
            discard(file)
        os.close(lock_fd)

    @staticmethod
    def _lock(file: pathlib.Path) -> int:
        lock_path = file.with_name(file.name + ".lock")
        try:
            fd = open_private(lock_path, os.O_RDWR | os.O_CREAT)
        except OSError as err:
            raise JournalError(f"journal {str(file)!r}: cannot create lock file: {err.strerror or err}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            raise JournalError(f"journal {str(file)!r} is in use by another process (lock {str(lock_path)!r})") from err
        return fd

    @staticmethod
    def _create(connection: sqlite3.Connection, spec: JournalSpec, meta: dict[str, str],
                first: Sequence[FirstEvent]) -> tuple[dict[str, str], tuple[int, str]]:
        """Write the tables, the ``meta`` rows and the first events in one transaction: the head."""
        meta = {"schema": SCHEMA_VERSION, **meta}
        if spec.name != "session":
            meta[TYPE_ROW] = spec.name
        if not first:
            raise JournalError(f"a new {spec.name} journal needs a first event")
        created = int(meta["created_ns"])
        digest, rows = spec.genesis(meta), []
        for seq, (kind, trial_id, payload) in enumerate(first, start=1):
            if kind not in spec.kinds:
                raise JournalError(f"`kind` should be one of {sorted(spec.kinds)}; found {kind!r}")
            text = encode_payload(payload)
            digest = chain_hash(digest, seq, created, kind, trial_id, text)
            rows.append((seq, created, kind, trial_id, text, digest))
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:  # not executescript(), which would commit half-way
                connection.execute(statement)
            connection.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(meta.items()))
            connection.executemany("INSERT INTO events(seq, stamp_ns, kind, trial_id, payload, hash) "
                                   "VALUES (?, ?, ?, ?, ?, ?)", rows)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return meta, (len(rows), digest)

    @staticmethod
    def _check_meta(file: pathlib.Path, spec: JournalSpec, meta: dict[str, str], owner: str) -> None:
        spec.check_type(file, meta)
        missing = ({spec.owner_row} | spec.meta_rows) - set(meta)
        if missing:
            raise JournalError(f"journal {str(file)!r} lacks meta rows {sorted(missing)}: it is damaged")
        if meta[spec.owner_row] != owner:
            raise JournalError(f"journal {str(file)!r} belongs to {spec.name} {meta[spec.owner_row]!r}, not {owner!r}")

    @staticmethod
    def _check_integrity(file: pathlib.Path, spec: JournalSpec, connection: sqlite3.Connection,
                         meta: dict[str, str]) -> tuple[int, str]:
        """The chain is intact and reaches the recorded head: return the head ``(seq, hash)``."""
        last, digest, broken = check_chain(connection, meta, spec.genesis)
        if broken is not None:
            raise JournalError(f"journal {str(file)!r} refused: {broken.describe()}. Resuming would build on "
                               "altered data; audit it with `evalstop audit`")
        head = read_head(file)
        if head is None:
            raise JournalError(
                f"journal {str(file)!r} refused: its head file {head_path(file).name!r} is missing, so a "
                f"truncated copy cannot be told from the original; copy the .db, -wal and .head files together")
        seq, head_hash = head
        if seq > last:
            raise JournalError(
                f"journal {str(file)!r} is truncated: its head file records {seq} events but the database holds "
                f"{last}. The '-wal' file ({file.name}-wal) is missing or the copy is incomplete; copy the "
                ".db, -wal and .head files together")
        stored = connection.execute("SELECT hash FROM events WHERE seq = ?", (seq,)).fetchone()
        if stored is None or str(stored[0]) != head_hash:
            raise JournalError(f"journal {str(file)!r} refused: event {seq} is not the one its head file records "
                               "(the journal was replaced or rewritten)")
        return last, digest

    # -- writing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise JournalError(f"journal {str(self.path)!r} is closed")
        return self._connection

    @property
    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last event."""
        return self._head

    def write(self, kind: str, trial_id: int | None = None, payload: Mapping[str, Any] | None = None) -> Event:
        """Append one event in its own transaction and return it as a reader would read it.

        The event is durable when this returns, chained to the previous one, and the head
        file records it.  ``payload`` must be JSON-serializable without NaN or infinities.
        """
        if kind not in self.spec.kinds:
            raise JournalError(f"`kind` should be one of {sorted(self.spec.kinds)}; found {kind!r}")
        text = encode_payload(dict(payload or {}))
        with self._mutex:
            connection = self._conn()
            seq = self._head[0] + 1
            stamp_ns = time.time_ns()
            digest = chain_hash(self._head[1], seq, stamp_ns, kind, trial_id, text)
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    connection.execute("INSERT INTO events(seq, stamp_ns, kind, trial_id, payload, hash) "
                                       "VALUES (?, ?, ?, ?, ?, ?)", (seq, stamp_ns, kind, trial_id, text, digest))
                    connection.execute("COMMIT")
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
            except sqlite3.Error as err:
                raise JournalError(f"journal {str(self.path)!r}: cannot append {kind!r}: {err}") from err
            self._head = (seq, digest)
            self._head_file.write(seq, digest)
        return Event(seq, stamp_ns, kind, trial_id, json.loads(text), digest)

    # -- reading ---------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        """All events in ``seq`` order (read at the call)."""
        with self._mutex:
            return iter(list(iter_events(self._conn(), self.path)))

    def pragma(self, name: str) -> str:
        """The value of ``PRAGMA name`` on the writer connection (e.g. ``journal_mode``)."""
        if not name.isidentifier():
            raise JournalError(f"`name` must be a pragma name; found {name!r}")
        with self._mutex:
            return str(self._conn().execute(f"PRAGMA {name}").fetchone()[0])

    # -- life cycle --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._connection is None

    def close(self) -> None:
        """Close the connection and release the lock (idempotent). A journal no one else has open is left
        in rollback mode, its WAL checkpointed into it: reading it later (read-only: an audit, a report)
        then leaves no -wal and -shm files beside it. Opened to write again, it is WAL again."""
        with self._mutex:
            if self._connection is not None:
                with contextlib.suppress(sqlite3.OperationalError):   # a reader has it open: WAL it stays
                    self._connection.execute("PRAGMA busy_timeout = 0")
                    self._connection.execute("PRAGMA journal_mode = DELETE")
                self._connection.close()
                self._connection = None
            self._head_file.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def discard(self) -> None:
        """Close and delete the journal if it holds no more than its first event (nothing happened)."""
        events = self._head[0]
        self.close()
        if events <= 1:
            discard(self.path)

    def __enter__(self) -> JournalStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class StoreContents:
    """A journal read in one go, without the writer lock (:func:`read_store`).

    ``chain_break`` is the first event that fails the hash chain, ``truncated`` a message when
    the head file records more events than the database holds, and ``head_problem`` one when the
    head file is missing or unreadable, records fewer events than the database holds (more than
    the one a crash between a commit and the head write leaves), or a hash that is not its
    event's (events were removed or rewritten and re-chained).
    """

    meta: dict[str, str]
    events: tuple[Event, ...]
    chain_break: ChainBreak | None = None
    truncated: str = ""
    head_problem: str = ""


def read_store(path: str | os.PathLike[str], spec: JournalSpec) -> StoreContents:
    """Read a journal of type ``spec`` (read-only; safe while its writer appends).

    The hash chain and the head file are checked and their problems reported (not raised).

    Raises
    ------
    JournalError
        If the file is missing, empty, not a journal of this type, or unreadable.
    """
    file = pathlib.Path(path)
    if not file.is_file():
        raise JournalError(f"journal {str(file)!r} does not exist")
    check_file(file, spec.name)
    try:
        connection = connect(file, read_only=True)
        try:
            meta = read_meta(connection)
            if meta is None:
                raise JournalError(f"{str(file)!r} is not a {spec.name} journal (no meta table; a copy without its "
                                   "-wal file?)")
            spec.check_type(file, meta)
            events = tuple(iter_events(connection, file))
            _, _, broken = check_chain(connection, meta, spec.genesis)
        finally:
            connection.close()
    except sqlite3.Error as err:
        raise JournalError(f"journal {str(file)!r} cannot be read as a journal: {err}") from err
    except KeyError as err:
        raise JournalError(f"journal {str(file)!r} lacks meta row {err}: it is damaged") from err
    truncated, head_problem = "", ""
    try:
        head = read_head(file)
    except JournalError as err:
        head, head_problem = None, str(err)
    if head is None and not head_problem:
        head_problem = (f"its head file {head_path(file).name!r} is missing: events at the end may have been removed "
                        "without a trace (copy the .db, -wal and .head files together)")
    stored = {e.seq: e.hash for e in events}
    last = max(stored, default=0)  # the last event stored (an edited one before it is the chain break's)
    if head is not None and head[0] > last:
        truncated = (f"the head file records {head[0]} events but the database holds {last} (a copy without its "
                     "-wal file, or a truncated journal)")
    elif head is not None and last > head[0] + 1:
        head_problem = (f"the database holds {last} events but its head file records {head[0]}: events "
                        f"{head[0] + 1}-{last} were added by something other than the {spec.name}")
    elif head is not None and stored.get(head[0]) != head[1]:
        head_problem = (f"event {head[0]} is not the one the head file records: the journal was rewritten (events "
                        "removed or replaced, and the chain recomputed)")
    return StoreContents(meta, events, broken, truncated, head_problem)
