"""The session journal: an append-only SQLite log of everything that happened, in order.

Format (tables, kinds, the hash chain): :mod:`.journal_format`; file modes: :mod:`.journal_files`.

Integrity: every event stores ``hash = SHA-256(previous hash, seq, stamp, kind, trial, payload)``
(:func:`~.journal_format.chain_hash`), the first one chained to a genesis hash of the ``meta`` rows, so an event
edited after the fact (by someone who dropped the triggers) breaks the chain at that event.
After each append the head ``(seq, hash)`` is written to ``<path>.head`` (:mod:`.journal_head`):
reopening checks the whole chain and that the database reaches the head, so a copy without its
``-wal`` file, a truncated file or an emptied one is refused instead of silently starting over.
The chain is checked by :meth:`Journal.open` (resume refuses a broken journal) and reported by
:func:`read_journal` (:attr:`JournalContents.chain_break`, which the audit names).

Blinding: a new journal draws the session's randomization key from the OS
(:func:`secrets.token_bytes`) and keeps it in ``meta`` (never published); the first event
carries only its commitment (:func:`~.plan.commit_key`); the session reveals the key at its end
(``key_revealed``).

Durability: WAL mode, ``synchronous=FULL`` and one ``BEGIN IMMEDIATE ... COMMIT`` per event, so
when :meth:`Journal.append` returns the event survives a process kill (and, with
``durable=True``, a power cut); a kill during the call leaves either the whole event or none.
Triggers refuse ``UPDATE`` and ``DELETE`` on both tables.  A lock file beside the database
(``<path>.lock``, ``flock``, released by the kernel when the process dies) keeps a second writer
out.

Privacy: the journal holds the randomization key, so only its owner may read it.  Every file of
a journal (the database, its ``-wal`` and ``-shm`` files, which SQLite creates with the
database's mode, ``.head`` and ``.lock``) is created or tightened to mode 0600 whatever the
umask, and a journal in a directory other users can write (they could replace or remove its
files) is refused (:func:`~.journal_files.check_directory`); :func:`~.journal_files.journal_directory` creates a directory
0700.

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
import secrets
import sqlite3
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from .config import SessionConfig
from .config_input import config_diff
from .config_sections import LEGACY_MAX_ATTEMPTS
from .errors import JournalError
from .journal_files import COMPANIONS, check_directory, discard, open_private, private_file
from .journal_format import (
    KINDS,
    SCHEMA,
    SCHEMA_VERSION,
    ChainBreak,
    Event,
    chain_hash,
    check_chain,
    connect,
    encode_payload,
    genesis_hash,
    iter_events,
    read_meta,
)
from .journal_head import HeadFile, head_path, read_head
from .plan import KEY_BYTES, commit_key

#: The journal's events and their kinds are part of its interface (defined in :mod:`.journal_format`).
__all__ = ["KINDS", "Event", "Journal", "JournalContents", "read_journal"]



class Journal:
    """An open session journal (writer).  Use :meth:`open`; it is a context manager.

    Attributes
    ----------
    path, session_id, config_json, config_hash, created_ns:
        The journal file and its ``meta`` rows.
    plan_key:
        The session's secret randomization key (:class:`~.plan.Plan`); never published before
        the session's end.
    key_commitment:
        Its public commitment (:func:`~.plan.commit_key`), also in the first event.
    """

    def __init__(self, path: pathlib.Path, connection: sqlite3.Connection, lock_fd: int, meta: dict[str, str],
                 head: tuple[int, str], head_file: HeadFile) -> None:
        self.path = path
        self._head_file = head_file
        self._connection: sqlite3.Connection | None = connection
        self._lock_fd: int | None = lock_fd
        self.session_id = meta["session_id"]
        self.config_json = meta["config_json"]
        self.config_hash = meta["config_hash"]
        self.created_ns = int(meta["created_ns"])
        self.plan_key = bytes.fromhex(meta["plan_key"])
        self.key_commitment = meta["key_commitment"]
        self._head = head

    @classmethod
    def open(cls, path: str | os.PathLike[str], session_id: str, config: SessionConfig, *, durable: bool = True,
             plan_key: bytes | None = None) -> Journal:
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
        plan_key:
            The randomization key of a *new* journal (``KEY_BYTES`` bytes); default: drawn from
            the OS with :func:`secrets.token_bytes`.  Only tests that compare two sessions pass
            one.  Ignored when resuming (the journal's own key is used).

        Raises
        ------
        JournalError
            If the file cannot be opened or locked, belongs to another session, stores a
            different configuration (the message lists the changed fields), is empty, is not a
            journal, misses events its head file records (a copy without its ``-wal`` file, a
            truncated file) or fails the hash chain (an edited event).
        """
        if not isinstance(session_id, str) or not session_id:
            raise JournalError(f"`session_id` must be a non-empty string; found {session_id!r}")
        if plan_key is not None and len(plan_key) != KEY_BYTES:
            raise JournalError(f"`plan_key` must be {KEY_BYTES} bytes; found {len(plan_key)}")
        file = pathlib.Path(path)
        check_directory(file.parent)
        lock_fd = cls._lock(file)
        existed = True
        try:
            existed = file.exists()
            if existed:
                cls._check_file(file)
            else:  # created 0600 first: SQLite gives its -wal and -shm files the database's mode
                try:
                    os.close(open_private(file, os.O_RDWR | os.O_CREAT | os.O_EXCL))
                except OSError as err:
                    raise JournalError(f"journal {str(file)!r}: cannot create it: {err.strerror or err}") from err
            for companion in ("", *COMPANIONS):
                private_file(file.with_name(file.name + companion))
            connection = connect(file)
            try:
                mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise JournalError(f"journal {str(file)!r}: cannot switch to WAL mode (got {mode!r})")
                connection.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
                meta = read_meta(connection)
                if meta is None and existed:
                    raise JournalError(
                        f"{str(file)!r} is not a session journal (it has no session tables): if it is a copy of a "
                        f"journal, its '-wal' file ({file.name}-wal) was left behind; copy the .db, -wal and .head "
                        "files together (or copy after the session ended)")
                if meta is None:
                    meta = cls._create(connection, session_id, config, plan_key or secrets.token_bytes(KEY_BYTES))
                    head = (1, str(connection.execute("SELECT hash FROM events WHERE seq = 1").fetchone()[0]))
                    head_file = HeadFile(file, new=True)
                    head_file.write(*head)
                else:
                    cls._check(file, meta, session_id, config)
                    head = cls._check_integrity(file, connection, meta)
                    head_file = HeadFile(file, new=False)
            except BaseException:
                connection.close()
                raise
        except sqlite3.Error as err:
            cls._abandon(file, lock_fd, existed)
            raise JournalError(f"journal {str(file)!r} cannot be read as a journal ({err}); it is damaged or not "
                               "a journal: restore it from a backup, or start a new session id") from err
        except BaseException:
            cls._abandon(file, lock_fd, existed)
            raise
        return cls(file, connection, lock_fd, meta, head, head_file)

    @staticmethod
    def _abandon(file: pathlib.Path, lock_fd: int, existed: bool) -> None:
        """A failed open: remove what it created (a journal that was never written), release the lock."""
        if not existed:
            discard(file)
        os.close(lock_fd)

    def discard(self) -> None:
        """Close and delete a journal this process just created whose session could not start
        (nothing but its ``config`` event), so that its session id stays usable."""
        events = self._head[0]
        self.close()
        if events <= 1:
            discard(self.path)

    @staticmethod
    def _check_file(file: pathlib.Path) -> None:
        """Refuse an existing file that cannot be a journal (empty) before SQLite would overwrite it."""
        try:
            size = file.stat().st_size
        except OSError as err:
            raise JournalError(f"journal {str(file)!r}: cannot read it: {err.strerror or err}") from err
        if size == 0:
            raise JournalError(
                f"journal {str(file)!r} is empty (0 bytes): it holds no session to resume. Restore it from a "
                "backup, or remove it (and its .head/-wal files) to start the session afresh under this id")

    @staticmethod
    def _check_integrity(file: pathlib.Path, connection: sqlite3.Connection, meta: dict[str, str]) -> tuple[int, str]:
        """The chain is intact and reaches the recorded head: return the head ``(seq, hash)``."""
        last, digest, broken = check_chain(connection, meta)
        if broken is not None:
            raise JournalError(f"journal {str(file)!r} refused: {broken.describe()}. Resuming would build on "
                               "altered data; audit it with `evalstop audit`")
        if commit_key(bytes.fromhex(meta["plan_key"]), meta["session_id"]) != meta["key_commitment"]:
            raise JournalError(f"journal {str(file)!r} refused: its randomization key does not match the "
                               "commitment published at the start")
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
    def _create(connection: sqlite3.Connection, session_id: str, config: SessionConfig,
                plan_key: bytes) -> dict[str, str]:
        created = time.time_ns()
        commitment = commit_key(plan_key, session_id)
        meta = {
            "schema": SCHEMA_VERSION,
            "session_id": session_id,
            "config_json": config.canonical_json(),
            "config_hash": config.config_hash,
            "created_ns": str(created),
            "plan_key": plan_key.hex(),
            "key_commitment": commitment,
        }
        payload = encode_payload({"config": config.to_dict(), "config_hash": config.config_hash,
                                  "key_commitment": commitment})
        digest = chain_hash(genesis_hash(meta), 1, created, "config", None, payload)
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:  # not executescript(), which would commit half-way
                connection.execute(statement)
            connection.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(meta.items()))
            connection.execute("INSERT INTO events(seq, stamp_ns, kind, trial_id, payload, hash) "
                               "VALUES (1, ?, 'config', NULL, ?, ?)", (created, payload, digest))
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return meta

    @staticmethod
    def _check(file: pathlib.Path, meta: dict[str, str], session_id: str, config: SessionConfig) -> None:
        if meta.get("schema") != SCHEMA_VERSION:
            raise JournalError(f"journal {str(file)!r} has schema {meta.get('schema')!r}; this code reads {SCHEMA_VERSION!r}")
        missing = {"session_id", "config_json", "config_hash", "created_ns", "plan_key", "key_commitment"} - set(meta)
        if missing:
            raise JournalError(f"journal {str(file)!r} lacks meta rows {sorted(missing)}: it is damaged")
        if meta["session_id"] != session_id:
            raise JournalError(
                f"journal {str(file)!r} belongs to session {meta['session_id']!r}, not {session_id!r}"
            )
        if meta["config_hash"] != config.config_hash:
            try:
                changes = config_diff(json.loads(meta["config_json"]), config.to_dict())
            except ValueError as err:
                raise JournalError(f"journal {str(file)!r}: its stored configuration is not JSON: {err}") from err
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

        The event is durable when this returns, chained to the previous one, and the head
        file records it.  ``payload`` must be JSON-serializable without NaN or infinities.
        """
        if kind not in KINDS:
            raise JournalError(f"`kind` should be one of {sorted(KINDS)}; found {kind!r}")
        text = encode_payload(payload)
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
        """All events in ``seq`` order."""
        return iter_events(self._conn(), self.path)

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
        self._head_file.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class JournalContents:
    """A journal read in one go, without taking the writer lock (:func:`read_journal`).

    ``plan_key`` is the session's secret key (the journal's owner may read it; it is never
    published before the end); ``chain_break`` the first event that fails the hash chain,
    ``truncated`` a message when the head file records more events than the database holds, and
    ``head_problem`` one when the head file is missing or unreadable, records fewer events than
    the database holds (more than the one a crash between a commit and the head write leaves),
    or a hash that is not its event's (events were removed or rewritten and re-chained).
    """

    session_id: str
    config_json: str
    config_hash: str
    created_ns: int
    events: tuple[Event, ...]
    plan_key: str = ""
    key_commitment: str = ""
    chain_break: ChainBreak | None = None
    truncated: str = ""
    head_problem: str = ""

    def config_dict(self) -> dict[str, Any]:
        """The stored configuration as a dict (validate it with :func:`~.config.parse_config`)."""
        data: dict[str, Any] = json.loads(self.config_json)
        return data


def read_journal(path: str | os.PathLike[str], *, raw: bool = False) -> JournalContents:
    """Read a journal (read-only; safe while a session is writing it).

    The hash chain is checked and its first break reported (not raised): the audit names it.
    The events are the owner's view: what the journal sealed (a request's policy and token, a
    runner's full message) restored with the journal's own key (:func:`~.blinding.unseal_event`;
    the audit checks them against the key revealed at the end).  ``raw``: the rows as stored.

    Raises
    ------
    JournalError
        If the file is missing, empty, not a session journal, or unreadable.
    """
    file = pathlib.Path(path)
    if not file.is_file():
        raise JournalError(f"journal {str(file)!r} does not exist")
    Journal._check_file(file)
    try:
        connection = connect(file, read_only=True)
        try:
            meta = read_meta(connection)
            if meta is None:
                raise JournalError(f"{str(file)!r} is not a session journal (no meta table; a copy without its "
                                   "-wal file?)")
            if meta.get("schema") != SCHEMA_VERSION:
                raise JournalError(f"journal {str(file)!r} has schema {meta.get('schema')!r}; this code reads "
                                   f"{SCHEMA_VERSION!r}")
            events = tuple(iter_events(connection, file))
            last, _, broken = check_chain(connection, meta)
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
    if head is not None and head[0] > last:
        truncated = (f"the head file records {head[0]} events but the database holds {last} (a copy without its "
                     "-wal file, or a truncated journal)")
    elif head is not None and last > head[0] + 1:
        head_problem = (f"the database holds {last} events but its head file records {head[0]}: events "
                        f"{head[0] + 1}-{last} were added by something other than the session")
    elif head is not None and stored.get(head[0]) != head[1]:
        head_problem = (f"event {head[0]} is not the one the head file records: the journal was rewritten (events "
                        "removed or replaced, and the chain recomputed)")
    if not raw and meta.get("plan_key"):
        events = _owner_view(events, meta)
    try:
        return JournalContents(meta["session_id"], meta["config_json"], meta["config_hash"], int(meta["created_ns"]),
                               events, meta.get("plan_key", ""), meta.get("key_commitment", ""), broken, truncated,
                               head_problem)
    except (KeyError, ValueError) as err:
        raise JournalError(f"journal {str(file)!r}: damaged meta rows: {err}") from err


def _owner_view(events: tuple[Event, ...], meta: dict[str, str]) -> tuple[Event, ...]:
    """The events with their sealed fields restored by the journal's own key (as the session replays them)."""
    from .blinding import unseal  # blinding reads journal events: imported here, not at the top
    from .config import ConfigError, parse_journaled_config

    try:
        config = parse_journaled_config(json.loads(meta["config_json"]), "<journal meta>")
        return tuple(unseal(events, config, bytes.fromhex(meta["plan_key"]), meta["session_id"]))
    except (ConfigError, KeyError, ValueError):
        return events  # a damaged meta row: the rows as stored (the audit reports the damage)


def journaled_fault_limit(path: str | os.PathLike[str]) -> int:
    """``runner.max_attempts`` of the configuration journaled in ``path`` (read without the events):
    a resumed session keeps its fault limit whatever the manager's default is now.  A journal
    written before the field existed has the limit of then, 3 (:data:`~.config_sections.LEGACY_MAX_ATTEMPTS`).

    Raises
    ------
    JournalError
        If the file is not a readable session journal.
    """
    file = pathlib.Path(path)
    Journal._check_file(file)
    try:
        connection = connect(file, read_only=True)
        try:
            meta = read_meta(connection)
        finally:
            connection.close()
        runner = json.loads(meta["config_json"]).get("runner") if meta else None
        return int((runner or {}).get("max_attempts", LEGACY_MAX_ATTEMPTS))
    except (sqlite3.Error, KeyError, ValueError, TypeError, AttributeError) as err:
        raise JournalError(f"journal {str(file)!r}: cannot read its configuration: {err}") from err
