"""Nothing in a journal file names the policy behind a label, and a runner's text reaches no
operator channel (issue 19): requests are journaled without ``policy_id`` (restored from the
plan's key), a runner's free text is reduced to a category and an id and journaled sealed
(AES-GCM under the plan's key), and both come back once the key is revealed."""

from __future__ import annotations

import contextlib
import pathlib
import re
from collections.abc import Iterator

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.blinding import seal, unseal
from evalstop_ros.session.journal import read_journal
from evalstop_ros.session.runner_messages import operator_text

POLICIES = ["pi0_fast_droid", "octo_base"]
RATES = {"pi0_fast_droid": 0.2, "octo_base": 0.9}
LEAK = "ConnectionClosedError: invalid metadata {'policy_name': 'pi0_fast_droid'} from ws://10.1.2.3:8000"
OPERATOR_FORM = re.compile(r"runner error \(error [0-9a-f]{8}\)")


def _bytes(directory: pathlib.Path) -> bytes:
    """Every byte of every journal file (database, -wal, -shm, head) as they lie on disk."""
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def _config():
    return sim.make_config(policies=POLICIES, metrics=[{"name": "success", "method": "nscore"}], n_max=6)


@contextlib.contextmanager
def _open(path: pathlib.Path, published: list[tuple[str, dict]] | None = None) -> Iterator[EvaluationSession]:
    """Session ``s1`` of :func:`_config` at ``path``; with ``published``, every committed event is
    appended to it sealed, as evaluation_manager publishes it on ``session_event``."""
    with EvaluationSession.open(path, _config(), "s1", durable=False) as session:
        if published is not None:
            session.on_commit = lambda e: published.append((e.kind, seal(e.kind, e.payload)))
        yield session


def _fail_once_then_run(session: EvaluationSession, published: list[tuple[str, dict]]) -> None:
    trial = session.next_trial()
    assert trial is not None
    session.record_runner_result(trial.trial_id, False, 1.0, LEAK)
    assert published[-1][0] == "runner_result"
    while sim.step(session, RATES) is not None:
        pass


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    """The journal of session ``s1``, alone in its directory (so :func:`_bytes` sees only its files)."""
    return tmp_path / "s1.db"


def test_the_journal_files_hold_no_policy_id_and_no_runner_text_while_the_session_runs(tmp_path, path):
    published: list[tuple[str, dict]] = []
    with _open(path, published) as session:
        session.start()
        trial = session.next_trial()
        assert trial is not None and trial.policy_id in POLICIES  # the session itself knows
        session.record_runner_result(trial.trial_id, False, 1.0, LEAK)
        raw = _bytes(tmp_path)
        assert b'"policy_id"' not in raw and b'"token"' not in raw  # `strings s1.db-wal | grep policy_id`
        assert b"10.1.2.3" not in raw and b"ConnectionClosedError" not in raw
        # what the operator channels get: the category and an id, nothing else
        assert OPERATOR_FORM.fullmatch(session.runner_message), session.runner_message
        kind, payload = published[-1]
        assert kind == "runner_result" and set(payload) == {"ok", "duration_s", "message"}
        assert payload["message"] == session.runner_message
        requested = next(p for k, p in published if k == "trial_requested")
        assert "policy_id" not in requested and "token" not in requested and requested["sealed"] is True
        # the journal's owner (the session) reads both back
        (mine,) = [e for e in session.events() if e.kind == "runner_result"]
        assert mine.payload["detail"] == LEAK
        assert next(e for e in session.events() if e.kind == "trial_requested").payload["policy_id"] == trial.policy_id


def test_a_resumed_session_replays_the_sealed_journal_and_the_audit_restores_everything(tmp_path, path):
    published: list[tuple[str, dict]] = []
    with _open(path, published) as session:
        session.start()
        first = session.next_trial()
    with _open(path, published) as session:  # replays the sealed rows
        assert session.next_trial() == first
        _fail_once_then_run(session, published)
        assert session.state.value == "finished"
    assert b'"policy_id"' not in _bytes(tmp_path)
    report = sim.audit_verified(path)
    assert any("revealed at the end" in note for note in report.notes)
    (failed,) = [e for e in report.record.events if e.kind == "runner_result" and not e.payload["ok"]]
    assert failed.payload["detail"] == LEAK and OPERATOR_FORM.fullmatch(failed.payload["message"])
    # anyone with the journal rows and the revealed key restores the policies, as the session had them
    contents = read_journal(path, raw=True)
    key = bytes.fromhex(next(e.payload["key"] for e in contents.events if e.kind == "key_revealed"))
    restored = unseal(contents.events, _config(), key, "s1")
    assert {e.payload["policy_id"] for e in restored if e.kind == "trial_requested"} == set(POLICIES)
    assert [e.payload for e in restored] == [e.payload for e in EvaluationSession.open(
        path, _config(), "s1", durable=False).events()]


def test_a_wrong_key_opens_nothing(path):
    with _open(path) as session:
        session.start()
        trial = session.next_trial()
        session.record_runner_result(trial.trial_id, False, 1.0, LEAK)
    contents = read_journal(path, raw=True)
    (result,) = unseal([e for e in contents.events if e.kind == "runner_result"], _config(), bytes(32), "s1")
    assert result.payload["detail"] is None


@pytest.mark.parametrize(("message", "ok", "shown"), [
    ("server error (error 3fa2c19b)", False, "server error (error 3fa2c19b)"),
    ("refused by the command guard (error 0123abcd): panda_joint4 above its position limit", False,
     "refused by the command guard (error 0123abcd)"),
    ("unreachable (error 00ff00ff); recorded in /data/rec/s1/trial_0003_attempt_1", False, "unreachable (error 00ff00ff)"),
    ("runner timed out", False, "runner timed out"),
    ("goal ended with status 6", False, "goal ended with status 6"),
    ("40 steps, ended by max_steps; recorded in /data/rec/s1/trial_0001_attempt_1", True, ""),
    ("", False, ""),
    ("server error (error 3fa2c19b) 'pi0_fast_droid'", False, "server error (error 3fa2c19b)"),
    ("server error (error nothex!)", False, None),
    (LEAK, False, None),
])
def test_only_a_category_and_an_id_are_shown(message, ok, shown):
    text = operator_text(message, ok)
    if shown is None:
        assert OPERATOR_FORM.fullmatch(text), text
    else:
        assert text == shown
