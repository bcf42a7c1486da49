"""Authenticated requests (evalstop_ros.session.auth) and their journaling by the session."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.auth import AuthError, Gate, Signer, new_keys, read_identity, read_keys, write_keys


class _Message:
    """The rosidl message API the signer reads: the field names (types are not needed here)."""

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {f.name: "" for f in dataclasses.fields(cls)}


@dataclasses.dataclass
class Score(_Message):
    """Stands in for a TrialScore (a mapping-like record with the same field names)."""

    trial_id: int = 1
    token: str = "t0k"
    success: bool = True
    progress: float = 0.5
    preference: str = ""
    notes: str = ""
    scorer: str = ""
    instruction: str = ""
    pair_invalid: bool = False
    counter: int = 0
    mac: str = ""


@dataclasses.dataclass
class Ack(_Message):
    session_id: str = "s1"
    trial_id: int = 1
    accepted: bool = True
    reason: str = ""
    scorer: str = ""
    counter: int = 0
    mac: str = ""


@pytest.fixture
def keys() -> dict[str, bytes]:
    return new_keys(["alice", "auto:runner"])


def test_key_files_round_trip_owner_only(tmp_path: pathlib.Path, keys: dict[str, bytes]) -> None:
    path = write_keys(tmp_path / "keys.txt", keys)
    assert os.stat(path).st_mode & 0o077 == 0
    assert read_keys(path) == keys
    alice = write_keys(tmp_path / "alice.key", {"alice": keys["alice"]})
    assert read_identity(alice) == ("alice", keys["alice"])
    with pytest.raises(AuthError, match="exactly one"):
        read_identity(path)


@pytest.mark.parametrize(("text", "problem"), [
    ("alice\n", "expected `OPERATOR HEXKEY`"),
    ("alice zz\n", "not hexadecimal"),
    ("alice 00ff\n", "at least 16"),
    ("al ice 00\n", "expected"),
    ("a/b " + "00" * 16 + "\n", "operator id"),
    ("# only a comment\n", "lists no operator"),
    (f"alice {'00' * 16}\nalice {'11' * 16}\n", "listed twice"),
])
def test_malformed_key_files_are_refused_naming_the_line(tmp_path: pathlib.Path, text: str, problem: str) -> None:
    path = tmp_path / "keys.txt"
    path.write_text(text)
    with pytest.raises(AuthError, match=problem) as err:
        read_keys(path)
    assert "11" * 16 not in str(err.value)  # a key is never echoed


def test_missing_key_file_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(AuthError, match="cannot read key file"):
        read_keys(tmp_path / "nope.txt")


def test_a_signed_request_passes_once_and_every_forgery_or_replay_is_refused(keys: dict[str, bytes]) -> None:
    gate, alice = Gate(keys), Signer("alice", keys["alice"])
    score = Score()
    alice.sign("trial_score", "s1", score)
    assert score.scorer == "alice" and score.counter > 0 and len(score.mac) == 64
    check = gate.check("trial_score", "s1", score)
    assert check.ok and check.record == {"kind": "trial_score", "operator": "alice", "counter": score.counter,
                                         "mac": score.mac}
    # the same message again: a replay
    again = gate.check("trial_score", "s1", score)
    assert not again.ok and again.reason.startswith("replayed")
    # journaled counters count too (a restarted manager): a fresh gate with the session's last counter
    assert not Gate(keys).check("trial_score", "s1", score, last_counter=score.counter).ok
    # altered content, another session, another kind, unknown operator, no signature
    alice.sign("trial_score", "s1", score)
    score.progress = 1.0
    assert gate.check("trial_score", "s1", score).reason.startswith("unauthenticated: the signature")
    alice.sign("trial_score", "s1", score)
    assert not gate.check("trial_score", "s2", score).ok
    assert not gate.check("correct_score", "s1", score).ok
    mallory = Signer("mallory", new_keys(["mallory"])["mallory"])
    mallory.sign("trial_score", "s1", score)
    assert gate.check("trial_score", "s1", score).reason == (
        "unauthorized: operator 'mallory' is not in the manager's key file")
    forged = Signer("alice", new_keys(["alice"])["alice"])  # right name, wrong key
    forged.sign("trial_score", "s1", score)
    assert not gate.check("trial_score", "s1", score).ok
    assert gate.check("trial_score", "s1", Score(scorer="alice")).reason.startswith("unauthenticated: the trial_score")
    assert gate.rejected == {"unsigned": 1, "unknown_operator": 1, "bad_mac": 4, "replay": 1}
    assert gate.rejected_total == 7


def test_answers_are_bound_to_their_request(keys: dict[str, bytes]) -> None:
    gate, alice = Gate(keys), Signer("alice", keys["alice"])
    score = Score()
    alice.sign("trial_score", "s1", score)
    check = gate.check("trial_score", "s1", score)
    ack = Ack(scorer="alice", counter=score.counter)
    ack.mac = gate.sign_answer("trial_score", "s1", check, ack)
    assert alice.verify_answer("trial_score", "s1", score, ack)
    ack.accepted = False  # altered answer
    assert not alice.verify_answer("trial_score", "s1", score, ack)
    ack.accepted = True
    later = Score()
    alice.sign("trial_score", "s1", later)  # another request: the old answer does not answer it
    assert not alice.verify_answer("trial_score", "s1", later, ack)
    assert not alice.verify_answer("trial_score", "s1", score, Ack(scorer="alice", counter=score.counter))


def test_counters_increase_across_restarts(keys: dict[str, bytes]) -> None:
    first = Signer("alice", keys["alice"])
    sent = [first.next_counter() for _ in range(1000)]
    assert sent == sorted(set(sent))
    assert Signer("alice", keys["alice"]).next_counter() > sent[0]


def test_without_keys_everything_passes_unsigned() -> None:
    gate = Gate(None)
    check = gate.check("trial_score", "s1", Score())
    assert not gate.enabled and check.ok and check.record is None
    assert gate.sign_answer("trial_score", "s1", check, Ack()) == ""


def test_the_session_journals_each_request_counter_and_replays_it(journal_path: pathlib.Path,
                                                                  keys: dict[str, bytes]) -> None:
    gate, alice = Gate(keys), Signer("alice", keys["alice"])
    config = sim.make_config()
    with EvaluationSession.open(journal_path, config, "s1", durable=False) as session:
        session.start()
        trial = session.next_trial()
        session.record_runner_result(trial.trial_id, True, 1.0)
        score = Score(trial_id=trial.trial_id, token=trial.token)
        alice.sign("trial_score", "s1", score)
        check = gate.check("trial_score", "s1", score, last_counter=session.auth_counter("alice"))
        with session.authenticated(check.record):
            assert session.submit_score(trial.trial_id, trial.token, True, 0.5, "alice").accepted
        accepted = [e for e in session.events() if e.kind == "score_accepted"][-1]
        assert accepted.payload["auth"] == check.record
        # a request that changes nothing (resume while running) is noted with its counter
        control = Score()
        alice.sign("session_control", "s1", control)
        check = gate.check("session_control", "s1", control, last_counter=session.auth_counter("alice"))
        with session.authenticated(check.record):
            session.resume()
        noted = session.events()[-1]
        assert noted.kind == "request_noted" and noted.payload["auth"]["counter"] == control.counter
        # a refused message is journaled in bounded form, without moving the counter
        session.reject_message("trial_score", "unauthorized: operator 'mallory' is not in the manager's key file",
                               {"operator": "mallory", "counter": 10**30, "fields": {}})
        last = control.counter
        assert session.auth_counter("alice") == last and session.auth_counter("mallory") == 0
    with EvaluationSession.open(journal_path, config, "s1", durable=False) as resumed:
        assert resumed.auth_counter("alice") == last
        # the replayed score is refused by a freshly started gate that asks the resumed session
        assert not Gate(keys).check("trial_score", "s1", score, last_counter=resumed.auth_counter("alice")).ok


def _signed_session(path: pathlib.Path, counters: list[int]) -> None:
    """A session whose scores are journaled with ``counters`` (one per scored trial, as the gate passed them)."""
    with EvaluationSession.open(path, sim.make_config(), "s1", durable=False) as session:
        session.start()
        scored = 0
        while scored < len(counters):
            session.next_trial()
            record = None if session.status().awaiting == "run" else {  # the runner's result is not a request
                "kind": "trial_score", "operator": "alice", "counter": counters[scored], "mac": "00" * 32}
            with session.authenticated(record):
                outcome = sim.step(session, {"pi0": 0.3, "pi1": 0.7})
            assert outcome is not None
            scored += record is not None
        session.reject_message("trial_score", "unauthorized: operator 'mallory' is not in the manager's key file",
                               {"operator": "mallory", "counter": 1, "fields": {}})
        session.abort("end of the test")


def test_the_audit_counts_refusals_and_flags_an_accepted_replay(tmp_path: pathlib.Path) -> None:
    from evalstop_ros.audit import audit

    _signed_session(tmp_path / "good.db", [10, 11, 12, 13])
    report = sim.audit_verified(tmp_path / "good.db")
    assert "requests signed by operator(s) alice (counters increase)" in report.notes
    assert any("1 message(s) refused before reaching the session" in note for note in report.notes)

    _signed_session(tmp_path / "replayed.db", [10, 11, 11, 13])  # the third score reused a counter
    report = audit(tmp_path / "replayed.db")
    (violation,) = [v for v in report.violations if v.code == "auth_replay"]
    assert violation.trial_ids == (3,) and "counter 11 of operator 'alice' is not above its earlier 11" in violation.message


def test_the_audit_checks_each_signed_score_with_the_operator_keys(tmp_path: pathlib.Path, keys: dict[str, bytes],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Signed scores journaled as signed verify; one whose content differs from what was signed does not."""
    from evalstop_ros.audit import audit

    gate, alice = Gate(keys), Signer("alice", keys["alice"])
    path = tmp_path / "signed.db"
    with EvaluationSession.open(path, sim.make_config(), "s1", durable=False) as session:
        session.start()
        for trial_id in range(1, 5):
            trial = session.next_trial()
            session.record_runner_result(trial.trial_id, True, 1.0)
            score = Score(trial_id=trial.trial_id, token=trial.token, success=True, progress=0.5, notes="n")
            alice.sign("trial_score", "s1", score)
            check = gate.check("trial_score", "s1", score, last_counter=session.auth_counter("alice"))
            progress = 0.75 if trial_id == 3 else score.progress  # trial 3: journaled != signed
            with session.authenticated(check.record):
                assert session.submit_score(trial.trial_id, score.token, score.success, progress, score.scorer,
                                            score.notes).accepted
        session.abort("end of the test")
    report = audit(path, operator_keys=keys)
    assert [(v.code, v.trial_ids) for v in report.violations] == [("auth_mac_mismatch", (3,))]
    assert "the journaled score is not what operator 'alice' signed" in report.violations[0].message
    assert "3 signed score(s) verified with the operators' keys" in report.notes
    others = audit(path, operator_keys=new_keys(["alice"]))  # another key: nothing verifies
    assert {v.trial_ids for v in others.violations if v.code == "auth_mac_mismatch"} == {(1,), (2,), (3,), (4,)}
    assert not [v for v in audit(path).violations if v.code == "auth_mac_mismatch"]  # no keys: not checked
    # the command line: exit 1 naming the trial; a bad key file is a usage error
    from evalstop_ros.cli.main import main

    key_file = write_keys(tmp_path / "operators.keys", keys)
    assert main(["audit", str(path), "--operator-keys", str(key_file)]) == 1
    assert "VIOLATION auth_mac_mismatch: trial 3" in capsys.readouterr().out
    (tmp_path / "bad.keys").write_text("alice 00\n")
    assert main(["audit", str(path), "--operator-keys", str(tmp_path / "bad.keys")]) == 2
    assert "at least 16 needed" in capsys.readouterr().err


