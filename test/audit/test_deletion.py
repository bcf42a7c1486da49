"""An audit cannot be fooled by deleting or appending journal events (issue 19): a journal cut to
half its events with its head file deleted, and a forged, re-chained ``paused`` after
``finished``, each fail with their reason and exit status 1; with the published
``session_event`` stream (a bag), a cut whose head file was rewritten to match fails too."""

from __future__ import annotations

import pathlib
import sqlite3
from typing import Any

import pytest
from audit_support import RATES, bag, make_config

from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording
from evalstop_ros.session.journal_format import chain_hash
from evalstop_ros.session.journal_head import HeadFile, head_path


@pytest.fixture
def session(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A finished session's journal and the bag that recorded what its manager published."""
    workdir = tmp_path / "journals"
    workdir.mkdir(mode=0o700)
    messages = simulate_recording(make_config(), SimulatedLab(RATES), workdir=workdir)
    return workdir / "sim.db", bag(tmp_path / "bag", messages, "mcap")


def _rows(path: pathlib.Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT seq, stamp_ns, kind, trial_id, payload, hash FROM events ORDER BY seq").fetchall()


def _cut(path: pathlib.Path, keep: int) -> None:
    """Delete every event after ``keep`` (triggers dropped, as a determined editor would)."""
    connection = sqlite3.connect(path)
    connection.execute("DROP TRIGGER events_no_delete")
    connection.execute("DELETE FROM events WHERE seq > ?", (keep,))
    connection.commit()
    connection.close()


def _rewrite_head(path: pathlib.Path) -> None:
    seq, digest = _rows(path)[-1][0], _rows(path)[-1][5]
    head = HeadFile(path, new=True)
    head.write(seq, digest)
    head.close()


def _codes(report: dict[str, Any]) -> set[str]:
    return {v["code"] for v in report["violations"]}


def test_the_untampered_journal_verifies_alone_and_against_its_recording(session, audit_json):
    journal, recording = session
    assert audit_json(journal)[0] == 0
    status, report = audit_json(journal, "--against", str(recording))
    assert status == 0 and report["verified"], report["violations"]
    assert any("compared with the recorded session_event stream" in note for note in report["notes"])
    status, report = audit_json(recording, "--against", str(journal))  # either way round
    assert status == 0, report["violations"]


def test_a_journal_cut_to_half_with_its_head_file_deleted_fails(session, audit_json):
    journal, _ = session
    events = len(_rows(journal))
    _cut(journal, events // 2)
    head_path(journal).unlink()
    status, report = audit_json(journal)
    assert status == 1 and not report["verified"]
    assert "journal_head_missing" in _codes(report)
    (finding,) = [v for v in report["violations"] if v["code"] == "journal_head_missing"]
    assert "head file 'sim.db.head' is missing" in finding["message"]


def test_a_forged_rechained_pause_after_finished_fails(session, audit_json):
    journal, _ = session
    rows = _rows(journal)
    assert [r[2] for r in rows[-2:]] == ["finished", "key_revealed"]
    seq, stamp, previous = rows[-1][0] + 1, rows[-1][1] + 1, rows[-1][5]
    payload = '{"reason":"forged"}'
    digest = chain_hash(previous, seq, stamp, "paused", None, payload)  # the chain is recomputed ...
    with sqlite3.connect(journal) as connection:
        connection.execute("INSERT INTO events VALUES (?, ?, 'paused', NULL, ?, ?)", (seq, stamp, payload, digest))
    _rewrite_head(journal)  # ... and the head file rewritten: no hash check can see it
    status, report = audit_json(journal)
    assert status == 1 and _codes(report) == {"event_after_end"}, report["violations"]
    (finding,) = report["violations"]
    assert f"first event {seq} (paused)" in finding["message"] and "after the session finished" in finding["message"]


def test_a_cut_with_a_consistent_head_fails_against_the_recording(session, audit_json):
    journal, recording = session
    events = len(_rows(journal))
    _cut(journal, events // 2)
    _rewrite_head(journal)  # the journal alone now reads as a session still running
    status, report = audit_json(journal, "--against", str(recording))
    assert status == 1 and "stream_mismatch" in _codes(report)
    missing = [v for v in report["violations"] if v["code"] == "stream_mismatch"]
    assert len(missing) == events - events // 2  # one per published event the journal lost
    assert f"event {events // 2 + 1} (" in missing[0]["message"] and "missing from the journal" in missing[0]["message"]


def test_an_event_appended_after_the_recorded_end_fails_against_the_recording(session, audit_json):
    journal, recording = session
    rows = _rows(journal)
    seq, stamp, previous = rows[-1][0] + 1, rows[-1][1] + 1, rows[-1][5]
    payload = '{"message":"x","reason":"r","summary":{}}'  # an audit-only kind: allowed after the end ...
    with sqlite3.connect(journal) as connection:
        connection.execute("INSERT INTO events VALUES (?, ?, 'message_rejected', NULL, ?, ?)",
                           (seq, stamp, payload, chain_hash(previous, seq, stamp, "message_rejected", None, payload)))
    _rewrite_head(journal)
    assert audit_json(journal)[0] == 0
    status, report = audit_json(journal, "--against", str(recording))  # ... but it was never published
    assert status == 1 and _codes(report) == {"stream_mismatch"}, report["violations"]
    assert f"{seq} (message_rejected)" in report["violations"][0]["message"]


def test_a_late_result_journaled_after_the_recorder_stopped_is_noted_against_the_recording(session, audit_json):
    """Several runners (docs/parallel.md): a run cancelled at the stop reports once its arm has stopped, maybe
    after ``evalstop record --until-finished`` stopped; that ``result_after_stop`` (never used) is noted as not
    compared, not taken for an event added afterwards (any other kind still is, above)."""
    journal, recording = session
    rows = _rows(journal)
    seq, stamp, previous = rows[-1][0] + 1, rows[-1][1] + 1, rows[-1][5]
    payload = '{"duration_s":2.0,"message":"","ok":true,"runner":"arm_1/run_trial"}'
    with sqlite3.connect(journal) as connection:
        connection.execute("INSERT INTO events VALUES (?, ?, 'result_after_stop', 3, ?, ?)",
                           (seq, stamp, payload, chain_hash(previous, seq, stamp, "result_after_stop", 3, payload)))
    _rewrite_head(journal)
    status, report = audit_json(journal, "--against", str(recording))
    assert status == 0 and report["verified"], report["violations"]
    assert any(f"journal event(s) {seq}-{seq} came after the recording stopped: result(s) of trial(s) 3" in note
               for note in report["notes"]), report["notes"]


def _append(journal: pathlib.Path, kind: str, payload: str) -> int:
    """Append one event re-chained after the last, with the head file rewritten to vouch for it; its seq."""
    rows = _rows(journal)
    seq, stamp, previous = rows[-1][0] + 1, rows[-1][1] + 1, rows[-1][5]
    digest = chain_hash(previous, seq, stamp, kind, None, payload)
    with sqlite3.connect(journal) as connection:
        connection.execute("INSERT INTO events VALUES (?, ?, ?, NULL, ?, ?)", (seq, stamp, kind, payload, digest))
    _rewrite_head(journal)
    return int(seq)


@pytest.mark.parametrize("key", ["00" * 32, None], ids=["zero-key", "the-same-key"])
def test_a_second_key_revealed_after_the_end_fails_the_audit_and_the_resume(session, audit_json,
                                                                            key: str | None) -> None:
    """Exactly one ``key_revealed`` may end a journal, whatever key a second one carries: the audit names
    it (``key_reveal_repeated``, exit 1) and a resume refuses the journal by the same rule."""
    import json

    from evalstop_ros.session import EvaluationSession
    from evalstop_ros.session.errors import JournalError

    journal, _ = session
    revealed = json.loads(_rows(journal)[-1][4])
    _append(journal, "key_revealed", json.dumps({"key": key or revealed["key"],
                                                 "key_commitment": revealed["key_commitment"]},
                                                separators=(",", ":")))
    status, report = audit_json(journal)
    assert status == 1 and not report["verified"]
    assert "key_reveal_repeated" in _codes(report), report["violations"]
    (finding,) = [v for v in report["violations"] if v["code"] == "key_reveal_repeated"]
    assert "revealed 2 times" in finding["message"]
    with pytest.raises(JournalError, match="revealed 2 times"):
        EvaluationSession.open(journal, make_config(), "sim", durable=False)
