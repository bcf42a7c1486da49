"""A hub station's local journal is the standard journal (issue #23): the session journal's
storage (session/journal_store.py) with a station's kinds -- one writer, an edited event named,
nothing acknowledged lost to ``kill -9``, an older station's ``station.jsonl`` migrated."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from session_sim import make_config

from evalstop_ros.hub.chain import GENESIS, record_link
from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.station import StationClient, read_records
from evalstop_ros.hub.station_journal import (
    JOURNAL,
    LEGACY,
    MIGRATED,
    migration_problem,
    open_station_journal,
    read_station_journal,
)
from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.journal import Journal, read_journal


def _result(n: int) -> dict[str, Any]:
    return {"assignment_id": f"a{n}", "upload_id": f"u{n}", "score_a": 1.0, "score_b": n / 10}


def test_a_station_journal_is_the_standard_journal(tmp_path: pathlib.Path) -> None:
    """WAL, synchronous FULL, private files, append-only triggers, one hash chain from the station's genesis."""
    with_umask = os.umask(0o022)
    try:
        journal = open_station_journal(tmp_path, "lab")
    finally:
        os.umask(with_umask)
    try:
        journal.append("rules", max_faults=3, trials=0, scoring="auto")
        record = journal.append("result", **_result(1))
        assert (record["kind"], record["seq"], record["upload_id"]) == ("result", 3, "u1")
        assert journal.pragma("journal_mode") == "wal" and journal.pragma("synchronous") == "2"
        modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
        assert modes[JOURNAL] == 0o600 and modes[JOURNAL + ".head"] == 0o600 and modes[JOURNAL + ".lock"] == 0o600
        connection = sqlite3.connect(tmp_path / JOURNAL)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute("UPDATE events SET payload = '{}' WHERE seq = 3")
        connection.close()
    finally:
        journal.close()
    contents = read_station_journal(tmp_path)
    assert contents.station_id == "lab" and contents.opened == {"station_id": "lab"}
    assert [r["kind"] for r in contents.records] == ["rules", "result"] and contents.chain_break is None
    assert (contents.truncated, contents.head_problem) == ("", "")


def test_station_kinds_and_their_fields_are_validated(tmp_path: pathlib.Path) -> None:
    journal = open_station_journal(tmp_path, "lab")
    try:
        with pytest.raises(JournalError, match=r"`kind` should be one of .*; found 'score_accepted'"):
            journal.append("score_accepted", upload_id="u1")
        with pytest.raises(JournalError, match=r"a station's 'result' record needs \['score_a', 'score_b'\]"):
            journal.append("result", assignment_id="a1", upload_id="u1")
        with pytest.raises(JournalError, match="strict JSON"):
            journal.append("result", **{**_result(1), "score_a": float("nan")})
        assert journal.records() == []
    finally:
        journal.close()


def test_a_session_journal_is_not_a_station_journal_nor_the_reverse(tmp_path: pathlib.Path) -> None:
    session_dir = tmp_path / "session"
    session_dir.mkdir(mode=0o700)
    Journal.open(session_dir / JOURNAL, "lab", make_config()).close()
    with pytest.raises(JournalError, match=r"is a session journal \(session 'lab'\), not a station journal"):
        open_station_journal(session_dir, "lab")
    with pytest.raises(JournalError, match=r"is a session journal \(session 'lab'\), not a station journal"):
        read_station_journal(session_dir)
    open_station_journal(tmp_path, "lab").close()
    with pytest.raises(JournalError, match=r"is a station journal \(station 'lab'\), not a session journal"):
        Journal.open(tmp_path / JOURNAL, "lab", make_config())
    with pytest.raises(JournalError, match=r"is a station journal \(station 'lab'\), not a session journal"):
        read_journal(tmp_path / JOURNAL)


