"""A hub station's local journal is the standard journal: the session journal's storage
(session/journal_store.py) with a station's kinds -- one writer, an edited event named, nothing
acknowledged lost to ``kill -9``, an earlier version's ``station.jsonl`` refused."""

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

from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.station_journal import JOURNAL, JSON_LINES, open_station_journal, read_station_journal
from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.journal import Journal, read_journal
from evalstop_ros.station.client import StationClient, read_records


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
        with pytest.raises(JournalError, match=r"`kind` should be one of .*; found 'decision'"):
            journal.append("decision", upload_id="u1")  # a session's kind: a station runs no tests
        with pytest.raises(JournalError, match=r"a station's 'score_accepted' record needs \['submission'\]"):
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


def test_a_directory_of_an_earlier_version_is_refused_and_left_as_it_is(tmp_path: pathlib.Path) -> None:
    """One journal format: a station directory holding the JSON lines journal an earlier development
    version wrote (``station.jsonl``), alone or beside a ``station.db``, is refused by every reader
    and writer with an error that names the file; nothing is created, nothing changes."""
    old = "".join(json.dumps({"kind": "result", **_result(n)}, sort_keys=True) + "\n" for n in (1, 2))
    message = r"holds station.jsonl, the journal of an earlier development version of evalstop; this version keeps " \
              r"station.db only"
    alone, beside = tmp_path / "alone", tmp_path / "beside"
    for directory in (alone, beside):
        directory.mkdir(mode=0o700)
    open_station_journal(beside, "lab").close()
    for directory in (alone, beside):
        (directory / JSON_LINES).write_text(old)
        before = {f.name: f.read_bytes() for f in directory.iterdir()}
        with pytest.raises(JournalError, match=message):
            open_station_journal(directory, "lab")
        with pytest.raises(JournalError, match=message):
            read_station_journal(directory)
        with pytest.raises(HubError, match=message):
            read_records(directory)
        with pytest.raises(HubError, match=message):
            StationClient("http://127.0.0.1:9", "unused", directory).open_journal("lab")
        assert {f.name: f.read_bytes() for f in directory.iterdir()} == before
