"""The hub store on SQLite and on a real PostgreSQL server: migrations, leases, idempotent results."""

from __future__ import annotations

import json
import pathlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hub_support import PostgresCluster

from evalstop_ros.hub.audit import audit_export
from evalstop_ros.hub.chain import GENESIS, OLD_CHAIN, STANDARD_CHAIN, body_text, check_chain, link
from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.schema import latest_version
from evalstop_ros.hub.store import Assignment, HubStore, hash_secret
from evalstop_ros.hub.store import open_store as _open_store

Opener = Callable[..., HubStore]


@pytest.fixture
def open_store() -> Iterator[Opener]:
    """open_store, with every store closed at the end of the test."""
    opened: list[HubStore] = []

    def opener(*args: object) -> HubStore:
        opened.append(_open_store(*args))  # type: ignore[arg-type]
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


class Clock:
    """The store's time source, advanced by the test (leases are measured against it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _hub(open_store: Opener, database: str, clock: Clock) -> tuple[HubStore, str, str]:
    store = open_store(database, clock)
    store.add_policy("alpha", "sim://success=0.8")
    store.add_policy("beta", "sim://success=0.3")
    return store, store.add_station("s1"), store.add_station("s2")


def test_migrations_are_versioned_and_applied_once(open_store: Opener, database: str) -> None:
    first = open_store(database)
    assert first.schema_version() == latest_version()
    first.add_policy("alpha", "sim://success=0.5")
    first.close()
    again = open_store(database)  # re-opening migrates nothing and keeps the data
    assert again.schema_version() == latest_version()
    assert again.policies() == ["alpha"]


def test_keys_are_stored_hashed_and_revocable(open_store: Opener, database: str) -> None:
    store, key1, _ = _hub(open_store, database, Clock())
    assert store.authenticate(key1) == ("s1", "station")
    rows = store._tx  # the stored form is the hash, never the key
    with rows() as run:
        stored = [r[0] for r in run("SELECT key_hash FROM stations")]
    assert key1 not in stored and hash_secret(key1) in stored
    store.revoke_station("s1")
    with pytest.raises(HubError, match="revoked") as err:
        store.authenticate(key1)
    assert err.value.status == 401


def test_result_counted_once_and_retry_acknowledged(open_store: Opener, database: str) -> None:
    store, _, _ = _hub(open_store, database, Clock())
    work, ticket = store.lease("s1", 30.0, ["towel"], "need", random.Random(1))
    assert set(store.resolve_ticket("s1", ticket).values()) == {"sim://success=0.8", "sim://success=0.3"}
    assert store.submit("s1", work.assignment_id, "upload-0001", 1.0, 0.0) == "recorded"
    before = store.journal()
    assert store.submit("s1", work.assignment_id, "upload-0001", 1.0, 0.0) == "duplicate"
    with pytest.raises(HubError, match="different result"):
        store.submit("s1", work.assignment_id, "upload-0001", 0.0, 0.0)
    with pytest.raises(HubError, match="already has a result"):
        store.submit("s1", work.assignment_id, "upload-0002", 1.0, 0.0)
    assert store.journal() == before
    assert store.counts() == {"done": 1, "results": 1}


def test_late_result_counts_while_its_trial_was_not_handed_out_again(open_store: Opener, database: str) -> None:
    clock = Clock()
    store, _, _ = _hub(open_store, database, clock)
    late, _ = store.lease("s1", 30.0, ["towel"], "need", random.Random(2))
    clock.now += 31.0
    assert store.requeue_expired() == 1
    assert store.submit("s1", late.assignment_id, "upload-late01", 1.0, 0.0) == "recorded"
    work, _ = store.lease("s2", 30.0, ["towel"], "need", random.Random(3))  # a fresh pair, not the late one
    assert [e.body["requeue_of"] for e in store.journal(kinds=["assigned"])] == [None, None]
    assert work.assignment_id != late.assignment_id and store.counts() == {"done": 1, "leased": 1, "results": 1}


def test_silent_station_lease_is_requeued_to_another(open_store: Opener, database: str) -> None:
    clock = Clock()
    store, _, _ = _hub(open_store, database, clock)
    lost, _ = store.lease("s1", 30.0, ["towel"], "need", random.Random(2))
    clock.now += 31.0
    work, _ = store.lease("s2", 30.0, ["towel"], "need", random.Random(3))
    requeued = [e.body for e in store.journal(kinds=["requeued"])]
    assert requeued == [{"assignment": lost.assignment_id, "reason": "lease deadline passed"}]
    assert (work.policy_a, work.policy_b, work.task) == (lost.policy_a, lost.policy_b, lost.task)
    with pytest.raises(HubError, match="expired") as err:  # the silent station comes back too late
        store.submit("s1", lost.assignment_id, "upload-late01", 1.0, 1.0)
    assert err.value.status == 410
    assert store.submit("s2", work.assignment_id, "upload-s2-001", 0.0, 1.0) == "recorded"
    assert store.counts()["results"] == 1


def test_need_schedule_balances_pairs(open_store: Opener, database: str) -> None:
    store, _, _ = _hub(open_store, database, Clock())
    store.add_policy("gamma", "sim://success=0.5")
    rng = random.Random(4)
    seen = []
    for i in range(6):
        work, _ = store.lease("s1", 30.0, ["towel"], "need", rng)
        store.submit("s1", work.assignment_id, f"upload-{i:04d}", 1.0, 0.0)
        seen.append(frozenset((work.policy_a, work.policy_b)))
    assert {pair: seen.count(pair) for pair in set(seen)} == {pair: 2 for pair in set(seen)} and len(set(seen)) == 3


def test_renewed_lease_outlives_its_first_deadline(open_store: Opener, database: str) -> None:
    clock = Clock()
    store, _, _ = _hub(open_store, database, clock)
    work, _ = store.lease("s1", 30.0, ["towel"], "need", random.Random(5))
    clock.now += 20.0
    assert store.renew("s1", work.assignment_id, 30.0) == clock.now + 30.0
    clock.now += 20.0  # past the first deadline, within the renewed one
    assert store.requeue_expired() == 0
    with pytest.raises(HubError, match="no assignment"):
        store.renew("s2", work.assignment_id, 30.0)
    clock.now += 11.0
    assert store.requeue_expired() == 1
    with pytest.raises(HubError, match="no longer live") as err:
        store.renew("s1", work.assignment_id, 30.0)
    assert err.value.status == 410


def _old_database(database: str, version: int = 1) -> None:
    """A database as schema v1 (or a later ``version``) left it: a lease that expired and was handed
    out again (then reported), a live lease with an unused ticket, and two journal entries with a
    gap between their numbers (an auto-numbered sequence after a rolled-back transaction); from
    version 3 on, linked by the old chain."""
    from evalstop_ros.hub.schema import MIGRATIONS, SERIAL, VERSION_TABLE

    dialect = "postgresql" if database.startswith("postgresql://") else "sqlite"
    journal = [(1, 0.5, "policy_added", json.dumps({"policy": "alpha"}, sort_keys=True)),
               (3, 0.75, "policy_added", json.dumps({"policy": "beta"}, sort_keys=True))]
    if version >= 3:
        previous, linked = GENESIS, []
        for seq, at, kind, body in journal:
            previous = link(previous, at, kind, body)
            linked.append(f"({seq}, {at}, '{kind}', '{body}', '{previous}')")
        entries = f"INSERT INTO journal (seq, at, kind, body, hash) VALUES {', '.join(linked)}"
    else:
        entries = ("INSERT INTO journal (seq, at, kind, body) VALUES "
                   + ", ".join(f"({seq}, {at}, '{kind}', '{body}')" for seq, at, kind, body in journal))
    versions = ", ".join(f"({v}, 0)" for v in range(1, version + 1))
    rows = [
        (f"INSERT INTO schema_version (version, applied_at) VALUES {versions}", ()),
        ("INSERT INTO policies VALUES ('alpha', 'sim://success=0.8', 0), ('beta', 'sim://success=0.3', 0)", ()),
        ("INSERT INTO stations VALUES ('s1', 'h1', 'station', 0, 0), ('s2', 'h2', 'station', 0, 0)", ()),
        ("INSERT INTO assignments (assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline, "
         "ticket_hash, requeue_of, created_at) VALUES "
         f"('x', 's1', 'alpha', 'beta', 't', '{'expired' if version < 2 else 'requeued'}', 1, 'hx', NULL, 1), "
         "('y', 's2', 'beta', 'alpha', 't', 'done', 2, 'hy', 'x', 2), "
         f"('z', 's1', 'alpha', 'beta', 't', 'leased', 1e12, '{hash_secret('tkt_zzzzzzzz')}', NULL, 3)", ()),
        ("INSERT INTO results VALUES ('y', 'upload-y', 's2', 'b', 2)", ()),
        (entries, ()),
        *([("INSERT INTO pair_load VALUES ('alpha', 'beta', 2)", ())] if version >= 2 else []),
    ]
    statements = [VERSION_TABLE, *(sql.format(serial=SERIAL[dialect]) for v, sqls in MIGRATIONS[:version]
                                   for sql in sqls)]
    if dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(database) as conn:
            for sql in statements:
                conn.execute(sql)
            for sql, params in rows:
                conn.execute(sql, params)
        conn.close()
        return
    import psycopg

    with psycopg.connect(database) as pg:
        for sql in statements:
            pg.execute(sql)
        for sql, params in rows:
            pg.execute(sql, params)


def test_migrations_2_to_5_keep_the_queue_load_journal_and_results_of_a_v1_database(open_store: Opener, database: str) -> None:
    """Schema v2 (issue #23) marks a lease already handed out again as ``requeued`` (it is not
    handed out a second time) and fills ``pair_load`` with the leased and reported assignments;
    v3 links the journal entries already written, v4 numbers them without gaps and relinks them
    by the standard chain new entries continue; v5 keeps the results, their upload ids now the station's own."""
    _old_database(database)
    store = open_store(database, Clock())
    assert store.schema_version() == latest_version() == 5
    assert store.counts() == {"requeued": 1, "done": 1, "leased": 1, "results": 1}
    with store._tx() as run:
        assert run("SELECT policy_low, policy_high, load FROM pair_load") == [("alpha", "beta", 2)]
    assert store.resolve_ticket("s1", "tkt_zzzzzzzz") == {"A": "sim://success=0.8", "B": "sim://success=0.3"}
    with pytest.raises(HubError, match="already used") as err:  # single use, also for a v1 lease
        store.resolve_ticket("s1", "tkt_zzzzzzzz")
    assert err.value.status == 401
    work, _ = store.lease("s2", 30.0, ["t"], "need", random.Random(1))
    assert store.journal(kinds=["assigned"])[-1].body["requeue_of"] is None
    with pytest.raises(HubError, match="given to another station"):
        store.submit("s1", "x", "upload-x-late", 1.0, 0.0)
    assert store.submit("s2", work.assignment_id, "upload-w", 1.0, 0.0) == "recorded"
    exported = [e.to_dict() for e in store.journal()]
    assert [e["kind"] for e in exported] == ["policy_added", "policy_added", "assigned", "result"]
    assert [e["seq"] for e in exported] == [1, 2, 3, 4]
    assert check_chain(exported) == (None, STANDARD_CHAIN)
    exported[0]["body"]["policy"] = "gamma"
    problem, chain = check_chain(exported)
    assert chain == STANDARD_CHAIN and "entry seq 1 (policy_added) does not match the hash chain" in str(problem)


