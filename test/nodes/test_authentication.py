"""Authenticated scores and controls over DDS: a rogue node that knows the token gets nothing accepted.

The rogue reads ``trial_request`` (so it has the pending trial's token) and tries a score
(unsigned, signed with its own unlisted key, and signed as the real operator with a wrong key), a
void, a pause and an abort: each is refused with a clear reason, counted in ``/diagnostics`` and
journaled (``message_rejected``).  The real operator's signed score is accepted and its ack is
signed for it; a replayed copy of that very score message is refused.  Every message is re-sent
until answered (Fast DDS may drop one right after discovery).
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest
from nodes_support import launch_default, operator_keys, write_config

pytestmark = pytest.mark.usefixtures("ros_env")


class Operator:
    """The probe acting as one client: publishes scores and calls services, waiting for the answers."""

    def __init__(self, probe: Any, acks: list[Any]) -> None:
        from evalstop.msg import TrialScore

        from evalstop_ros import qos

        self.probe, self.acks = probe, acks
        self.scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)

    def ack_of(self, msg: Any) -> Any:
        """The first score_ack answering ``msg`` (same trial, scorer and counter), if any."""
        return next((a for a in self.acks if (a.trial_id, a.scorer, a.counter) == (msg.trial_id, msg.scorer[:64],
                                                                                   msg.counter)), None)

    def publish(self, msg: Any, sign: Any = None, timeout: float = 30.0) -> Any:
        """Publish ``msg`` (re-signed by ``sign(msg)`` before every send) until it is answered; the ack."""
        deadline = time.monotonic() + timeout
        while True:
            if sign is not None:
                sign(msg)
            self.scores.publish(msg)
            try:
                return self.probe.spin_until(lambda: self.ack_of(msg), 2.0, "a score_ack")
            except pytest.fail.Exception:
                if time.monotonic() > deadline:
                    raise

    def call(self, srv_type: Any, name: str, request: Any, sign: Any = None, timeout: float = 30.0) -> Any:
        """Call ``name`` (``request`` re-signed by ``sign(request)`` before every send) until answered."""
        client = self.probe.node.create_client(srv_type, name)
        self.probe.spin_until(client.service_is_ready, timeout, f"service {name}")
        deadline = time.monotonic() + timeout
        while True:
            if sign is not None:
                sign(request)
            future = client.call_async(request)
            try:
                self.probe.spin_until(future.done, 3.0, f"response of {name}")
                return future.result()
            except pytest.fail.Exception:
                if time.monotonic() > deadline:
                    raise


def _session_values(arrays: list[Any]) -> dict[str, str]:
    """The values of the latest ``evaluation_manager: session`` diagnostic."""
    for array in reversed(arrays):
        for status in array.status:
            if status.name.endswith(": session"):
                return {kv.key: kv.value for kv in status.values}
    return {}


def test_a_rogue_node_cannot_score_void_pause_or_abort(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from evalstop.msg import ScoreAck, SessionStatus, TrialRequest, TrialScore
    from evalstop.srv import CorrectScore, SessionControl

    from evalstop_ros import qos
    from evalstop_ros.audit import audit
    from evalstop_ros.session import read_journal
    from evalstop_ros.session.auth import Signer, new_keys, read_keys

    manager_keys, clients = operator_keys(tmp_path, "alice")
    alice = Signer.from_file(clients["alice"])
    mallory = Signer("mallory", new_keys(["mallory"])["mallory"])  # a key the manager does not list
    fake_alice = Signer("alice", new_keys(["alice"])["alice"])  # the operator's name, a wrong key
    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    acks = probe.collect(ScoreAck, "score_ack", qos.SCORE_ACK_QOS)
    diagnostics = probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "auth", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "exit_on_finish": True, "operator_keys_file": str(manager_keys)})
    manager.wait_for(r"authentication on: 1 authorized operator\(s\) \(alice\)")
    assert manager_keys.read_text().split()[-1] not in manager.output, "a key is never logged"
    trial = probe.spin_until(lambda: next((r for r in requests if r.trial_id == 1), None), 30.0, "trial 1")
    probe.spin_until(lambda: any(s.pending_trial_id == 1 and s.state_name.endswith("awaiting_score")
                                 for s in statuses), 30.0, "trial 1 run")
    client = Operator(probe, acks)

    def score(**fields: Any) -> Any:
        return TrialScore(trial_id=1, token=trial.token, success=True, progress=1.0, **fields)

    # -- the rogue: knows the token, has no valid key ---------------------------------------------
    unsigned = client.publish(score(scorer="alice"))
    assert not unsigned.accepted and unsigned.mac == ""
    assert unsigned.reason == "unauthenticated: the trial_score of operator 'alice' carries no signature"
    unknown = client.publish(score(), lambda m: mallory.sign("trial_score", "auth", m))
    assert not unknown.accepted
    assert unknown.reason == "unauthorized: operator 'mallory' is not in the manager's key file"
    forged = client.publish(score(), lambda m: fake_alice.sign("trial_score", "auth", m))
    assert not forged.accepted and forged.reason.startswith("unauthenticated: the signature of operator 'alice'")
    void = client.call(CorrectScore, "correct_score", CorrectScore.Request(
        trial_id=1, action=CorrectScore.Request.ACTION_VOID, reason="rogue", scorer="alice"))
    assert not void.ok and void.message.startswith("unauthenticated") and void.mac == ""
    pause = client.call(SessionControl, "session_control", SessionControl.Request(
        command=SessionControl.Request.COMMAND_PAUSE, reason="rogue"),
        lambda r: mallory.sign("session_control", "auth", r))
    assert not pause.ok and pause.message.startswith("unauthorized: operator 'mallory'")
    abort = client.call(SessionControl, "session_control", SessionControl.Request(
        command=SessionControl.Request.COMMAND_ABORT, reason="rogue"),
        lambda r: fake_alice.sign("session_control", "auth", r))
    assert not abort.ok and abort.message.startswith("unauthenticated: the signature")
    assert statuses[-1].state == SessionStatus.STATE_RUNNING

    # -- the real operator: accepted, and the ack is signed for this very message ------------------
    real = score(notes="by alice")
    accepted = client.publish(real, lambda m: alice.sign("trial_score", "auth", m))
    assert accepted.accepted, accepted.reason
    assert alice.verify_answer("trial_score", "auth", real, accepted)
    assert not alice.verify_answer("trial_score", "auth", real, forged)
    # a replayed copy of the operator's own valid message (same counter and MAC) is refused
    replay = score(notes="by alice")
    replay.scorer, replay.counter, replay.mac = real.scorer, real.counter, real.mac
    before = len(acks)
    client.scores.publish(replay)
    refused = probe.spin_until(lambda: next((a for a in acks[before:] if a.counter == real.counter
                                             and not a.accepted), None), 20.0, "the replay's refusal")
    assert refused.reason.startswith(f"replayed: counter {real.counter} of operator 'alice'")

    values = probe.spin_until(lambda: (v := _session_values(diagnostics)) and int(v["messages_rejected"]) >= 7
                              and v, 20.0, "the refusals in /diagnostics")
    assert values["authentication"] == "on (1 operators)"
    assert int(values["messages_rejected_replay"]) >= 1 and int(values["messages_rejected_unsigned"]) >= 2
    assert int(values["messages_rejected_unknown_operator"]) >= 2 and int(values["messages_rejected_bad_mac"]) >= 2

    # the operator ends the session (signed; its answer is signed too)
    end = SessionControl.Request(command=SessionControl.Request.COMMAND_ABORT, reason="done")
    answer = client.call(SessionControl, "session_control", end, lambda r: alice.sign("session_control", "auth", r))
    assert answer.ok and alice.verify_answer("session_control", "auth", end, answer)
    assert manager.wait() == 0
    assert manager.output.count("refused:") <= 10 + 2  # rate-limited warnings

    events = read_journal(tmp_path / "journals" / "auth.db").events
    rejected = [e for e in events if e.kind == "message_rejected"]
    reasons = " | ".join(e.payload["reason"] for e in rejected)
    for text in ("carries no signature", "'mallory' is not in the manager's key file", "does not verify",
                 "replayed"):
        assert text in reasons
    assert {e.payload["message"] for e in rejected} == {"trial_score", "correct_score", "session_control"}
    assert all(len(str(e.payload)) < 2048 for e in rejected)
    scored = [e for e in events if e.kind == "score_accepted"]
    assert len(scored) == 1 and scored[0].payload["submission"]["operator"] == "alice"
    assert scored[0].payload["auth"]["operator"] == "alice" and scored[0].payload["auth"]["counter"] == real.counter
    assert not any(e.kind in ("paused", "void") for e in events)
    aborted = next(e for e in events if e.kind == "aborted")
    assert aborted.payload["reason"] == "done" and aborted.payload["auth"]["operator"] == "alice"
    # the audit, given the operators' keys, verifies the signed score and counts the refusals
    report = audit(tmp_path / "journals" / "auth.db", operator_keys=read_keys(manager_keys))
    assert report.verified, [v.message for v in report.violations]
    assert "1 signed score(s) verified with the operators' keys" in report.notes
    assert any(note.startswith(f"{len(rejected)} message(s) refused before reaching the session")
               for note in report.notes)


def test_bad_key_files_stop_the_nodes_with_a_clear_line(start_node: Any, tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session.auth import new_keys, write_keys

    keys = new_keys(["alice", "bob"])
    broken = tmp_path / "operators.keys"
    broken.write_text(f"alice {keys['alice'].hex()}\nbob {keys['bob'].hex()[:20]}\n")  # bob's key: 10 bytes
    manager = start_node("evaluation_manager", params={
        "config_file": str(write_config(tmp_path / "session.yaml")), "session_id": "bad",
        "journal_dir": str(tmp_path), "operator_keys_file": str(broken)})
    assert manager.wait() == 1
    manager.wait_for(rf"cannot start: key file '{broken}', line 2: the key of 'bob' has 10 bytes; at least 16 needed")
    assert keys["alice"].hex() not in manager.output and "Traceback" not in manager.output
    both = write_keys(tmp_path / "both.key", keys)  # a client's file must name one operator
    terminal = start_node("teleop_scorer", params={"key_file": str(both)})
    assert terminal.wait() == 2
    terminal.wait_for(r"invalid parameters: key file .*both.key' must hold exactly one `OPERATOR HEXKEY` line; found 2")
    assert keys["bob"].hex() not in terminal.output


def test_the_terminal_ignores_forged_acks(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    """No manager at all: a rogue publishes the trial and answers every score with forged acks."""
    import subprocess

    from evalstop.msg import ScoreAck, TrialRequest, TrialScore

    from evalstop_ros import qos
    from evalstop_ros.session.auth import message_fields, new_keys, sign

    _, clients = operator_keys(tmp_path, "alice")
    wrong_key = new_keys(["alice"])["alice"]
    requests = probe.node.create_publisher(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    acks = probe.node.create_publisher(ScoreAck, "score_ack", qos.SCORE_ACK_QOS)
    scores: list[Any] = []

    def forge(msg: TrialScore) -> None:
        scores.append(msg)
        unsigned = ScoreAck(session_id="s9", trial_id=msg.trial_id, accepted=True, scorer=msg.scorer,
                            counter=msg.counter)
        acks.publish(unsigned)
        signed = ScoreAck(session_id="s9", trial_id=msg.trial_id, accepted=True, scorer=msg.scorer,
                          counter=msg.counter)  # signed like the manager would, with a key that is not alice's
        signed.mac = sign(wrong_key, "trial_score", "s9", msg.scorer, msg.counter, message_fields(signed))
        acks.publish(signed)

    probe.node.create_subscription(TrialScore, "trial_score", forge, qos.SCORE_QOS)
    terminal = start_node("teleop_scorer", params={"key_file": str(clients["alice"]), "ack_timeout": 1.0,
                                                   "max_sends": 3}, stdin=subprocess.PIPE)
    request = TrialRequest(session_id="s9", trial_id=1, round=1, attempt=1, label="X", task="push",
                           initial_condition="c0", reset_instructions="Block at spot 0.", token="t0k")
    probe.spin_until(lambda: requests.get_subscription_count() > 0, 20.0, "the terminal")
    requests.publish(request)
    probe.spin_until(lambda: "== trial 1 (round 1) -- policy label X ==" in terminal.output, 20.0, "the trial shown")
    assert terminal.proc.stdin is not None
    terminal.proc.stdin.write(b"s\n")
    terminal.proc.stdin.flush()
    probe.spin_until(lambda: "trial 1: NOT recorded" in terminal.output, 30.0, "the terminal to give up")
    assert len(scores) >= 1 and all(s.scorer == "alice" and s.mac for s in scores), "every send is signed"
    assert len({s.counter for s in scores}) == len(scores), "every send carries a fresh counter"
    assert "recorded: success" not in terminal.output
    terminal.wait_for(r"trial 1: NOT recorded, the manager does not answer; score it again later \(\d+ "
                      r"unauthenticated answers ignored so far")
    terminal.proc.stdin.write(b"q\n")
    terminal.proc.stdin.close()
    assert terminal.wait() == 0


def test_real_robots_are_signed_by_default_in_the_launch_file() -> None:
    assert {robot: launch_default("eval.launch.py", "allow_unsigned", robot)
            for robot in ("sim", "sim_policy", "droid", "widowx")} == {
        "sim": "true", "sim_policy": "true", "droid": "false", "widowx": "false"}
    text = (pathlib.Path(__file__).resolve().parents[2] / "launch" / "eval.launch.py").read_text()
    assert "'allow_unsigned': LaunchConfiguration('allow_unsigned')," in text  # passed to the manager


def test_without_keys_and_allow_unsigned_false_the_manager_refuses_to_start(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    import re

    config = write_config(tmp_path / "session.yaml", n_max=4,
                          metrics=[{"name": "success", "method": "nscore", "alpha": 0.05}])
    params = {"config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
              "journal_fsync": False, "exit_on_finish": True, "exit_linger": 0.2}
    refused = start_node("evaluation_manager", params={**params, "allow_unsigned": False})
    assert refused.wait() == 2
    fatal = [line for line in refused.output.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and re.search(r"invalid parameters: no `operator_keys_file`, and `allow_unsigned` is "
                                         r"false .*`evalstop keys new`.*allow_unsigned:=true", fatal[0]), refused.output
    assert not (tmp_path / "journals").exists()  # refused before any session was opened
    keys, _ = operator_keys(tmp_path, "alice")
    signed = start_node("evaluation_manager", params={**params, "allow_unsigned": False,
                                                      "operator_keys_file": str(keys), "auto_start": False})
    signed.wait_for(r"authentication on: 1 authorized operator")
