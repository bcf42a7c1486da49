"""The session journal: an append-only, hash-chained SQLite log of everything that happened, in order.

The storage is :mod:`.journal_store`'s; this module adds the session's event kinds, ``meta`` rows
and chain genesis (docs/integrity.md, docs/session.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import secrets
import sqlite3
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from .blinding import unseal
from .config import SessionConfig
from .config_input import config_diff
from .errors import JournalError
from .journal_format import KINDS, ChainBreak, Event, connect, genesis_hash, read_meta
from .journal_store import FirstEvent, JournalSpec, JournalStore, check_file, read_store
from .plan import KEY_BYTES, commit_key

#: The journal's events and their kinds are part of its interface (defined in :mod:`.journal_format`).
__all__ = ["KINDS", "SESSION_JOURNAL", "Event", "Journal", "JournalContents", "read_journal"]

#: A session journal, to the standard journal's storage.
SESSION_JOURNAL = JournalSpec(
    name="session", owner_row="session_id", kinds=KINDS,
    meta_rows=frozenset({"config_json", "config_hash", "created_ns", "plan_key", "key_commitment"}),
    genesis=genesis_hash)


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

    def __init__(self, store: JournalStore) -> None:
        self._store = store
        meta = store.meta
        self.path = store.path
        self.session_id = meta["session_id"]
        self.config_json = meta["config_json"]
        self.config_hash = meta["config_hash"]
        self.created_ns = int(meta["created_ns"])
        self.plan_key = bytes.fromhex(meta["plan_key"])
        self.key_commitment = meta["key_commitment"]

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
            journal (or is a station's), misses events its head file records (a copy without its
            ``-wal`` file, a truncated file) or fails the hash chain (an edited event).
        """
        if not isinstance(session_id, str) or not session_id:
            raise JournalError(f"`session_id` must be a non-empty string; found {session_id!r}")
        if plan_key is not None and len(plan_key) != KEY_BYTES:
            raise JournalError(f"`plan_key` must be {KEY_BYTES} bytes; found {len(plan_key)}")

        def create() -> tuple[dict[str, str], list[FirstEvent]]:
            return cls._new_meta(session_id, config, plan_key or secrets.token_bytes(KEY_BYTES))

        def check(file: pathlib.Path, meta: dict[str, str]) -> None:
            cls._check(file, meta, config)

        return cls(JournalStore.open(path, SESSION_JOURNAL, session_id, durable=durable, create=create, check=check))

    def discard(self) -> None:
        """Close and delete a journal this process just created whose session could not start
        (nothing but its ``config`` event), so that its session id stays usable."""
        self._store.discard()

    @staticmethod
    def _new_meta(session_id: str, config: SessionConfig, plan_key: bytes) -> tuple[dict[str, str], list[FirstEvent]]:
        """A new journal's ``meta`` rows and its first event (``config``)."""
        commitment = commit_key(plan_key, session_id)
        meta = {
            "session_id": session_id,
            "config_json": config.canonical_json(),
            "config_hash": config.config_hash,
            "created_ns": str(time.time_ns()),
            "plan_key": plan_key.hex(),
            "key_commitment": commitment,
        }
        first: FirstEvent = ("config", None, {"config": config.to_dict(), "config_hash": config.config_hash,
                                              "key_commitment": commitment})
        return meta, [first]

    @staticmethod
    def _check(file: pathlib.Path, meta: dict[str, str], config: SessionConfig) -> None:
        """An existing journal of this session: the same configuration, the key its commitment."""
        if meta["config_hash"] != config.config_hash:
            try:
                changes = config_diff(json.loads(meta["config_json"]), config.to_dict())
            except ValueError as err:
                raise JournalError(f"journal {str(file)!r}: its stored configuration is not JSON: {err}") from err
            raise JournalError(
                f"journal {str(file)!r} was started with a different configuration; a session's design "
                f"cannot change once it has started. Changed: {'; '.join(changes) or 'hash only'}"
            )
        if commit_key(bytes.fromhex(meta["plan_key"]), meta["session_id"]) != meta["key_commitment"]:
            raise JournalError(f"journal {str(file)!r} refused: its randomization key does not match the "
                               "commitment published at the start")

    # -- writing ---------------------------------------------------------------------------
    def append(self, kind: str, trial_id: int | None = None, **payload: Any) -> int:
        """Append one event in its own transaction and return its ``seq`` (see :meth:`write`)."""
        return self.write(kind, trial_id, **payload).seq

    def write(self, kind: str, trial_id: int | None = None, **payload: Any) -> Event:
        """Append one event in its own transaction and return it as a replay would read it.

        The event is durable when this returns, chained to the previous one, and the head
        file records it.  ``payload`` must be JSON-serializable without NaN or infinities.
        """
        return self._store.write(kind, trial_id, payload)

    # -- reading ---------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        """All events in ``seq`` order."""
        return self._store.events()

    def pragma(self, name: str) -> str:
        """The value of ``PRAGMA name`` on the writer connection (e.g. ``journal_mode``)."""
        return self._store.pragma(name)

    # -- life cycle --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._store.closed

    def close(self) -> None:
        """Close the connection and release the lock (idempotent)."""
        self._store.close()

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
    contents = read_store(path, SESSION_JOURNAL)
    meta, events = contents.meta, contents.events
    if not raw and meta.get("plan_key"):
        events = _owner_view(events, meta)
    try:
        return JournalContents(meta["session_id"], meta["config_json"], meta["config_hash"], int(meta["created_ns"]),
                               events, meta.get("plan_key", ""), meta.get("key_commitment", ""), contents.chain_break,
                               contents.truncated, contents.head_problem)
    except (KeyError, ValueError) as err:
        raise JournalError(f"journal {str(path)!r}: damaged meta rows: {err}") from err


def _owner_view(events: tuple[Event, ...], meta: dict[str, str]) -> tuple[Event, ...]:
    """The events with their sealed fields restored by the journal's own key (as the session replays them)."""
    from .config import ConfigError, parse_config

    try:
        config = parse_config(json.loads(meta["config_json"]), "<journal meta>")
        return tuple(unseal(events, config, bytes.fromhex(meta["plan_key"]), meta["session_id"]))
    except (ConfigError, KeyError, ValueError):
        return events  # a damaged meta row: the rows as stored (the audit reports the damage)


def journaled_fault_limit(path: str | os.PathLike[str]) -> int:
    """``runner.max_attempts`` of the configuration journaled in ``path`` (read without the events):
    a resumed session keeps its fault limit whatever the manager's default is now.

    Raises
    ------
    JournalError
        If the file is not a readable session journal.
    """
    file = pathlib.Path(path)
    check_file(file)
    try:
        connection = connect(file, read_only=True)
        try:
            meta = read_meta(connection)
        finally:
            connection.close()
    except sqlite3.Error as err:
        raise JournalError(f"journal {str(file)!r}: cannot read its configuration: {err}") from err
    SESSION_JOURNAL.check_type(file, meta or {})
    try:
        return int(json.loads(meta["config_json"])["runner"]["max_attempts"])  # type: ignore[index]
    except (KeyError, ValueError, TypeError) as err:
        raise JournalError(f"journal {str(file)!r}: cannot read its configuration: {err}") from err
