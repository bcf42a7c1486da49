"""Tests of evalstop_ros.session.journal: durability settings, round trip, refusals."""

from __future__ import annotations

import json
import sqlite3

import pytest
from session_sim import make_config

from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.journal import KINDS, Journal, read_journal
from evalstop_ros.session.plan import commit_key


def test_new_journal_stores_the_exact_config_first(journal_path):
    config = make_config()
    with Journal.open(journal_path, "s1", config) as journal:
        (first,) = list(journal.events())
        assert (journal.session_id, journal.config_hash, journal.config_json) == ("s1", config.config_hash,
                                                                                  config.canonical_json())
    assert (first.seq, first.kind, first.trial_id) == (1, "config", None)
    assert first.payload == {"config": config.to_dict(), "config_hash": config.config_hash,
                             "key_commitment": commit_key(journal.plan_key, "s1")}


def test_round_trip_through_reopen_and_read_journal(journal_path):
    config = make_config()
    with Journal.open(journal_path, "s1", config) as journal:
        assert journal.append("started") == 2
        assert journal.append("trial_requested", 1, round=1, policy_id="pi0", note="ünïcode") == 3
        assert journal.append("score_accepted", 1, submission={"progress": 0.25, "success": False}) == 4
    with Journal.open(journal_path, "s1", config) as journal:
        events = list(journal.events())
    contents = read_journal(journal_path)
    assert [e.seq for e in events] == [1, 2, 3, 4] and events == list(contents.events)
    assert [(e.kind, e.trial_id) for e in events[1:]] == [("started", None), ("trial_requested", 1), ("score_accepted", 1)]
    assert events[2].payload == {"round": 1, "policy_id": "pi0", "note": "ünïcode"}
    assert events[3].payload == {"submission": {"progress": 0.25, "success": False}}
    assert all(isinstance(e.stamp_ns, int) and e.stamp_ns > 1_600_000_000 * 10**9 for e in events)
    assert (contents.session_id, contents.config_hash) == ("s1", config.config_hash)
    assert contents.config_dict() == config.to_dict()


def test_wal_mode_and_full_synchronous(journal_path):
    with Journal.open(journal_path, "s1", make_config()) as journal:
        assert journal.pragma("journal_mode") == "wal"
        assert journal.pragma("synchronous") == "2"  # FULL


def test_a_closed_journal_read_later_leaves_no_files_beside_it(journal_path):
    """Closed by its writer, the journal is in rollback mode: reading it read-only (the audit, a report)
    creates no -wal or -shm file next to it (SQLite creates both for a WAL database and cannot remove
    them from a read-only connection); opened to write again, it is WAL again."""
    config = make_config()
    with Journal.open(journal_path, "s1", config) as journal:
        journal.append("started")
    assert len(read_journal(journal_path).events) == 2
    assert sorted(p.name for p in journal_path.parent.iterdir() if p.name.startswith(journal_path.name + "-")) == []
    with Journal.open(journal_path, "s1", config) as journal:
        assert journal.pragma("journal_mode") == "wal"
        assert read_journal(journal_path).events[-1].kind == "started"   # a reader beside the writer


def test_a_journal_closed_while_read_stays_wal_and_readable(journal_path):
    """A reader (an audit of a live session) still has the journal open when its writer closes: the
    writer leaves it in WAL mode (its switch to rollback mode would need the reader gone) and the reader
    goes on reading every event."""
    journal = Journal.open(journal_path, "s1", make_config())
    journal.append("started")
    reader = sqlite3.connect(f"{journal_path.as_uri()}?mode=ro", uri=True)
    try:
        assert reader.execute("SELECT count(*) FROM events").fetchone() == (2,)
        journal.close()
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert reader.execute("SELECT count(*) FROM events").fetchone() == (2,)
    finally:
        reader.close()
    assert [e.kind for e in read_journal(journal_path).events] == ["config", "started"]


def test_non_durable_journal_skips_fsync_only(journal_path):
    with Journal.open(journal_path, "s1", make_config(), durable=False) as journal:
        assert (journal.pragma("journal_mode"), journal.pragma("synchronous")) == ("wal", "0")


