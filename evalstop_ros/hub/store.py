"""The hub's store: policies, stations, leased assignments, results and the global journal, on PostgreSQL or SQLite.

Every state change is one transaction that appends to the journal; concurrency across hub
processes is in docs/hub_server.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .chain import GENESIS, HUB_GENESIS, body_text, entry_hash, link
from .database import is_postgres, postgres_pool, sqlite_connection
from .errors import HubError
from .relay import RELAY_TOKEN_PREFIX, upstream_uri
from .schedule import Schedule, choose_pair
from .schema import VERSION_TABLE, latest_version, migrations

__all__ = ["Assignment", "HubStore", "JournalEntry", "Run", "draw_pair", "hash_secret", "open_store"]

#: Roles a key can have: a station takes and reports work, a viewer only reads the leaderboard.
ROLES = ("station", "viewer")
#: Key of PostgreSQL's transaction-scoped advisory lock that orders journal appends (and migrations).
JOURNAL_LOCK = 0x65766A6F  # "evjo"
MIGRATION_LOCK = 0x65766D67  # "evmg"


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret (API key or runner ticket); only hashes are stored."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


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
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": self.at, "kind": self.kind, "body": self.body, "hash": self.hash}


class Run:
    """One transaction's statement runner: ``run(sql, *params) -> rows``. Journal entries and
    changes of pair load are collected and written at commit (see the module docstring)."""

    def __init__(self, cursor: Any, translate: Callable[[str], str]) -> None:
        self._cur = cursor
        self._translate = translate
        self.entries: list[tuple[float, str, str]] = []
        self.load: dict[tuple[str, str], int] = {}

    def __call__(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        self._cur.execute(self._translate(sql), params)
        return list(self._cur.fetchall()) if self._cur.description is not None else []

    def add_load(self, a: str, b: str, delta: int) -> None:
        """Change the load (leased and done assignments) of the pair ``{a, b}`` at commit."""
        key = _pair(a, b)
        self.load[key] = self.load.get(key, 0) + delta


def draw_pair(run: Run, tasks: Sequence[str], schedule: Schedule, rng: random.Random) -> tuple[str, str, str]:
    """The pair and task of a new (not requeued) assignment, as ``(arm A, arm B, task)``.

    :func:`.schedule.choose_pair` chooses among the pairs, from their leased and reported
    assignments (table ``pair_load``, one row per pair, read without row locks); the arm order
    and the task at random. This is the hub's only pair choice.
    """
    names = [row[0] for row in run("SELECT name FROM policies ORDER BY name")]
    if len(names) < 2:
        raise HubError("the hub needs at least two registered policies to assign work", 409)
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    load: dict[tuple[str, str], int] = {pair: 0 for pair in pairs}
    if schedule.name != "uniform":
        for low, high, n in run("SELECT policy_low, policy_high, load FROM pair_load"):
            if (low, high) in load:
                load[(low, high)] = int(n)
    x, y = choose_pair(schedule, pairs, load, rng)
    if rng.random() < 0.5:
        x, y = y, x
    return x, y, rng.choice(list(tasks)) if tasks else "default"


class HubStore:
    """Policies, stations, assignments, results and journal in one database.

    ``connect`` is an SQLite connection (one process) or a psycopg_pool ``ConnectionPool``
    (PostgreSQL, any number of processes).
    """

    def __init__(self, connect: Any, dialect: str, clock: Callable[[], float] = time.time) -> None:
        self._db = connect
        self.dialect = dialect
        self._clock = clock
        self._lock = threading.RLock()  # SQLite only: one connection
        pg = dialect == "postgresql"
        #: Row-lock clauses (SQLite locks the whole database with BEGIN IMMEDIATE instead).
        self._for_update = " FOR UPDATE" if pg else ""
        self._skip_locked = " FOR UPDATE SKIP LOCKED" if pg else ""
        self._migrate()

    # -- plumbing -------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    @contextmanager
    def _tx(self) -> Iterator[Run]:
        """One transaction; yields a :class:`Run`. Rolls back on any error."""
        if self.dialect == "postgresql":
            import psycopg
            from psycopg_pool import PoolTimeout

            try:
                with self._db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                    run = Run(cur, self._sql)
                    yield run
                    self._flush(run)
            except (psycopg.OperationalError, PoolTimeout) as err:  # deadlock, serialisation, lost connection
                raise HubError(f"the hub's database aborted the request, nothing written ({err}); retry", 503) from err
            return
        with self._lock:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                run = Run(cur, self._sql)
                yield run
                self._flush(run)
            except BaseException:
                self._db.rollback()
                raise
            else:
                self._db.commit()
            finally:
                cur.close()

    def _flush(self, run: Run) -> None:
        """Write the transaction's pair-load changes (sorted by pair) and journal entries (under
        the journal lock, so sequence numbers follow the commit order)."""
        for (low, high), delta in sorted(run.load.items()):
            if delta:
                run("INSERT INTO pair_load (policy_low, policy_high, load) VALUES (?, ?, ?) "
                    "ON CONFLICT (policy_low, policy_high) DO UPDATE SET load = pair_load.load + excluded.load",
                    low, high, delta)
        if run.entries:
            if self.dialect == "postgresql":
                run("SELECT pg_advisory_xact_lock(?)", JOURNAL_LOCK)
            seq, previous = self._last_link(run)
            for at, kind, body in run.entries:
                seq += 1
                previous = entry_hash(previous, seq, at, kind, body)
                run("INSERT INTO journal (seq, at, kind, body, hash) VALUES (?, ?, ?, ?, ?)", seq, at, kind, body,
                    previous)

    @staticmethod
    def _last_link(run: Run) -> tuple[int, str]:
        """The sequence number and link of the last journal entry (under the journal lock), or ``(0,
        HUB_GENESIS)``: the next entry is the one after it (explicit, so the numbers have no gaps)."""
        rows = run("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, HUB_GENESIS)

    @staticmethod
    def _chain_existing(run: Run) -> None:
        """Schema version 3: link the entries written before the journal was chained, in order (the old link)."""
        previous = GENESIS
        for seq, at, kind, body in run("SELECT seq, at, kind, body FROM journal ORDER BY seq"):
            previous = link(previous, float(at), str(kind), str(body))
            run("UPDATE journal SET hash = ? WHERE seq = ?", previous, seq)

    @staticmethod
    def _relink_standard(run: Run) -> None:
        """Schema version 4: number the entries 1, 2, 3, ... in their order (closing the gaps an
        auto-numbered sequence leaves where a transaction was rolled back: no entry is missing
        there) and relink them by the standard chain (:func:`.chain.entry_hash`)."""
        previous = HUB_GENESIS
        rows = run("SELECT seq, at, kind, body FROM journal ORDER BY seq")
        for number, (seq, at, kind, body) in enumerate(rows, start=1):
            # in increasing order, each entry moves down to a number no entry holds any longer
            previous = entry_hash(previous, number, float(at), str(kind), str(body))
            run("UPDATE journal SET seq = ?, hash = ? WHERE seq = ?", number, previous, seq)

    def _journal(self, run: Run, kind: str, body: dict[str, Any]) -> None:
        run.entries.append((self._clock(), kind, body_text(body)))

    def _migrate(self) -> None:
        with self._tx() as run:
            if self.dialect == "postgresql":  # two hub processes starting on a fresh database
                run("SELECT pg_advisory_xact_lock(?)", MIGRATION_LOCK)
            run(VERSION_TABLE)
            current = run("SELECT COALESCE(MAX(version), 0) FROM schema_version")[0][0]
            if current > latest_version():
                raise HubError(f"the hub database has schema version {current}; this evalstop knows up to {latest_version()}")
            for version, statements in migrations(self.dialect, int(current)):
                for sql in statements:
                    run(sql)
                if version == 3:
                    self._chain_existing(run)
                if version == 4:
                    self._relink_standard(run)
                run("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", version, self._clock())

    def schema_version(self) -> int:
        with self._tx() as run:
            return int(run("SELECT MAX(version) FROM schema_version")[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- registry -------------------------------------------------------------------------
    def add_policy(self, name: str, server_address: str) -> None:
        """Register a policy and the address of its policy server (shown to runners only)."""
        if not name or not server_address:
            raise HubError("a policy needs a name and a policy-server address")
        with self._tx() as run:
            if not run("INSERT INTO policies (name, server_address, created_at) VALUES (?, ?, ?) "
                       "ON CONFLICT (name) DO NOTHING RETURNING name", name, server_address, self._clock()):
                raise HubError(f"policy {name!r} is already registered", 409)
            self._journal(run, "policy_added", {"policy": name})

    def settle_evaluation(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body of the journal's ``evaluation`` entry (:mod:`.evaluation`), journaling ``body`` as
        it if the journal has none yet; under the journal lock, so two hub processes starting on one
        database journal one evaluation."""
        with self._tx() as run:
            if self.dialect == "postgresql":
                run("SELECT pg_advisory_xact_lock(?)", JOURNAL_LOCK)
            rows = run("SELECT body FROM journal WHERE kind = ? ORDER BY seq LIMIT 1", "evaluation")
            if rows:
                return dict(json.loads(rows[0][0]))
            self._journal(run, "evaluation", body)
            return body

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
            if not run("INSERT INTO stations (station_id, key_hash, role, revoked, created_at) VALUES (?, ?, ?, 0, ?) "
                       "ON CONFLICT (station_id) DO NOTHING RETURNING station_id",
                       station_id, hash_secret(key), role, self._clock()):
                raise HubError(f"station {station_id!r} is already registered", 409)
            self._journal(run, "station_added", {"station": station_id, "role": role})
        return key

    def revoke_station(self, station_id: str) -> None:
        """Revoke a station's key; its open leases are requeued at once."""
        with self._tx() as run:
            if not run("UPDATE stations SET revoked = 1 WHERE station_id = ? RETURNING station_id", station_id):
                raise HubError(f"no station {station_id!r}", 404)
            self._journal(run, "station_revoked", {"station": station_id})
            self._expire_where(run, "station_id = ? AND state = 'leased'", (station_id,), "station revoked", wait=True)

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
    def _expire_where(self, run: Run, where: str, params: tuple[Any, ...], reason: str, wait: bool) -> int:
        """Expire the leased assignments matching ``where`` in one statement; journal each.

        ``wait=False`` skips rows another transaction holds (the deadline sweep, run by every
        hub process); ``wait=True`` waits for them (a station's own or revoked leases)."""
        lock = self._for_update if wait else self._skip_locked
        rows = run(f"UPDATE assignments SET state = 'expired' WHERE assignment_id IN "
                   f"(SELECT assignment_id FROM assignments WHERE {where} ORDER BY assignment_id{lock}) "
                   f"AND state = 'leased' RETURNING assignment_id, policy_a, policy_b", *params)
        for assignment_id, policy_a, policy_b in sorted(rows):
            run.add_load(str(policy_a), str(policy_b), -1)
            self._journal(run, "requeued", {"assignment": assignment_id, "reason": reason})
        return len(rows)

    def requeue_expired(self) -> int:
        """Expire every lease past its deadline; their pairs go back to the queue. Returns how many."""
        with self._tx() as run:
            return self._expire_deadlines(run)

    def _expire_deadlines(self, run: Run) -> int:
        return self._expire_where(run, "state = 'leased' AND lease_deadline < ?", (self._clock(),),
                                  "lease deadline passed", wait=False)

    def lease(self, station_id: str, lease_seconds: float, tasks: Sequence[str], schedule: str | Schedule,
              rng: random.Random) -> tuple[Assignment, str]:
        """Lease the next A/B trial to ``station_id``; returns it and its one-off runner ticket.

        A lease the station still holds is abandoned (a restarted station lost it) and requeued.
        Requeued work (an expired lease whose pair was never reported) comes first, oldest first;
        otherwise :func:`draw_pair` chooses the pair (``uncertain``, ``need`` or ``uniform``:
        :mod:`.schedule`) and the arm order.
        """
        schedule = Schedule.of(schedule)
        ticket = "tkt_" + secrets.token_urlsafe(24)
        now = self._clock()
        with self._tx() as run:
            # one lease at a time per station, even with requests to two hub processes
            run(f"SELECT 1 FROM stations WHERE station_id = ?{self._for_update}", station_id)
            # Its own rows first (waiting for them), then other stations' expired rows, skipped
            # when locked: waiting for its own rows while holding another station's would close
            # a cycle with that station's lease doing the same (PostgreSQL: "deadlock detected").
            self._expire_where(run, "station_id = ? AND state = 'leased'", (station_id,),
                               "station asked for new work (restarted)", wait=True)
            self._expire_deadlines(run)
            requeued = run("SELECT assignment_id, policy_a, policy_b, task FROM assignments WHERE state = 'expired' "
                           f"ORDER BY created_at, assignment_id LIMIT 1{self._skip_locked}")
            if requeued:
                requeue_of, policy_a, policy_b, task = requeued[0]
                run("UPDATE assignments SET state = 'requeued' WHERE assignment_id = ?", requeue_of)
            else:
                requeue_of = None
                policy_a, policy_b, task = draw_pair(run, tasks, schedule, rng)
            assignment = Assignment(uuid.uuid4().hex, station_id, str(policy_a), str(policy_b), str(task), "leased",
                                    now + lease_seconds)
            run("INSERT INTO assignments (assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline, "
                "ticket_hash, requeue_of, created_at) VALUES (?, ?, ?, ?, ?, 'leased', ?, ?, ?, ?)",
                assignment.assignment_id, station_id, assignment.policy_a, assignment.policy_b, assignment.task,
                assignment.lease_deadline, hash_secret(ticket), requeue_of, now)
            run.add_load(assignment.policy_a, assignment.policy_b, +1)
            self._journal(run, "assigned", {"assignment": assignment.assignment_id, "station": station_id,
                                            "policy_a": assignment.policy_a, "policy_b": assignment.policy_b,
                                            "task": assignment.task, "requeue_of": requeue_of,
                                            "lease_deadline": assignment.lease_deadline})
        return assignment, ticket

    def renew(self, station_id: str, assignment_id: str, lease_seconds: float) -> float:
        """Extend a live lease of ``station_id`` to ``now + lease_seconds`` (a long trial's
        heartbeat); returns the new deadline. A lease already expired cannot be renewed (410)."""
        with self._tx() as run:
            rows = run(f"SELECT state, lease_deadline FROM assignments WHERE assignment_id = ? AND station_id = ?"
                       f"{self._for_update}", assignment_id, station_id)
            if not rows:
                raise HubError(f"no assignment {assignment_id!r} for station {station_id!r}", 404)
            state, old = rows[0]
            now = self._clock()
            if state != "leased" or float(old) < now:
                raise HubError(f"the lease of assignment {assignment_id!r} is no longer live ({state})", 410)
            deadline = now + lease_seconds
            run("UPDATE assignments SET lease_deadline = ? WHERE assignment_id = ?", deadline, assignment_id)
        return deadline

    def assignment_for(self, station_id: str, assignment_id: str) -> Assignment:
        """The station's own assignment; another station's id is as unknown as a made-up one."""
        with self._tx() as run:
            return self._assignment(run, station_id, assignment_id, "")

    def _assignment(self, run: Run, station_id: str, assignment_id: str, lock: str) -> Assignment:
        rows = run("SELECT assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline "
                   f"FROM assignments WHERE assignment_id = ? AND station_id = ?{lock}", assignment_id, station_id)
        if not rows:
            raise HubError(f"no assignment {assignment_id!r} for station {station_id!r}", 404)
        r = rows[0]
        return Assignment(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), float(r[6]))

    def resolve_ticket(self, station_id: str, ticket: str, relay: str | None = None) -> dict[str, str]:
        """What the runner connects to for arms A and B, for the runner ticket of a live lease: the
        policy servers' addresses, or with ``relay`` (the relay's URL) a relay locator per arm
        (``<relay>/<token>``, :mod:`.relay`) for every address the hub can relay, so that no
        address leaves the hub.

        A ticket resolves once: it is spent by the same statement that checks it, so of two
        concurrent requests (to one or two hub processes) exactly one gets the addresses."""
        with self._tx() as run:
            rows = run("UPDATE assignments SET ticket_used_at = ? WHERE ticket_hash = ? AND station_id = ? "
                       "AND state = 'leased' AND lease_deadline >= ? AND ticket_used_at IS NULL "
                       "RETURNING assignment_id, policy_a, policy_b", self._clock(), hash_secret(ticket), station_id,
                       self._clock())
            if not rows:
                raise HubError("unknown or expired runner ticket (or one already used: a ticket resolves once)", 401)
            assignment_id, policy_a, policy_b = rows[0]
            addresses = dict(run("SELECT name, server_address FROM policies WHERE name IN (?, ?)", policy_a, policy_b))
            out = {"A": str(addresses[policy_a]), "B": str(addresses[policy_b])}
            for arm, address in out.items():
                if relay is not None and upstream_uri(address) is not None:
                    token = RELAY_TOKEN_PREFIX + secrets.token_urlsafe(32)
                    run("INSERT INTO relay_tokens (token_hash, assignment_id, arm) VALUES (?, ?, ?)",
                        hash_secret(token), assignment_id, arm)
                    out[arm] = f"{relay}/{token}"
        return out

    def relay_target(self, token: str) -> str:
        """The policy-server address a relay token reaches while its lease lives; :class:`HubError` 401 otherwise."""
        with self._tx() as run:
            rows = run("SELECT p.server_address FROM relay_tokens r JOIN assignments a ON a.assignment_id = r.assignment_id "
                       "JOIN policies p ON p.name = CASE WHEN r.arm = 'A' THEN a.policy_a ELSE a.policy_b END "
                       "WHERE r.token_hash = ? AND a.state = 'leased' AND a.lease_deadline >= ?",
                       hash_secret(token), self._clock())
        if not rows:
            raise HubError("unknown relay token, or its lease is over", 401)
        return str(rows[0][0])

    # -- results --------------------------------------------------------------------------
    def submit(self, station_id: str, assignment_id: str, upload_id: str, score_a: float, score_b: float) -> str:
        """Record the result of a lease once. Returns ``"recorded"`` or ``"duplicate"``.

        Upload ids are the station's own: another station's ids are neither seen nor taken (one
        cannot probe or squat on them). A retried upload (same ``upload_id``, same body) is
        acknowledged as ``"duplicate"`` and writes nothing; an ``upload_id`` the station replays with
        another body or against another assignment and a second result for an assignment are
        refused (409) and write nothing.
        A late result for an expired lease (a station cut off from the hub, syncing later) counts
        while its trial has not been handed out again; once it has, the result is refused (410).
        The assignment's row is locked first, so concurrent uploads of one result (retries sent to
        two hub processes) are decided one after the other; the unique keys of ``results`` are the
        last word for an upload id reused on another assignment at the same moment.
        """
        body = {"assignment": assignment_id, "upload_id": upload_id, "score_a": score_a, "score_b": score_b}
        body_hash = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._tx() as run:
            assignment = self._assignment(run, station_id, assignment_id, self._for_update)
            verdict = self._previous_upload(run, station_id, assignment_id, upload_id, body_hash)
            if verdict is not None:
                return verdict
            if assignment.state == "requeued":
                raise HubError(f"the lease of assignment {assignment_id!r} expired and its trial was given to another "
                               "station; result not counted", 410)
            if not run("INSERT INTO results (assignment_id, upload_id, station_id, body_hash, received_at) "
                       "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING assignment_id",
                       assignment_id, upload_id, station_id, body_hash, self._clock()):
                # another transaction took this upload id for another assignment meanwhile
                return self._previous_upload(run, station_id, assignment_id, upload_id, body_hash) or "duplicate"
            run("UPDATE assignments SET state = 'done' WHERE assignment_id = ?", assignment_id)
            if assignment.state == "expired":
                run.add_load(assignment.policy_a, assignment.policy_b, +1)
            self._journal(run, "result", {"assignment": assignment_id, "station": station_id, "upload_id": upload_id,
                                          "policy_a": assignment.policy_a, "policy_b": assignment.policy_b,
                                          "task": assignment.task, "score_a": score_a, "score_b": score_b})
        return "recorded"

    @staticmethod
    def _previous_upload(run: Run, station_id: str, assignment_id: str, upload_id: str, body_hash: str) -> str | None:
        """``"duplicate"`` for a retry, :class:`HubError` 409 for a conflicting upload, else ``None``."""
        previous = run("SELECT assignment_id, body_hash FROM results WHERE station_id = ? AND upload_id = ?",
                       station_id, upload_id)
        if previous:
            if previous[0][0] == assignment_id and previous[0][1] == body_hash:
                return "duplicate"
            raise HubError(f"upload {upload_id!r} was already used for a different result; nothing written", 409)
        if run("SELECT 1 FROM results WHERE assignment_id = ?", assignment_id):
            raise HubError(f"assignment {assignment_id!r} already has a result (another upload id); nothing written", 409)
        return None

    # -- reading --------------------------------------------------------------------------
    def journal(self, after: int = 0, kinds: Sequence[str] | None = None) -> list[JournalEntry]:
        """The journal entries with ``seq > after``, in order (``kinds`` filters)."""
        with self._tx() as run:
            rows = run("SELECT seq, at, kind, body, hash FROM journal WHERE seq > ? ORDER BY seq", after)
        entries = [JournalEntry(int(r[0]), float(r[1]), str(r[2]), json.loads(r[3]), str(r[4])) for r in rows]
        return [e for e in entries if kinds is None or e.kind in kinds]

    def counts(self) -> dict[str, int]:
        """Assignments by state and the number of results (for status and tests)."""
        with self._tx() as run:
            out = {str(state): int(n) for state, n in run("SELECT state, COUNT(*) FROM assignments GROUP BY state")}
            out["results"] = int(run("SELECT COUNT(*) FROM results")[0][0])
        return out


def open_store(database: str | os.PathLike[str], clock: Callable[[], float] = time.time,
               pool_size: int = 8) -> HubStore:
    """Open (and migrate) the store at ``database``: ``postgresql://...`` (a pool of up to
    ``pool_size`` connections) or an SQLite path (its files owner-only: :mod:`.database`)."""
    text = str(database)
    if is_postgres(text):
        return HubStore(postgres_pool(text, pool_size), "postgresql", clock)
    return HubStore(sqlite_connection(text.removeprefix("sqlite:///")), "sqlite", clock)
