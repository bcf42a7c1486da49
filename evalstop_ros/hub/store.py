"""The hub's store: policies, stations, leased assignments, results and the global journal.

One class over two databases: PostgreSQL (psycopg 3, ``postgresql://...``) for a shared hub and
SQLite (``sqlite:///path`` or a bare path) as the embedded default for one lab. SQL is written
with ``?`` placeholders and translated for psycopg. Every state change is one transaction that
also appends to ``journal``; the journal's ``result`` entries are the hub's record of truth, from
which the leaderboard is computed (:mod:`.leaderboard`), online and offline alike.

The store serialises its transactions with one lock over one connection: a hub runs as one
process, and the lock makes the lease/requeue/idempotent-upload rules race-free without
database-specific locking.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .errors import HubError
from .schema import VERSION_TABLE, latest_version, migrations

__all__ = ["Assignment", "HubStore", "JournalEntry", "hash_secret", "open_store"]

#: Roles a key can have: a station takes and reports work, a viewer only reads the leaderboard.
ROLES = ("station", "viewer")
SCHEDULES = ("need", "uniform")


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret (API key or runner ticket); only hashes are stored."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Assignment:
    """One leased A/B trial as the hub stores it (policy names never leave the hub)."""

    assignment_id: str
    station_id: str
    policy_a: str
    policy_b: str
    task: str
    state: str
    lease_deadline: float


@dataclasses.dataclass(frozen=True)
class JournalEntry:
    """One line of the global journal."""

    seq: int
    at: float
    kind: str
    body: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": self.at, "kind": self.kind, "body": self.body}


class HubStore:
    """Policies, stations, assignments, results and journal in one database."""

    def __init__(self, connection: Any, dialect: str, clock: Callable[[], float] = time.time) -> None:
        self._conn = connection
        self.dialect = dialect
        self._clock = clock
        self._lock = threading.RLock()
        self._migrate()

    # -- plumbing -------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    @contextmanager
    def _tx(self) -> Iterator[Callable[..., list[tuple[Any, ...]]]]:
        """One transaction; yields ``run(sql, *params) -> rows``. Rolls back on any error."""
        with self._lock:
            cur = self._conn.cursor()

            def run(sql: str, *params: Any) -> list[tuple[Any, ...]]:
                cur.execute(self._sql(sql), params)
                return list(cur.fetchall()) if cur.description is not None else []

            try:
                if self.dialect == "sqlite":
                    cur.execute("BEGIN IMMEDIATE")
                yield run
            except BaseException:
                self._conn.rollback()
                raise
            else:
                self._conn.commit()
            finally:
                cur.close()

    def _journal(self, run: Callable[..., list[tuple[Any, ...]]], kind: str, body: dict[str, Any]) -> None:
        run("INSERT INTO journal (at, kind, body) VALUES (?, ?, ?)", self._clock(), kind,
            json.dumps(body, sort_keys=True))

    def _migrate(self) -> None:
        with self._tx() as run:
            run(VERSION_TABLE)
            current = run("SELECT COALESCE(MAX(version), 0) FROM schema_version")[0][0]
            if current > latest_version():
                raise HubError(f"the hub database has schema version {current}; this evalstop knows up to {latest_version()}")
            for version, statements in migrations(self.dialect, int(current)):
                for sql in statements:
                    run(sql)
                run("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", version, self._clock())

    def schema_version(self) -> int:
        with self._tx() as run:
            return int(run("SELECT MAX(version) FROM schema_version")[0][0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- registry -------------------------------------------------------------------------
    def add_policy(self, name: str, server_address: str) -> None:
        """Register a policy and the address of its policy server (shown to runners only)."""
        if not name or not server_address:
            raise HubError("a policy needs a name and a policy-server address")
        with self._tx() as run:
            if run("SELECT 1 FROM policies WHERE name = ?", name):
                raise HubError(f"policy {name!r} is already registered", 409)
            run("INSERT INTO policies (name, server_address, created_at) VALUES (?, ?, ?)", name, server_address, self._clock())
            self._journal(run, "policy_added", {"policy": name})

    def policies(self) -> list[str]:
        with self._tx() as run:
            return [row[0] for row in run("SELECT name FROM policies ORDER BY name")]

    def add_station(self, station_id: str, role: str = "station") -> str:
        """Register a station (or a leaderboard viewer) and return its API key, shown only now."""
        if role not in ROLES:
            raise HubError(f"role must be one of {ROLES}; found {role!r}")
        if not station_id or len(station_id) > 64:
            raise HubError("a station id is 1 to 64 characters")
        key = "esk_" + secrets.token_urlsafe(32)
        with self._tx() as run:
            if run("SELECT 1 FROM stations WHERE station_id = ?", station_id):
                raise HubError(f"station {station_id!r} is already registered", 409)
            run("INSERT INTO stations (station_id, key_hash, role, revoked, created_at) VALUES (?, ?, ?, 0, ?)",
                station_id, hash_secret(key), role, self._clock())
            self._journal(run, "station_added", {"station": station_id, "role": role})
        return key

    def revoke_station(self, station_id: str) -> None:
        """Revoke a station's key; its open leases are requeued at once."""
        with self._tx() as run:
            if not run("SELECT 1 FROM stations WHERE station_id = ?", station_id):
                raise HubError(f"no station {station_id!r}", 404)
            run("UPDATE stations SET revoked = 1 WHERE station_id = ?", station_id)
            self._journal(run, "station_revoked", {"station": station_id})
            for (assignment_id,) in run("SELECT assignment_id FROM assignments WHERE station_id = ? AND state = 'leased'", station_id):
                self._expire(run, assignment_id, "station revoked")

    def authenticate(self, key: str | None) -> tuple[str, str]:
        """``(station_id, role)`` of a valid, unrevoked key; :class:`HubError` 401 otherwise."""
        if not key:
            raise HubError("missing API key (send 'Authorization: Bearer <key>')", 401)
        with self._tx() as run:
            rows = run("SELECT station_id, role, revoked FROM stations WHERE key_hash = ?", hash_secret(key))
        if not rows:
            raise HubError("unknown API key", 401)
        station_id, role, revoked = rows[0]
        if revoked:
            raise HubError(f"the key of station {station_id!r} has been revoked", 401)
        return str(station_id), str(role)

    # -- leases ---------------------------------------------------------------------------
    def _expire(self, run: Callable[..., list[tuple[Any, ...]]], assignment_id: str, reason: str) -> None:
        run("UPDATE assignments SET state = 'expired' WHERE assignment_id = ?", assignment_id)
        self._journal(run, "requeued", {"assignment": assignment_id, "reason": reason})

    def requeue_expired(self) -> int:
        """Expire every lease past its deadline; their pairs go back to the queue. Returns how many."""
        with self._tx() as run:
            rows = run("SELECT assignment_id FROM assignments WHERE state = 'leased' AND lease_deadline < ?", self._clock())
            for (assignment_id,) in rows:
                self._expire(run, assignment_id, "lease deadline passed")
        return len(rows)

    def lease(self, station_id: str, lease_seconds: float, tasks: Sequence[str], schedule: str,
              rng: random.Random) -> tuple[Assignment, str]:
        """Lease the next A/B trial to ``station_id``; returns it and its one-off runner ticket.

        A lease the station still holds is abandoned (a restarted station lost it) and requeued.
        Requeued work (an expired lease whose pair was never reported) comes first, oldest first;
        otherwise a pair is drawn ``by need`` (fewest results and open leases, ties at random) or
        ``uniform``; which policy is arm A is drawn at random.
        """
        if schedule not in SCHEDULES:
            raise HubError(f"schedule must be one of {SCHEDULES}")
        self.requeue_expired()
        ticket = "tkt_" + secrets.token_urlsafe(24)
        now = self._clock()
        with self._tx() as run:
            for (abandoned,) in run("SELECT assignment_id FROM assignments WHERE station_id = ? AND state = 'leased'", station_id):
                self._expire(run, abandoned, "station asked for new work (restarted)")
            requeued = run(
                "SELECT a.assignment_id, a.policy_a, a.policy_b, a.task FROM assignments a "
                "WHERE a.state = 'expired' AND NOT EXISTS "
                "(SELECT 1 FROM assignments b WHERE b.requeue_of = a.assignment_id) ORDER BY a.created_at, a.assignment_id LIMIT 1")
            if requeued:
                requeue_of, policy_a, policy_b, task = requeued[0]
            else:
                requeue_of = None
                policy_a, policy_b, task = self._draw(run, tasks, schedule, rng)
            assignment = Assignment(uuid.uuid4().hex, station_id, str(policy_a), str(policy_b), str(task), "leased",
                                    now + lease_seconds)
            run("INSERT INTO assignments (assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline, "
                "ticket_hash, requeue_of, created_at) VALUES (?, ?, ?, ?, ?, 'leased', ?, ?, ?, ?)",
                assignment.assignment_id, station_id, assignment.policy_a, assignment.policy_b, assignment.task,
                assignment.lease_deadline, hash_secret(ticket), requeue_of, now)
            self._journal(run, "assigned", {"assignment": assignment.assignment_id, "station": station_id,
                                            "policy_a": assignment.policy_a, "policy_b": assignment.policy_b,
                                            "task": assignment.task, "requeue_of": requeue_of,
                                            "lease_deadline": assignment.lease_deadline})
        return assignment, ticket

    @staticmethod
    def _draw(run: Callable[..., list[tuple[Any, ...]]], tasks: Sequence[str], schedule: str,
              rng: random.Random) -> tuple[str, str, str]:
        names = [row[0] for row in run("SELECT name FROM policies ORDER BY name")]
        if len(names) < 2:
            raise HubError("the hub needs at least two registered policies to assign work", 409)
        pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
        if schedule == "need":
            load: dict[tuple[str, str], int] = {pair: 0 for pair in pairs}
            for a, b, count in run("SELECT policy_a, policy_b, COUNT(*) FROM assignments "
                                   "WHERE state IN ('leased', 'done') GROUP BY policy_a, policy_b"):
                key = (a, b) if (a, b) in load else (b, a)
                load[key] += int(count)
            least = min(load.values())
            pairs = [pair for pair in pairs if load[pair] == least]
        x, y = rng.choice(pairs)
        if rng.random() < 0.5:
            x, y = y, x
        return x, y, rng.choice(list(tasks)) if tasks else "default"

    def renew(self, station_id: str, assignment_id: str, lease_seconds: float) -> float:
        """Extend a live lease of ``station_id`` to ``now + lease_seconds`` (a long trial's
        heartbeat); returns the new deadline. A lease already expired cannot be renewed (410)."""
        assignment = self.assignment_for(station_id, assignment_id)
        deadline = self._clock() + lease_seconds
        with self._tx() as run:
            state, old = run("SELECT state, lease_deadline FROM assignments WHERE assignment_id = ?", assignment_id)[0]
            if state != "leased" or float(old) < self._clock():
                raise HubError(f"the lease of assignment {assignment.assignment_id!r} is no longer live ({state})", 410)
            run("UPDATE assignments SET lease_deadline = ? WHERE assignment_id = ?", deadline, assignment_id)
        return deadline

    def assignment_for(self, station_id: str, assignment_id: str) -> Assignment:
        """The station's own assignment; another station's id is as unknown as a made-up one."""
        with self._tx() as run:
            rows = run("SELECT assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline "
                       "FROM assignments WHERE assignment_id = ? AND station_id = ?", assignment_id, station_id)
        if not rows:
            raise HubError(f"no assignment {assignment_id!r} for station {station_id!r}", 404)
        r = rows[0]
        return Assignment(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), float(r[6]))

    def resolve_ticket(self, station_id: str, ticket: str) -> dict[str, str]:
        """The policy-server addresses of arms A and B for the runner ticket of a live lease."""
        with self._tx() as run:
            rows = run("SELECT p.server_address, q.server_address, a.state, a.lease_deadline FROM assignments a "
                       "JOIN policies p ON p.name = a.policy_a JOIN policies q ON q.name = a.policy_b "
                       "WHERE a.ticket_hash = ? AND a.station_id = ?", hash_secret(ticket), station_id)
        if not rows or rows[0][2] != "leased" or float(rows[0][3]) < self._clock():
            raise HubError("unknown or expired runner ticket", 401)
        return {"A": str(rows[0][0]), "B": str(rows[0][1])}

    # -- results --------------------------------------------------------------------------
    def submit(self, station_id: str, assignment_id: str, upload_id: str, score_a: float, score_b: float) -> str:
        """Record the result of a lease once. Returns ``"recorded"`` or ``"duplicate"``.

        A retried upload (same ``upload_id``, same body) is acknowledged as ``"duplicate"`` and
        writes nothing; an ``upload_id`` replayed with another body or against another
        assignment and a second result for an assignment are refused (409) and write nothing.
        A late result for an expired lease (a station cut off from the hub, syncing later) counts
        while its trial has not been handed out again; once it has, the result is refused (410).
        """
        body = {"assignment": assignment_id, "upload_id": upload_id, "score_a": score_a, "score_b": score_b}
        body_hash = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        assignment = self.assignment_for(station_id, assignment_id)
        with self._tx() as run:
            previous = run("SELECT assignment_id, body_hash FROM results WHERE upload_id = ?", upload_id)
            if previous:
                if previous[0][0] == assignment_id and previous[0][1] == body_hash:
                    return "duplicate"
                raise HubError(f"upload {upload_id!r} was already used for a different result; nothing written", 409)
            if run("SELECT 1 FROM results WHERE assignment_id = ?", assignment_id):
                raise HubError(f"assignment {assignment_id!r} already has a result (another upload id); nothing written", 409)
            state = run("SELECT state FROM assignments WHERE assignment_id = ?", assignment_id)[0][0]
            if state == "expired" and run("SELECT 1 FROM assignments WHERE requeue_of = ?", assignment_id):
                raise HubError(f"the lease of assignment {assignment_id!r} expired and its trial was given to another "
                               "station; result not counted", 410)
            run("INSERT INTO results (assignment_id, upload_id, station_id, body_hash, received_at) VALUES (?, ?, ?, ?, ?)",
                assignment_id, upload_id, station_id, body_hash, self._clock())
            run("UPDATE assignments SET state = 'done' WHERE assignment_id = ?", assignment_id)
            self._journal(run, "result", {"assignment": assignment_id, "station": station_id, "upload_id": upload_id,
                                          "policy_a": assignment.policy_a, "policy_b": assignment.policy_b,
                                          "task": assignment.task, "score_a": score_a, "score_b": score_b})
        return "recorded"

    # -- reading --------------------------------------------------------------------------
    def journal(self, after: int = 0, kinds: Sequence[str] | None = None) -> list[JournalEntry]:
        """The journal entries with ``seq > after``, in order (``kinds`` filters)."""
        with self._tx() as run:
            rows = run("SELECT seq, at, kind, body FROM journal WHERE seq > ? ORDER BY seq", after)
        entries = [JournalEntry(int(r[0]), float(r[1]), str(r[2]), json.loads(r[3])) for r in rows]
        return [e for e in entries if kinds is None or e.kind in kinds]

    def counts(self) -> dict[str, int]:
        """Assignments by state and the number of results (for status and tests)."""
        with self._tx() as run:
            out = {str(state): int(n) for state, n in run("SELECT state, COUNT(*) FROM assignments GROUP BY state")}
            out["results"] = int(run("SELECT COUNT(*) FROM results")[0][0])
        return out


def open_store(database: str | os.PathLike[str], clock: Callable[[], float] = time.time) -> HubStore:
    """Open (and migrate) the store at ``database``: ``postgresql://...`` or an SQLite path."""
    text = str(database)
    if text.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError as err:  # pragma: no cover - the hub extra is installed by make venv
            raise HubError("PostgreSQL needs psycopg 3: pip install 'evalstop[hub]'") from err
        try:
            conn = psycopg.connect(text)
        except psycopg.Error as err:
            raise HubError(f"cannot connect to {text}: {err}") from err
        return HubStore(conn, "postgresql", clock)
    return _open_sqlite(text, clock)


def _open_sqlite(text: str, clock: Callable[[], float]) -> HubStore:
    path = text.removeprefix("sqlite:///") if text.startswith("sqlite:///") else text
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=FULL")
    return HubStore(conn, "sqlite", clock)