def test_a_flood_of_forged_oversized_messages_is_journaled_in_bounded_form(journal_path: pathlib.Path,
                                                                           keys: dict[str, bytes]) -> None:
    from evalstop_ros.session.auth import message_fields, summary

    gate, megabyte = Gate(keys), "x" * (1024 * 1024)
    with EvaluationSession.open(journal_path, sim.make_config(), "s1", durable=False) as session:
        session.start()
        before = len(session.events())
        for i in range(1000):
            forged = Score(token=megabyte, notes=megabyte, scorer=megabyte if i % 2 else "alice", counter=i,
                           mac="ab" * 32)
            check = gate.check("trial_score", "s1", forged)
            assert not check.ok and len(check.reason) < 300
            session.reject_message("trial_score", check.reason,
                                   summary(forged.scorer, forged.counter, message_fields(forged)))
        rejected = session.events()[before:]
        assert len(rejected) == 1000 and all(len(str(e.payload)) < 1024 for e in rejected)
        assert gate.rejected == {"unsigned": 0, "unknown_operator": 500, "bad_mac": 500, "replay": 0}


def test_a_score_held_for_its_turn_is_checked_with_the_operator_keys(tmp_path: pathlib.Path,
                                                                     keys: dict[str, bytes]) -> None:
    """Several runners: the operator's signature travels with the held score, the score entering later
    carries none (it is no request) and the audit verifies the session."""
    from evalstop_ros.audit import audit
    from evalstop_ros.session.driver import TrialDriver

    gate, alice = Gate(keys), Signer("alice", keys["alice"])
    path = tmp_path / "held.db"
    arms = ("arm_1/run_trial", "arm_2/run_trial")
    with EvaluationSession.open(path, sim.make_config(runner={"runners": list(arms)}), "s1", durable=False) as session:
        session.start()
        driver = TrialDriver(session, runners=arms)
        first, other = driver.dispatch()
        driver.run_done(first.trial, True, 1.0, runner=first.runner)
        driver.run_done(other.trial, True, 1.0, runner=other.runner)
        for trial in (other.trial, first.trial):  # the later trial first: held
            score = Score(trial_id=trial.trial_id, token=trial.token, success=True, progress=0.5)
            alice.sign("trial_score", "s1", score)
            check = gate.check("trial_score", "s1", score, last_counter=session.auth_counter("alice"))
            with session.authenticated(check.record):
                assert session.submit_score(trial.trial_id, score.token, score.success, score.progress,
                                            score.scorer).accepted
        session.abort("end of the test")
        driver.stop("aborted")
    report = audit(path, operator_keys=keys)
    assert report.verified, [v.message for v in report.violations]
    assert "2 signed score(s) verified with the operators' keys" in report.notes
