"""The journal cannot be silently replaced, truncated or edited (hash chain, head file, clear errors)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.journal import Journal, read_journal
from evalstop_ros.session.plan import commit_key


def run(path, trials: int = 6) -> EvaluationSession:
    """A session with ``trials`` scored trials, left open (the caller closes it)."""
    session = EvaluationSession.open(path, sim.make_config(), "s1", durable=False)
    session.start()
    for _ in range(trials):
        sim.step(session, {"pi0": 0.3, "pi1": 0.7})
    return session


def copy_without_wal(source, target) -> None:
    shutil.copyfile(source, target)
    shutil.copyfile(source.with_name(source.name + ".head"), target.with_name(target.name + ".head"))


def edit_first_score(path) -> int:
    """Flip trial 1's score with the triggers dropped (what a determined editor would do); its seq."""
    connection = sqlite3.connect(path)
    connection.execute("DROP TRIGGER events_no_update")
    seq, payload = connection.execute(
        "SELECT seq, payload FROM events WHERE kind = 'score_accepted' AND trial_id = 1").fetchone()
    flipped = payload.replace('"success":true', '"success":false') if '"success":true' in payload else \
        payload.replace('"success":false', '"success":true')
    connection.execute("UPDATE events SET payload = ? WHERE seq = ?", (flipped, seq))
    connection.commit()
    connection.close()
    return int(seq)


def test_every_event_is_chained_and_the_head_is_recorded(journal_path):
    with run(journal_path) as session:
        events = session.events()
    assert len({e.hash for e in events}) == len(events) and all(len(e.hash) == 64 for e in events)
    contents = read_journal(journal_path)
    assert contents.chain_break is None and contents.truncated == ""
    head = journal_path.with_name(journal_path.name + ".head").read_text()
    assert f'"seq": {len(events)}' in head and events[-1].hash in head


def test_resume_refuses_an_empty_file(journal_path):
    journal_path.write_bytes(b"")
    with pytest.raises(JournalError, match=r"is empty \(0 bytes\): it holds no session to resume"):
        EvaluationSession.open(journal_path, sim.make_config(), "s1")
    assert journal_path.stat().st_size == 0  # nothing was created over it


def test_resume_refuses_a_copy_made_without_its_wal(journal_path, tmp_path):
    session = run(journal_path)  # still open: its latest events are only in the -wal file
    copy = tmp_path / "copy.db"
    copy_without_wal(journal_path, copy)
    with pytest.raises(JournalError, match=r"no session tables.*-wal"):
        EvaluationSession.open(copy, sim.make_config(), "s1")
    session.close()


def test_resume_refuses_a_truncated_copy(journal_path, tmp_path):
    session = run(journal_path, trials=2)
    sqlite3.connect(journal_path).execute("PRAGMA wal_checkpoint(PASSIVE)").connection.close()  # first part in .db
    for _ in range(6):
        sim.step(session, {"pi0": 0.3, "pi1": 0.7})
    copy = tmp_path / "copy.db"
    copy_without_wal(journal_path, copy)
    with pytest.raises(JournalError, match=r"is truncated: its head file records \d+ events but the database holds"):
        EvaluationSession.open(copy, sim.make_config(), "s1")
    session.close()


def test_resume_refuses_a_journal_without_its_head_file(journal_path):
    run(journal_path).close()
    journal_path.with_name(journal_path.name + ".head").unlink()
    with pytest.raises(JournalError, match=r"head file 'session.db.head' is missing"):
        EvaluationSession.open(journal_path, sim.make_config(), "s1")


def test_resume_refuses_an_edited_journal_naming_the_event_and_trial(journal_path):
    run(journal_path).close()
    seq = edit_first_score(journal_path)
    with pytest.raises(JournalError, match=rf"event {seq} \(score_accepted, trial 1\) does not match the journal's "
                                           r"hash chain"):
        EvaluationSession.open(journal_path, sim.make_config(), "s1")
    broken = read_journal(journal_path).chain_break
    assert broken is not None and (broken.seq, broken.trial_id) == (seq, 1)