@pytest.mark.parametrize(("change", "named"), [
    ({"alpha": 0.2}, r"alpha: 0\.1 -> 0\.2"),
    ({"n_max": 100}, r"n_max: 50 -> 100"),
    ({"metrics": [{"name": "success", "method": "nscore"}, {"name": "progress"}]},
     r"metrics\[0\]\.method: 'step' -> 'nscore'"),
    ({"seed": 12}, r"seed: 11 -> 12"),
])
def test_reopening_with_a_changed_config_is_refused_naming_the_change(journal_path, change, named):
    Journal.open(journal_path, "s1", make_config()).close()
    with pytest.raises(JournalError, match=r"different configuration; a session's design cannot change.*" + named):
        Journal.open(journal_path, "s1", make_config(**change))


def test_reopening_as_another_session_is_refused(journal_path):
    Journal.open(journal_path, "s1", make_config()).close()
    with pytest.raises(JournalError, match=r"belongs to session 's1', not 's2'"):
        Journal.open(journal_path, "s2", make_config())


def test_a_second_writer_is_locked_out(journal_path):
    with Journal.open(journal_path, "s1", make_config()):
        with pytest.raises(JournalError, match=r"is in use by another process"):
            Journal.open(journal_path, "s1", make_config())
        read_journal(journal_path)  # readers are welcome
    Journal.open(journal_path, "s1", make_config()).close()  # released on close


def test_events_cannot_be_changed_or_deleted(journal_path):
    Journal.open(journal_path, "s1", make_config()).close()
    connection = sqlite3.connect(journal_path)
    try:
        for statement in ("UPDATE events SET kind = 'x'", "DELETE FROM events", "UPDATE meta SET value = 'x'"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                connection.execute(statement)
    finally:
        connection.close()


def test_unknown_kind_is_refused(journal_path):
    with Journal.open(journal_path, "s1", make_config()) as journal:
        with pytest.raises(JournalError, match=r"`kind` should be one of .*; found 'scored'"):
            journal.append("scored", 1)


def test_payload_must_be_strict_json(journal_path):
    with Journal.open(journal_path, "s1", make_config()) as journal:
        with pytest.raises(JournalError, match=r"strict JSON"):
            journal.append("score_rejected", 1, progress=float("nan"))
        with pytest.raises(JournalError, match=r"strict JSON"):
            journal.append("score_rejected", 1, progress=object())
        assert [e.kind for e in journal.events()] == ["config"]  # nothing half-written


def test_closed_journal_refuses_appends(journal_path):
    journal = Journal.open(journal_path, "s1", make_config())
    journal.close()
    journal.close()  # idempotent
    assert journal.closed
    with pytest.raises(JournalError, match=r"is closed"):
        journal.append("started")


def test_session_id_must_be_given(journal_path):
    with pytest.raises(JournalError, match=r"`session_id` must be a non-empty string; found ''"):
        Journal.open(journal_path, "", make_config())


def test_missing_directory_is_a_journal_error(tmp_path):
    with pytest.raises(JournalError, match=r"journal directory .*/no/such': No such file or directory"):
        Journal.open(tmp_path / "no" / "such" / "dir.db", "s1", make_config())


def test_read_journal_refuses_what_is_not_a_journal(tmp_path):
    with pytest.raises(JournalError, match=r"does not exist"):
        read_journal(tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x(y)").connection.close()
    with pytest.raises(JournalError, match=r"is not a session journal"):
        read_journal(other)


def test_payload_is_stored_as_canonical_json(journal_path):
    with Journal.open(journal_path, "s1", make_config()) as journal:
        journal.append("paused", None, reason="lunch", b=1, a=2)
    connection = sqlite3.connect(journal_path)
    try:
        (text,) = connection.execute("SELECT payload FROM events WHERE kind = 'paused'").fetchone()
    finally:
        connection.close()
    assert text == '{"a":2,"b":1,"reason":"lunch"}' == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_kinds_cover_the_session_protocol():
    assert {"config", "trial_requested", "runner_result", "score_accepted", "score_rejected", "score_duplicate",
            "correction", "void", "decision", "paused", "resumed", "aborted", "finished",
            "post_decision_score"} <= KINDS