def test_a_second_writer_is_refused(tmp_path: pathlib.Path) -> None:
    journal = open_station_journal(tmp_path, "lab")
    try:
        with pytest.raises(JournalError, match="is in use by another process"):
            open_station_journal(tmp_path, "lab")
        client = StationClient("http://127.0.0.1:9", "unused", tmp_path)
        with pytest.raises(HubError, match="station journal: .*is in use by another process"):
            client.record_result("a1", 1.0, 0.0)
        assert read_records(tmp_path) == []  # readers need no lock
    finally:
        journal.close()
    with pytest.raises(JournalError, match=r"belongs to station 'lab', not 'other'"):
        open_station_journal(tmp_path, "other")


def test_two_threads_append_to_one_chain(tmp_path: pathlib.Path) -> None:
    """The hub thread (acks) and the node's thread (results) append through one writer: every
    record is there once, in one unbroken chain."""
    client = StationClient("http://127.0.0.1:9", "unused", tmp_path)
    client.open_journal("lab")

    def results() -> None:
        for n in range(100):
            client.record_result(f"a{n}", 1.0, 0.0)

    def acks() -> None:
        for n in range(100):
            client.append({"kind": "ack", "upload_id": f"u{n}", "status": "counted"})

    threads = [threading.Thread(target=results), threading.Thread(target=acks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    client.close()
    contents = read_station_journal(tmp_path)
    assert contents.chain_break is None and (contents.truncated, contents.head_problem) == ("", "")
    kinds = [r["kind"] for r in contents.records]
    assert (kinds.count("result"), kinds.count("ack"), [r["seq"] for r in contents.records]) == (100, 100,
                                                                                                list(range(2, 202)))


def test_an_edited_event_is_refused_and_named(tmp_path: pathlib.Path) -> None:
    journal = open_station_journal(tmp_path, "lab")
    for n in range(1, 4):
        journal.append("result", **_result(n))
    journal.close()
    connection = sqlite3.connect(tmp_path / JOURNAL)
    connection.execute("DROP TRIGGER events_no_update")
    connection.execute("""UPDATE events SET payload = json_set(payload, '$.score_b', 0.9) WHERE seq = 3""")
    connection.commit()
    connection.close()
    contents = read_station_journal(tmp_path)
    assert contents.chain_break is not None and (contents.chain_break.seq, contents.chain_break.kind) == (3, "result")
    with pytest.raises(JournalError, match=r"event 3 \(result\) does not match the journal's hash chain"):
        open_station_journal(tmp_path, "lab")


_APPENDER = """
import sys
from evalstop_ros.hub.station_journal import open_station_journal
journal = open_station_journal(sys.argv[1], "lab")
n = 0
while True:
    n += 1
    record = journal.append("result", assignment_id=f"a{n}", upload_id=f"u{n}", score_a=1.0, score_b=0.5)
    print(record["seq"], flush=True)
"""


def test_a_killed_station_loses_nothing_it_was_told_was_journaled(tmp_path: pathlib.Path) -> None:
    """``kill -9`` in the middle of appending: every append that returned is there, the chain
    and the head hold, and the restarted station appends on."""
    process = subprocess.Popen([sys.executable, "-c", _APPENDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    acknowledged = 0
    end = time.monotonic() + 120
    while acknowledged < 40 and time.monotonic() < end:
        line = process.stdout.readline()
        assert line, "the appender died"
        acknowledged = int(line)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    assert acknowledged >= 40
    contents = read_station_journal(tmp_path)
    assert contents.chain_break is None and contents.truncated == "" and contents.head_problem == ""
    assert len(contents.events) >= acknowledged
    assert [r["upload_id"] for r in contents.records] == [f"u{n}" for n in range(1, len(contents.events))]
    journal = open_station_journal(tmp_path, "lab")
    try:
        assert journal.append("ack", upload_id="u1", status="counted")["seq"] == len(contents.events) + 1
    finally:
        journal.close()
    assert read_station_journal(tmp_path).chain_break is None


def _legacy(directory: pathlib.Path, unchained: int = 1, torn: bool = True) -> list[dict[str, Any]]:
    """An older station's ``station.jsonl``: ``unchained`` records written before stations
    chained, then hashed ones, and (``torn``) a last line cut by a kill."""
    records: list[dict[str, Any]] = [
        {"kind": "leased", "assignment_id": "a1", "task": "towel", "lease_deadline": 10.0},
        {"kind": "result", **_result(1)},
        {"kind": "ack", "upload_id": "u1", "status": "counted"},
        {"kind": "leased", "assignment_id": "a2", "task": "cup", "lease_deadline": 20.0},
        {"kind": "result", **_result(2)},
    ]
    previous = GENESIS
    for n, record in enumerate(records):
        if n >= unchained:
            record["at"] = 1_700_000_000.25 + n
            record["hash"] = previous = record_link(previous, record)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    (directory / LEGACY).write_text(text + ('{"kind": "ack", "upl' if torn else ""))
    return records


def test_an_older_station_jsonl_is_migrated_on_first_open(tmp_path: pathlib.Path) -> None:
    """The JSON lines journal of a station from before: migrated into station.db with its first
    event recording the old file's count, unchained records and last hash; the torn last line
    (never acknowledged) dropped; the old file kept as station.jsonl.migrated; the pending result
    still pending; the audit ties the two."""
    old = _legacy(tmp_path)
    client = StationClient("http://127.0.0.1:9", "unused", tmp_path)
    assert [r["kind"] for r in client.records()] == [r["kind"] for r in old]  # read before any migration
    assert [r["upload_id"] for r in client.pending()] == ["u2"]
    client.open_journal("lab")
    try:
        assert not (tmp_path / LEGACY).exists() and (tmp_path / MIGRATED).exists()
        migrated = [{k: v for k, v in r.items() if k != "seq" and (k != "at" or "at" in o)}
                    for r, o in zip(client.records(), old, strict=True)]
        assert migrated == [{k: v for k, v in r.items() if k != "hash"} for r in old]
        assert [r["upload_id"] for r in client.pending()] == ["u2"]
        client.append({"kind": "ack", "upload_id": "u2", "status": "counted"})
    finally:
        client.close()
    contents = read_station_journal(tmp_path)
    assert contents.opened == {"station_id": "lab", "migrated": {
        "file": LEGACY, "records": 5, "unchained": 1, "last_hash": old[-1]["hash"]}}
    assert contents.chain_break is None and migration_problem(contents) == ""
    assert [r["kind"] for r in contents.records] == ["leased", "result", "ack", "leased", "result", "ack"]
    open_station_journal(tmp_path, "lab").close()  # reopened: nothing migrated twice
    assert len(read_station_journal(tmp_path).records) == 6

    # the renamed old file edited after the migration: the audit's tie names it
    migrated = tmp_path / MIGRATED
    migrated.write_text(migrated.read_text().replace('"task": "cup"', '"task": "sofa"'))
    assert migration_problem(read_station_journal(tmp_path)) == f"its migrated records differ from {MIGRATED} beside it"


def test_a_migration_interrupted_before_the_rename_completes_on_the_next_open(tmp_path: pathlib.Path) -> None:
    _legacy(tmp_path, torn=False)
    open_station_journal(tmp_path, "lab").close()
    os.replace(tmp_path / MIGRATED, tmp_path / LEGACY)  # as if killed between the commit and the rename
    open_station_journal(tmp_path, "lab").close()
    assert not (tmp_path / LEGACY).exists() and len(read_station_journal(tmp_path).records) == 5


def test_an_old_journal_that_fails_its_chain_or_was_not_migrated_is_refused(tmp_path: pathlib.Path) -> None:
    _legacy(tmp_path, unchained=0)
    legacy = tmp_path / LEGACY
    legacy.write_text(legacy.read_text().replace('"task": "cup"', '"task": "sofa"'))
    with pytest.raises(JournalError, match=r"station.jsonl' fails its hash chain \(line 4 \(leased\) does not match"):
        open_station_journal(tmp_path, "lab")
    assert not (tmp_path / JOURNAL).exists() and legacy.exists()  # nothing created, nothing lost

    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    open_station_journal(other, "lab").close()
    _legacy(other)
    with pytest.raises(JournalError, match=r"holds both station.db and an old station.jsonl that station.db did not "
                                           r"migrate \(5 records\): move one of them away"):
        open_station_journal(other, "lab")