def test_garbage_is_a_clear_journal_error(journal_path):
    journal_path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalError, match=r"cannot be read as a journal .*restore it from a backup"):
        EvaluationSession.open(journal_path, sim.make_config(), "s1")
    with pytest.raises(JournalError, match=r"cannot be read as a journal"):
        read_journal(journal_path)


def test_a_payload_that_is_not_json_is_a_journal_error(journal_path):
    run(journal_path, trials=1).close()
    connection = sqlite3.connect(journal_path)
    connection.execute("DROP TRIGGER events_no_update")
    connection.execute("UPDATE events SET payload = '[1]' WHERE seq = 2")
    connection.commit()
    connection.close()
    with pytest.raises(JournalError, match=r"event 2: payload is not a JSON object"):
        read_journal(journal_path)


def test_the_key_is_secret_committed_and_revealed_at_the_end(journal_path):
    with run(journal_path, trials=2) as session:
        key = session.plan.key
        assert key is not None and len(key) == 32
        first = session.events()[0]
        assert first.payload["key_commitment"] == commit_key(key, "s1")
        assert key.hex() not in str([e.payload for e in session.events()])  # not before the end
        session.abort("test over")
        revealed = session.events()[-1]
    assert (revealed.kind, revealed.payload["key"]) == ("key_revealed", key.hex())
    other = EvaluationSession.open(journal_path.with_name("t.db"), sim.make_config(), "s1", durable=False)
    with other:
        assert other.plan.key != key  # every session draws its own key from the OS


def test_plan_key_of_the_wrong_length_is_refused(journal_path):
    with pytest.raises(JournalError, match=r"`plan_key` must be 32 bytes"):
        Journal.open(journal_path, "s1", sim.make_config(), plan_key=b"short")


def test_head_file_survives_a_torn_slot_and_reads_the_earlier_format(journal_path):
    """The head is written in place into two CRC-checked slots (journal_head): a slot torn by a
    crash falls back to the other one, which a journal may be ahead of; a one-record head file of
    the earlier format still reads; a stale head file is dropped when a new journal is created."""
    run(journal_path).close()
    head = journal_path.with_name(journal_path.name + ".head")
    last = read_journal(journal_path).events[-1]
    data = bytearray(head.read_bytes())
    assert len(data) == 256 and f'"seq": {last.seq}'.encode() in data
    torn = (last.seq % 2) * 128  # the slot being written when the power went
    for damage in (b"\0" * 20, last.hash[:20].translate(str.maketrans("0123456789abcdef", "123456789abcdef0")).encode()):
        spoiled = bytearray(data)
        at = data.index(last.hash.encode(), torn)
        spoiled[at : at + 20] = damage  # unparsable, or parsable with a CRC that does not match
        head.write_bytes(bytes(spoiled))
        with EvaluationSession.open(journal_path, sim.make_config(), "s1", durable=False) as session:
            assert session.events()[-1].seq == last.seq  # resumed: the database is one event ahead of the head
    head.write_text(f'{{"seq": {last.seq}, "hash": "{last.hash}"}}')  # the earlier format
    EvaluationSession.open(journal_path, sim.make_config(), "s1", durable=False).close()
    head.write_bytes(b"\0" * 256)
    with pytest.raises(JournalError, match=r"head file .* is unreadable: no valid record"):
        EvaluationSession.open(journal_path, sim.make_config(), "s1")
    fresh = journal_path.with_name("fresh.db")
    fresh.with_name("fresh.db.head").write_text('{"seq": 999, "hash": "stale"}')
    EvaluationSession.open(fresh, sim.make_config(), "s2", durable=False).close()
    EvaluationSession.open(fresh, sim.make_config(), "s2", durable=False).close()  # the stale head is gone