def _export(store: HubStore, path: pathlib.Path) -> list[dict[str, Any]]:
    entries = [e.to_dict() for e in store.journal()]
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    return entries


def _old_links(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` as a v3 hub exported them: linked by the old chain (no sequence numbers hashed)."""
    previous = GENESIS
    for entry in entries:
        entry["hash"] = previous = link(previous, entry["at"], entry["kind"], body_text(entry["body"]))
    return entries


def test_a_v3_database_migrates_to_the_standard_chain_and_its_export_verifies(
        open_store: Opener, database: str, tmp_path: pathlib.Path) -> None:
    """A v3 hub's journal (old links, a gap in its numbers) is renumbered and relinked by v4: its
    export verifies by the standard chain (no note), new entries continue the chain, and an edited
    entry is named."""
    _old_database(database, version=3)
    store = open_store(database, Clock())
    assert store.schema_version() == latest_version()
    store.add_policy("gamma", "sim://success=0.5")
    work, _ = store.lease("s2", 30.0, ["t"], "need", random.Random(1))
    assert store.submit("s2", work.assignment_id, "upload-w", 1.0, 0.0) == "recorded"
    entries = _export(store, tmp_path / "export.jsonl")
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert entries[1]["hash"] != _old_links([dict(e) for e in entries])[1]["hash"]  # relinked
    audit = audit_export(tmp_path / "export.jsonl")
    assert audit.verified and audit.results == 1 and not any("old link" in note for note in audit.notes), audit
    assert check_chain(entries) == (None, STANDARD_CHAIN)
    result = next(e for e in entries if e["kind"] == "result")
    result["body"]["score_a"] = 0.0
    (tmp_path / "edited.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert audit_export(tmp_path / "edited.jsonl").problems == [
        f"entry seq {result['seq']} (result) does not match the hash chain: edited, or an entry before it was removed "
        "or changed"]


def test_a_v3_export_still_verifies_with_a_note_and_names_an_edited_entry(
        open_store: Opener, tmp_path: pathlib.Path) -> None:
    """An export written by a v3 hub (the old link) is told apart from a standard one and checked by
    its own chain: it verifies, with a note that it is the old chain; an edited entry is named; an
    entry removed (numbers no longer hashed) still breaks the next link."""
    store, _, _ = _hub(open_store, str(tmp_path / "hub.sqlite"), Clock())
    work, _ = store.lease("s1", 30.0, ["t"], "need", random.Random(1))
    assert store.submit("s1", work.assignment_id, "upload-1", 1.0, 0.0) == "recorded"
    old = _old_links(_export(store, tmp_path / "new.jsonl"))
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in old))
    assert check_chain(old) == (None, OLD_CHAIN)
    audit = audit_export(tmp_path / "old.jsonl")
    assert audit.verified and audit.results == 1
    assert any("old link of a hub before schema version 4" in note for note in audit.notes), audit.notes
    for seq in (1, len(old)):  # the first entry (which tells the chains apart) and the last
        edited = [dict(e, body=dict(e["body"])) for e in old]
        edited[seq - 1]["body"]["edited"] = True
        problem, chain = check_chain(edited)
        assert chain == OLD_CHAIN and problem == (f"entry seq {seq} ({edited[seq - 1]['kind']}) does not match the "
                                                  "hash chain: edited, or an entry before it was removed or changed")
    removed = old[:1] + old[2:]
    assert check_chain(removed)[0] is not None and "entry seq 3" in str(check_chain(removed)[0])


def test_a_lease_never_waits_for_its_own_rows_while_holding_another_stations(
        open_store: Opener, postgres: PostgresCluster) -> None:
    """Two hub processes lease to two stations whose leases both expired (a hub was down): each
    sweep takes the other station's expired row, each lease also expires its station's own row.
    A lease that swept first and then waited for its own row closed a cycle with the other lease
    (PostgreSQL aborted one: a 500 to a station). Here a second transaction plays the other lease:
    it holds s1's row, and asks for s2's row while s1's lease waits; nothing may be aborted."""
    import psycopg

    db = postgres.new_database()
    clock = Clock()
    store, _, _ = _hub(open_store, db, clock)
    own = store.lease("s1", 10.0, ["towel"], "uniform", random.Random(0))[0].assignment_id
    other = store.lease("s2", 10.0, ["towel"], "uniform", random.Random(1))[0].assignment_id
    clock.now += 60.0  # both leases are past their deadline
    outcome: dict[str, object] = {}

    def lease_s1() -> None:
        try:
            outcome["lease"] = store.lease("s1", 10.0, ["towel"], "uniform", random.Random(2))[0]
        except Exception as err:  # reported by the assertion below
            outcome["lease"] = err

    with psycopg.connect(db, autocommit=True) as rival, psycopg.connect(db, autocommit=True) as watcher:
        with rival.transaction():
            rival.execute("SET LOCAL lock_timeout = '60s'")
            rival.execute("SELECT 1 FROM assignments WHERE assignment_id = %s FOR UPDATE", (own,))
            thread = threading.Thread(target=lease_s1, daemon=True)
            thread.start()
            end = time.monotonic() + 60
            while not watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                      "AND datname = current_database()").fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < end and thread.is_alive(), f"the lease did not wait for s1's row: {outcome}"
                time.sleep(0.05)
            rival.execute("SELECT 1 FROM assignments WHERE assignment_id = %s FOR UPDATE", (other,))
        thread.join(60)
    assert isinstance(outcome.get("lease"), Assignment), outcome
    assert {e.body["assignment"] for e in store.journal(kinds=["requeued"])} == {own, other}


def test_a_connection_lost_mid_request_is_a_503_to_retry(open_store: Opener, postgres: PostgresCluster) -> None:
    """The database ends the hub's connections (a failover, an administrator): the request in
    flight is answered 503 (stations retry it), not 500, and the next request succeeds."""
    import psycopg

    db = postgres.new_database()
    store, _, _ = _hub(open_store, db, Clock())
    with psycopg.connect(db, autocommit=True) as admin:
        ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    assert ended is not None and ended[0] >= 1
    with pytest.raises(HubError) as refused:
        store.lease("s1", 10.0, ["towel"], "uniform", random.Random(0))
    assert refused.value.status == 503 and "retry" in str(refused.value)
    assert store.lease("s1", 10.0, ["towel"], "uniform", random.Random(0))[0].station_id == "s1"
