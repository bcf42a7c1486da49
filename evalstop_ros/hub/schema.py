"""Versioned schema migrations of the hub store, for PostgreSQL and SQLite.

Each migration is applied once, in order, inside one transaction, and recorded in
``schema_version``; :func:`migrations` yields the statements of the versions a store still
lacks. The two dialects differ only in the auto-numbered key of the journal.

Version 2 makes every query of a lease, an upload and a ticket an index look-up, so that the
cost of ``POST /v1/work`` does not grow with the leases ever made (issue #23): an expired
lease that was handed out again is marked ``requeued`` (the queue of requeued work is then the
``expired`` rows, oldest first, instead of a scan for expired rows without a successor), a
unique index on ``requeue_of`` lets an expired lease be handed out again at most once, the
per-pair load of the ``need`` schedule is kept in ``pair_load`` instead of being counted over
all assignments, and a runner ticket records when it was used (single use).

Version 3 chains the journal (:mod:`.chain`): each entry stores the SHA-256 link over the one
before it and itself, so an export is tamper-evident and ``evalstop audit`` can verify it; the
store computes the links of the entries an older database already holds when it migrates.

Version 4 makes the hub's journal the standard journal's chain (:mod:`.chain`: the link hashes
the sequence number too, as a session's and a station's do); its sequence numbers are assigned by
the store under the journal lock (gap-free, no longer the column's auto-numbering). It changes no
table: the store renumbers the entries an older database holds 1, 2, 3, ... in their order (an
auto-numbered sequence skips a number where a transaction was rolled back; no entry is lost
there) and relinks them. Both migrations run on PostgreSQL and SQLite alike.

Version 5 scopes upload ids per station: ``results`` is unique on ``(station_id, upload_id)``
instead of ``upload_id`` alone, so a station can neither learn whether another station used an id
(a 409 "already used") nor take one another station will use. The table is rebuilt (SQLite cannot
drop a column's constraint), on both dialects by the same statements. It also adds
``relay_tokens``: the hashes of the tokens with which a runner reaches an arm's policy server
through the hub's relay (:mod:`.relay`), one per arm of a resolved lease.
"""

from __future__ import annotations

from collections.abc import Iterator

#: (version, statements); ``{serial}`` is the dialect's auto-numbered primary key.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE policies (
            name TEXT PRIMARY KEY,
            server_address TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE stations (
            station_id TEXT PRIMARY KEY,
            key_hash TEXT NOT NULL,
            role TEXT NOT NULL,
            revoked INTEGER NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE assignments (
            assignment_id TEXT PRIMARY KEY,
            station_id TEXT NOT NULL REFERENCES stations(station_id),
            policy_a TEXT NOT NULL REFERENCES policies(name),
            policy_b TEXT NOT NULL REFERENCES policies(name),
            task TEXT NOT NULL,
            state TEXT NOT NULL,
            lease_deadline DOUBLE PRECISION NOT NULL,
            ticket_hash TEXT NOT NULL,
            requeue_of TEXT,
            created_at DOUBLE PRECISION NOT NULL)""",
        "CREATE INDEX assignments_state ON assignments(state, lease_deadline)",
        """CREATE TABLE results (
            assignment_id TEXT PRIMARY KEY REFERENCES assignments(assignment_id),
            upload_id TEXT NOT NULL UNIQUE,
            station_id TEXT NOT NULL,
            body_hash TEXT NOT NULL,
            received_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE journal (
            seq {serial},
            at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL)""",
    )),
    (2, (
        "ALTER TABLE assignments ADD COLUMN ticket_used_at DOUBLE PRECISION",
        "UPDATE assignments SET state = 'requeued' WHERE state = 'expired' AND assignment_id IN "
        "(SELECT requeue_of FROM assignments WHERE requeue_of IS NOT NULL)",
        "CREATE UNIQUE INDEX assignments_requeue_of ON assignments(requeue_of)",
        "CREATE UNIQUE INDEX assignments_ticket ON assignments(ticket_hash)",
        "CREATE INDEX assignments_station ON assignments(station_id, state)",
        "CREATE INDEX assignments_queue ON assignments(state, created_at, assignment_id)",
        "CREATE UNIQUE INDEX stations_key ON stations(key_hash)",
        """CREATE TABLE pair_load (
            policy_low TEXT NOT NULL,
            policy_high TEXT NOT NULL,
            load INTEGER NOT NULL,
            PRIMARY KEY (policy_low, policy_high))""",
        "INSERT INTO pair_load (policy_low, policy_high, load) "
        "SELECT CASE WHEN policy_a < policy_b THEN policy_a ELSE policy_b END, "
        "CASE WHEN policy_a < policy_b THEN policy_b ELSE policy_a END, COUNT(*) "
        "FROM assignments WHERE state IN ('leased', 'done') GROUP BY 1, 2",
    )),
    (3, (
        "ALTER TABLE journal ADD COLUMN hash TEXT",
    )),
    (4, ()),  # the store relinks the journal by the standard chain (see the module docstring)
    (5, (
        """CREATE TABLE results_v5 (
            assignment_id TEXT PRIMARY KEY REFERENCES assignments(assignment_id),
            upload_id TEXT NOT NULL,
            station_id TEXT NOT NULL,
            body_hash TEXT NOT NULL,
            received_at DOUBLE PRECISION NOT NULL,
            UNIQUE (station_id, upload_id))""",
        "INSERT INTO results_v5 (assignment_id, upload_id, station_id, body_hash, received_at) "
        "SELECT assignment_id, upload_id, station_id, body_hash, received_at FROM results",
        "DROP TABLE results",
        "ALTER TABLE results_v5 RENAME TO results",
        """CREATE TABLE relay_tokens (
            token_hash TEXT PRIMARY KEY,
            assignment_id TEXT NOT NULL REFERENCES assignments(assignment_id),
            arm TEXT NOT NULL)""",
    )),
)

SERIAL = {"postgresql": "BIGSERIAL PRIMARY KEY", "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT"}
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"


def latest_version() -> int:
    """The schema version this code writes."""
    return MIGRATIONS[-1][0]


def migrations(dialect: str, current: int) -> Iterator[tuple[int, list[str]]]:
    """The migrations after version ``current``, as ``(version, statements)`` for ``dialect``."""
    for version, statements in MIGRATIONS:
        if version > current:
            yield version, [sql.format(serial=SERIAL[dialect]) for sql in statements]
