"""Versioned schema migrations of the hub store, for PostgreSQL and SQLite (each version's change: docs/hub_server.md).
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
