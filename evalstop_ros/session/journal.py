"""The session journal: an append-only SQLite log of everything that happened, in order.

Layout (``sqlite3`` from the standard library)::

    meta(key TEXT PRIMARY KEY, value TEXT)        -- schema, session_id, config_json,
                                                  -- config_hash, created_ns
    events(seq INTEGER PRIMARY KEY,               -- 1, 2, 3, ... in commit order
           stamp_ns INTEGER,                      -- wall clock, ns since the epoch
           kind TEXT,                             -- one of KINDS
           trial_id INTEGER NULL,
           payload TEXT)                          -- a JSON object (strict: no NaN)

Durability: WAL mode, ``synchronous=FULL`` and one ``BEGIN IMMEDIATE ... COMMIT`` per event, so
when :meth:`Journal.append` returns the event survives a process kill (and, with
``durable=True``, a power cut); a kill during the call leaves either the whole event or none.
Triggers refuse ``UPDATE`` and ``DELETE`` on both tables.  A lock file beside the database
(``<path>.lock``, ``flock``, released by the kernel when the process dies) keeps a second writer
out.

The stored configuration is the exact validated one (its canonical JSON); opening an existing
journal with a configuration whose hash differs is refused, naming the fields that changed
(seed 003 §V-A: alpha, N_max and the method are part of the test).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import sqlite3
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from .config import SessionConfig, config_diff
from .errors import JournalError

__all__ = ["Event", "Journal", "JournalContents", "KINDS", "read_journal"]

SCHEMA_VERSION = "1"

#: Event kinds (see :mod:`evalstop_ros.session.session` for when each is written).
KINDS = frozenset({
    "config",
    "started",
    "trial_requested",
    "runner_result",
    "score_accepted",
    "score_rejected",
    "score_duplicate",
    "post_decision_score",
    "correction",
    "void",
    "decision",
    "paused",
    "resumed",
    "aborted",
    "finished",
    "active_embeddings",
    "schedule_choice",
})

_NO_CHANGE = "BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END"
_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, stamp_ns INTEGER NOT NULL, kind TEXT NOT NULL, "
    "trial_id INTEGER NULL, payload TEXT NOT NULL CHECK (json_valid(payload)))",
    *(
        f"CREATE TRIGGER {table}_no_{action} BEFORE {action.upper()} ON {table} {_NO_CHANGE}"
        for table in ("events", "meta")
        for action in ("update", "delete")
    ),
)


@dataclasses.dataclass(frozen=True)
class Event:
    """One journal row.

    Attributes
    ----------
    seq:
        1-based position in the journal.
    stamp_ns:
        Wall-clock time of the append, nanoseconds since the Unix epoch.
    kind:
        One of :data:`KINDS`.
    trial_id:
        The trial concerned, if any.
    payload:
        The decoded JSON object.
    """

    seq: int
    stamp_ns: int
    kind: str
    trial_id: int | None
    payload: dict[str, Any]


def encode_payload(payload: dict[str, Any]) -> str:
    """Canonical strict JSON of a payload (sorted keys; NaN/inf refused)."""
    try:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise JournalError(f"journal payloads must be strict JSON: {err}") from err


def _connect(path: pathlib.Path, *, read_only: bool = False) -> sqlite3.Connection:
    if read_only:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    else:
        # The session serializes its calls (a lock), so the node may call it from any thread.
        connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA busy_timeout = 5000")
    return connection


def _meta(connection: sqlite3.Connection) -> dict[str, str] | None:
    has_meta = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if has_meta is None:
        return None
    return dict(connection.execute("SELECT key, value FROM meta").fetchall())


def _iter_events(connection: sqlite3.Connection) -> Iterator[Event]:
    cursor = connection.execute("SELECT seq, stamp_ns, kind, trial_id, payload FROM events ORDER BY seq")
    for seq, stamp_ns, kind, trial_id, payload in cursor:
        yield Event(int(seq), int(stamp_ns), str(kind), None if trial_id is None else int(trial_id), json.loads(payload))


class Journal:
    """An open session journal (writer).  Use :meth:`open`; it is a context manager.

    Attributes
    ----------
    path, session_id, config_json, config_hash, created_ns:
        The journal file and its ``meta`` rows.
    """

    def __init__(self, path: pathlib.Path, connection: sqlite3.Connection, lock_fd: int, meta: dict[str, str]) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = connection
        self._lock_fd: int | None = lock_fd
        self.session_id = meta["session_id"]
        self.config_json = meta["config_json"]
        self.config_hash = meta["config_hash"]
        self.created_ns = int(meta["created_ns"])

    @classmethod
    def open(cls, path: str | os.PathLike[str], session_id: str, config: SessionConfig, *, durable: bool = True) -> Journal:
        """Create the journal of ``session_id``, or open it again to resume.

        Parameters
        ----------
        path:
            The SQLite file (its directory must exist).
        session_id:
            Non-empty id of the session; an existing journal must belong to the same session.
        config:
            The validated configuration.  A new journal stores its canonical JSON (in ``meta``
            and as the first event, kind ``config``); an existing one must hold the same.
        durable:
            ``True`` (default): ``synchronous=FULL``, every append is fsynced.  ``False``:
            ``synchronous=OFF``; appends still survive a killed process (the OS has them) but not
            a power cut.  For simulations and tests only.

        Raises
        ------
        JournalError
            If the file cannot be opened or locked, belongs to another session, or stores a
            different configuration (the message lists the changed fields).
        """
        if not isinstance(session_id, str) or not session_id:
            raise JournalError(f"`session_id` must be a non-empty string; found {session_id!r}")
        file = pathlib.Path(path)
        lock_fd = cls._lock(file)
        try:
            connection = _connect(file)
            try:
                mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise JournalError(f"journal {str(file)!r}: cannot switch to WAL mode (got {mode!r})")
                connection.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
                meta = _meta(connection)
                if meta is None:
                    meta = cls._create(connection, session_id, config)
                cls._check(file, meta, session_id, config)
            except BaseException:
                connection.close()
                raise
        except sqlite3.Error as err:
            os.close(lock_fd)
            raise JournalError(f"journal {str(file)!r}: {err}") from err
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(file, connection, lock_fd, meta)

    @staticmethod
    def _lock(file: pathlib.Path) -> int:
        lock_path = file.with_name(file.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise JournalError(f"journal {str(file)!r}: cannot create lock file: {err.strerror or err}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            raise JournalError(f"journal {str(file)!r} is in use by another process (lock {str(lock_path)!r})") from err
        return fd

    @staticmethod
    def _create(connection: sqlite3.Connection, session_id: str, config: SessionConfig) -> dict[str, str]:
        created = time.time_ns()
        meta = {
            "schema": SCHEMA_VERSION,
            "session_id": session_id,
            "config_json": config.canonical_json(),
            "config_hash": config.config_hash,
            "created_ns": str(created),
        }
        payload = encode_payload({"config": config.to_dict(), "config_hash": config.config_hash})
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:  # not executescript(), which would commit half-way
                connection.execute(statement)
            connection.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(meta.items()))
            connection.execute(
                "INSERT INTO events(stamp_ns, kind, trial_id, payload) VALUES (?, 'config', NULL, ?)", (created, payload)
            )
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return meta

    @staticmethod
    def _check(file: pathlib.Path, meta: dict[str, str], session_id: str, config: SessionConfig) -> None:
        if meta.get("schema") != SCHEMA_VERSION:
            raise JournalError(f"journal {str(file)!r} has schema {meta.get('schema')!r}; this code reads {SCHEMA_VERSION!r}")
        if meta["session_id"] != session_id:
            raise JournalError(
                f"journal {str(file)!r} belongs to session {meta['session_id']!r}, not {session_id!r}"
            )
        if meta["config_hash"] != config.config_hash:
            changes = config_diff(json.loads(meta["config_json"]), config.to_dict())
            raise JournalError(
                f"journal {str(file)!r} was started with a different configuration; a session's design "
                f"cannot change once it has started. Changed: {'; '.join(changes) or 'hash only'}"
            )

    # -- writing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise JournalError(f"journal {str(self.path)!r} is closed")
        return self._connection

    def append(self, kind: str, trial_id: int | None = None, **payload: Any) -> int:
        """Append one event in its own transaction and return its ``seq`` (see :meth:`write`)."""
        return self.write(kind, trial_id, **payload).seq

    def write(self, kind: str, trial_id: int | None = None, **payload: Any) -> Event:
        """Append one event in its own transaction and return it as a replay would read it.

        The event is durable when this returns.  ``payload`` must be JSON-serializable without
        NaN or infinities.
        """
        if kind not in KINDS:
            raise JournalError(f"`kind` should be one of {sorted(KINDS)}; found {kind!r}")
        text = encode_payload(payload)
        connection = self._conn()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                stamp_ns = time.time_ns()
                cursor = connection.execute(
                    "INSERT INTO events(stamp_ns, kind, trial_id, payload) VALUES (?, ?, ?, ?)",
                    (stamp_ns, kind, trial_id, text),
                )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise JournalError(f"journal {str(self.path)!r}: cannot append {kind!r}: {err}") from err
        seq = cursor.lastrowid
        assert seq is not None
        return Event(int(seq), stamp_ns, kind, trial_id, json.loads(text))

    # -- reading ---------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        """All events in ``seq`` order."""
        return _iter_events(self._conn())

    def pragma(self, name: str) -> str:
        """The value of ``PRAGMA name`` on the writer connection (e.g. ``journal_mode``)."""
        if not name.isidentifier():
            raise JournalError(f"`name` must be a pragma name; found {name!r}")
        return str(self._conn().execute(f"PRAGMA {name}").fetchone()[0])

    # -- life cycle --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._connection is None

    def close(self) -> None:
        """Close the connection and release the lock (idempotent)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class JournalContents:
    """A journal read in one go, without taking the writer lock (:func:`read_journal`)."""

    session_id: str
    config_json: str
    config_hash: str
    created_ns: int
    events: tuple[Event, ...]

    def config_dict(self) -> dict[str, Any]:
        """The stored configuration as a dict (validate it with :func:`~.config.parse_config`)."""
        data: dict[str, Any] = json.loads(self.config_json)
        return data


def read_journal(path: str | os.PathLike[str]) -> JournalContents:
    """Read a journal (read-only; safe while a session is writing it).

    Raises
    ------
    JournalError
        If the file is missing or not a session journal.
    """
    file = pathlib.Path(path)
    if not file.is_file():
        raise JournalError(f"journal {str(file)!r} does not exist")
    try:
        connection = _connect(file, read_only=True)
        try:
            meta = _meta(connection)
            if meta is None:
                raise JournalError(f"{str(file)!r} is not a session journal (no meta table)")
            events = tuple(_iter_events(connection))
        finally:
            connection.close()
    except sqlite3.Error as err:
        raise JournalError(f"journal {str(file)!r}: {err}") from err
    return JournalContents(meta["session_id"], meta["config_json"], meta["config_hash"], int(meta["created_ns"]), events)
