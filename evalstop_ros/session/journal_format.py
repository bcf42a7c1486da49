"""The journal's format on disk: its tables, event kinds, rows and hash chain (seed 003 §V-A).

The layout and the chain are in docs/session.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .errors import JournalError

__all__ = ["KINDS", "SCHEMA", "SCHEMA_VERSION", "ChainBreak", "Event", "chain_hash", "check_chain", "check_rows",
           "connect", "encode_payload", "genesis_hash", "iter_events", "read_meta"]

#: The one journal schema this code reads (the tables and the canonical configuration's form);
#: a journal of any other is refused (:meth:`~.journal_store.JournalSpec.check_type`).
SCHEMA_VERSION = "5"
#: Event kinds (see :mod:`evalstop_ros.session.session` for when each is written).
KINDS = frozenset({
    "config",
    "started",
    "trial_requested",
    "reset_confirmed",
    "runner_result",
    "score_accepted",
    "score_held",
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
    "key_revealed",
    "message_rejected",
    "request_noted",
    "trial_dispatched",
    "trial_cancelled",
    "result_after_stop",
})

_NO_CHANGE = "BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END"
SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, stamp_ns INTEGER NOT NULL, kind TEXT NOT NULL, "
    "trial_id INTEGER NULL, payload TEXT NOT NULL CHECK (json_valid(payload)), hash TEXT NOT NULL)",
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
    hash:
        The event's link of the hash chain (:func:`chain_hash`); ``""`` for an event that was not
        read from a journal.
    """

    seq: int
    stamp_ns: int
    kind: str
    trial_id: int | None
    payload: dict[str, Any]
    hash: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True)
class ChainBreak:
    """The first event whose stored hash is not the chain's (it, or an earlier row, was edited)."""

    seq: int
    kind: str
    trial_id: int | None

    def describe(self) -> str:
        """One line naming the event and its trial."""
        trial = f", trial {self.trial_id}" if self.trial_id is not None else ""
        return (f"event {self.seq} ({self.kind}{trial}) does not match the journal's hash chain: it was edited "
                "after it was written (or an event before it was removed)")


def genesis_hash(meta: Mapping[str, str]) -> str:
    """The chain's starting value of a session journal: SHA-256 of the session id, config hash, key
    commitment, creation time."""
    text = "\0".join(("evalstop-journal", meta["session_id"], meta["config_hash"], meta.get("key_commitment", ""),
                      meta["created_ns"]))
    return hashlib.sha256(text.encode()).hexdigest()


def chain_hash(previous: str, seq: int, stamp_ns: int, kind: str, trial_id: int | None, payload: str) -> str:
    """One link: SHA-256 over the previous link and every column of the event (payload as stored)."""
    text = "\0".join((previous, str(seq), str(stamp_ns), kind, "" if trial_id is None else str(trial_id), payload))
    return hashlib.sha256(text.encode()).hexdigest()


def encode_payload(payload: dict[str, Any]) -> str:
    """Canonical strict JSON of a payload (sorted keys; NaN/inf refused)."""
    try:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise JournalError(f"journal payloads must be strict JSON: {err}") from err


def connect(path: pathlib.Path, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (the writer opens its own transactions), waiting up to 5 s for a lock."""
    if read_only:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    else:
        # The session serializes its calls (a lock), so the node may call it from any thread.
        connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA busy_timeout = 5000")
    return connection


def read_meta(connection: sqlite3.Connection) -> dict[str, str] | None:
    """The ``meta`` rows, or None when the file has no ``meta`` table (not a journal, or an empty file)."""
    has_meta = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if has_meta is None:
        return None
    return dict(connection.execute("SELECT key, value FROM meta").fetchall())


def iter_events(connection: sqlite3.Connection, file: pathlib.Path) -> Iterator[Event]:
    """The events in ``seq`` order; a row that cannot be read is a :class:`JournalError`."""
    try:
        cursor = connection.execute("SELECT seq, stamp_ns, kind, trial_id, payload, hash FROM events ORDER BY seq")
        for seq, stamp_ns, kind, trial_id, payload, digest in cursor:
            try:
                decoded = json.loads(payload)
            except (TypeError, ValueError) as err:
                raise JournalError(f"journal {str(file)!r}, event {seq}: payload is not JSON: {err}") from err
            if not isinstance(decoded, dict):
                raise JournalError(f"journal {str(file)!r}, event {seq}: payload is not a JSON object")
            yield Event(int(seq), int(stamp_ns), str(kind), None if trial_id is None else int(trial_id), decoded,
                        str(digest))
    except sqlite3.Error as err:
        raise JournalError(f"journal {str(file)!r}: cannot read its events: {err}") from err


def raw_rows(connection: sqlite3.Connection) -> Iterator[tuple[int, int, str, int | None, str, str]]:
    """The rows as stored (payload undecoded: the chain hashes the stored text)."""
    yield from connection.execute("SELECT seq, stamp_ns, kind, trial_id, payload, hash FROM events ORDER BY seq")


#: A journal row as the chain hashes it: ``(seq, stamp_ns, kind, trial_id, payload as stored, hash)``.
Row = tuple[int, int, str, int | None, str, str]


def check_rows(rows: Iterable[Row], genesis: str) -> tuple[int, str, ChainBreak | None]:
    """Walk a hash chain from ``genesis`` over rows ``(seq, stamp_ns, kind, trial_id, payload as
    stored, hash)`` in order: ``(last seq, last hash, first break or None)``.

    The one chain check of every journal: a session's, a station's (both through
    :func:`check_chain`) and the hub's (``hub.chain.check_chain`` over an export).  Also a break: a
    ``seq`` that is not the one after the last (a deleted, inserted or reordered row).
    """
    previous, last = genesis, 0
    for seq, stamp_ns, kind, trial_id, payload, digest in rows:
        expected = chain_hash(previous, int(seq), int(stamp_ns), str(kind), trial_id, str(payload))
        if int(seq) != last + 1 or digest != expected:
            return last, previous, ChainBreak(int(seq), str(kind), None if trial_id is None else int(trial_id))
        previous, last = expected, int(seq)
    return last, previous, None


def check_chain(connection: sqlite3.Connection, meta: Mapping[str, str],
                genesis: Callable[[Mapping[str, str]], str] = genesis_hash) -> tuple[int, str, ChainBreak | None]:
    """Walk the hash chain of a journal file from ``genesis(meta)`` (a session journal's by default)
    with :func:`check_rows`: ``(last seq, last hash, first break or None)``."""
    return check_rows(raw_rows(connection), genesis(meta))
