"""teleop_scorer driven through a real pseudo-terminal, against a live manager and sim_robot."""

from __future__ import annotations

import os
import pathlib
import pty
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from nodes_support import LIB, operator_keys, start_operator_arm, write_config

pytestmark = pytest.mark.usefixtures("ros_env")



class Terminal:
    """A process on the slave side of a pty; the test types on the master side and reads the screen."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.master = master
        self.screen = ""
        self._mark = 0

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.screen += os.read(self.master, 65536).decode(errors="replace").replace("\r\n", "\n")
            except OSError:  # the process closed the terminal
                time.sleep(timeout)

    def expect(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Wait for ``pattern`` in the output printed since the previous match; return the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.screen, self._mark)
            if found:
                self._mark = found.end()
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"no {pattern!r} on the terminal within {timeout} s; screen:\n{self.screen}")
            self._read(0.1)

    def seen(self, text: str, timeout: float = 20.0) -> None:
        """Wait until ``text`` is anywhere on the screen (printed before or after the last match)."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            if time.monotonic() > deadline:
                pytest.fail(f"no {text!r} on the terminal within {timeout} s; screen:\n{self.screen}")
            self._read(0.1)

    def type(self, line: str) -> None:
        """Type ``line`` and Enter."""
        os.write(self.master, line.encode() + b"\n")

    def close(self) -> int:
        """Wait for the process (SIGINT after 10 s) and return its exit code."""
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(10)
        self._read(0.1)
        os.close(self.master)
        return self.proc.returncode


@pytest.fixture
def terminal(ros_env: dict[str, str], namespace: str) -> Iterator[Any]:
    """Factory for the teleop_scorer terminal in the test's namespace."""
    opened: list[Terminal] = []

    def open_terminal(*params: str) -> Terminal:
        args = [arg for p in params for arg in ("-p", p)]
        term = Terminal([str(LIB / "teleop_scorer"), "--ros-args", "-r", f"__ns:={namespace}", *args], ros_env)
        opened.append(term)
        return term

    yield open_terminal
    for term in opened:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()


def test_operator_scores_notes_and_undoes_from_the_terminal(
        start_node: Any, terminal: Any, tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    manager_keys, clients = operator_keys(tmp_path, "alice")
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    manager_params = {"config_file": str(config), "session_id": "tty", "journal_dir": str(tmp_path),
                      "journal_fsync": False, "operator_keys_file": str(manager_keys)}
    manager = start_node("evaluation_manager", params=manager_params)
    # signed scores and undo (the key file names the operator); starts after trial 1 was issued: latched
    term = terminal(f"key_file:={clients['alice']}", "ack_timeout:=1.0")

    term.expect(r"waiting for a trial")
    label = term.expect(r"== trial 1 \(round 1\) -- policy label (\w+) ==").group(1)
    term.expect(r"reset:\s+Block at spot \d\.")
    manager.wait_for(rf"trial 1 \(label {label}\) run ok")
    term.expect(r"-- robot done: score trial 1 now")
    term.type("p 2")
    term.expect(r"progress must be a number in \[0, 1\] \(or 0-100%\); found '2'")
    term.type("p 0.4")
    term.expect(r"progress 0.4 for the next failure")
    term.type("n slipped at the end")
    term.type("f")
    term.expect(r"trial 1: recorded: success=0 progress=0.4")

    label2 = term.expect(r"== trial 2 \(round 1\) -- policy label (\w+) ==").group(1)
    assert label2 != label, "the two policies of a round carry different labels"
    manager.wait_for(rf"trial 2 \(label {label2}\) run ok")
    term.expect(r"-- robot done: score trial 2 now")
    term.type("s")
    term.expect(r"trial 2: recorded: success=1 progress=1")
    pending = term.expect(r"== trial (3) \(round 2\) -- policy label (\w+) ==")  # issued on trial 2's score
    term.type("u")
    term.expect(r"undo: voiding the last recorded score \(trial 2 from this terminal\); that trial will be run again")
    term.expect(r"undo: trial 2 voided")

    # the manager dies while the operator scores: the terminal re-sends until the restarted
    # manager (same session id: resumed from the journal) records the score
    manager.wait_for(rf"trial {pending.group(1)} \(label {pending.group(2)}\) run ok")
    term.seen(f"-- robot done: score trial {pending.group(1)} now")  # may have printed before the undo's answer
    manager.kill()
    term.type("s")
    term.expect(rf"no answer from the manager for trial {pending.group(1)} \(send 1\); sending again")
    restarted = start_node("evaluation_manager", params=manager_params)
    term.expect(rf"trial {pending.group(1)}: recorded: success=1 progress=1", timeout=30.0)
    restarted.wait_for(r"session tty resumed from its journal")

    term.type("q")
    assert term.close() == 0
    assert "policy_a" not in term.screen and "policy_b" not in term.screen, "the terminal must stay blinded"
    assert "[INFO]" not in term.screen, "no ROS log lines on the operator's screen"
    events = read_journal(tmp_path / "tty.db").events
    first = next(e for e in events if e.kind == "score_accepted" and e.trial_id == 1).payload["submission"]
    assert (first["operator"], first["notes"], first["progress"], first["success"]) == \
        ("alice", "slipped at the end", 0.4, False)
    void = next(e for e in events if e.kind == "void")
    assert (void.trial_id, void.payload["reason"]) == (2, "operator undo (by alice)")
    assert void.payload["auth"]["operator"] == "alice" and void.payload["auth"]["kind"] == "correct_score"
    signed = [e.payload["auth"]["counter"] for e in events if "auth" in e.payload]
    assert len(signed) >= 4 and signed == sorted(set(signed)), "each request signed with a fresh, increasing counter"
    assert not any(e.kind == "message_rejected" for e in events)
    assert any(e.kind == "score_accepted" and e.trial_id == int(pending.group(1)) for e in events)


def test_operator_ends_an_episode_and_presses_the_emergency_stop(
        start_node: Any, terminal: Any, tmp_path: pathlib.Path) -> None:
    import yaml

    from evalstop_ros.runner.server import PolicyServer
    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    manager_keys, clients = operator_keys(tmp_path, "alice", "auto:runner")
    with PolicyServer("good") as server:
        servers = tmp_path / "servers.yaml"
        servers.write_text(yaml.safe_dump({"policy_servers": {p: {"host": "127.0.0.1", "port": server.port}
                                                              for p in ("policy_a", "policy_b")}}))
        # 15 Hz and 2000 steps, and not ended when the sim's task is done (the good policy can
        # reach it within seconds): a rollout lasts until the operator ends it
        runner = start_node("policy_runner", params={"servers_file": str(servers), "max_steps": 2000,
                                                     "timeout": 600.0, "key_file": str(clients["auto:runner"]),
                                                     "sim.end_on_success": False})
        start_node("evaluation_manager", params={"config_file": str(config), "session_id": "tty",
                                                 "journal_dir": str(tmp_path), "journal_fsync": False,
                                                 "operator_keys_file": str(manager_keys)})
        term = terminal("ack_timeout:=1.0", f"key_file:={clients['alice']}")
        term.expect(r"== trial 1 \(round 1\) -- policy label \w+ ==")
        runner.wait_for(r"trial 1 \(attempt 1\): rollout started")
        term.expect(r"-- robot running trial 1 \(d = task done, x = EMERGENCY STOP\) --")
        term.type("s")
        term.expect(r"the robot is still running this trial: score it once it is done")
        term.type("d")
        term.expect(r"task done: episode will end after this step")
        runner.wait_for(r"trial 1: rollout done, \d+ steps, ended by operator")
        term.seen("-- robot done: score trial 1 now (s, or f [P]) --")  # before or after the runner's answer
        term.type("f 1")
        term.expect(r"warning: failure with progress 1")
        term.expect(r"trial 1: recorded: success=0 progress=1")

        term.expect(r"== trial 2 \(round 1\) -- policy label \w+ ==")
        runner.wait_for(r"trial 2 \(attempt 1\): rollout started")
        term.type("x")
        # the runner's answer and the paused session status arrive in either order
        term.expect(r"(?s)(EMERGENCY STOP: robot stopped; release with data=false.*\[session tty: PAUSED, "
                    r"1 trials scored\]|\[session tty: PAUSED, 1 trials scored\].*EMERGENCY STOP: robot stopped)")
        runner.wait_for(r"trial 2: rollout failed: emergency stop \(error [0-9a-f]{8}\); robot stopped")
        term.type("x off")
        term.expect(r"emergency stop release: emergency stop released")
        term.type("q")
        assert term.close() == 0
        assert "policy_a" not in term.screen and "policy_b" not in term.screen
    paused = next(e for e in read_journal(tmp_path / "tty.db").events if e.kind == "paused")
    assert paused.payload["auth"]["operator"] == "auto:runner", "the runner's emergency-stop pause is signed"


def test_operator_runs_an_ab_round_with_instruction_preference_and_validity(
        start_node: Any, terminal: Any, tmp_path: pathlib.Path) -> None:
    """Issue 11 / seed 001 §3.1: per A/B round the operator gives the instruction, both progress
    scores, a preference and an explanation, and may judge the pair not valid (it then counts
    nowhere); entries can be changed until the score is sent."""
    from evalstop_ros.session import load_config, read_journal
    from evalstop_ros.session.ab import ab_rounds

    config = write_config(tmp_path / "ab.yaml", scoring="operator", design="ab", blinding="per-round",
                          metrics=[{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}])
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    start_node("evaluation_manager", params={"config_file": str(config), "session_id": "ab", "journal_dir": str(tmp_path),
                                             "journal_fsync": False})
    term = terminal("scorer:=alice", "ack_timeout:=2.0")

    def score_round(number: int, first_id: int, *, valid: bool) -> None:
        first = term.expect(rf"== trial {first_id} \(round {number}\) -- policy label (\w+) ==").group(1)
        term.expect(rf"-- robot done: score trial {first_id} now")
        term.type("i stack the cup on the plate" if number == 1 else "i")
        term.expect(r"instruction for this round: 'stack the cup on the plate'" if number == 1
                    else r"instruction: the task shown")
        term.type("f 30%")  # RoboArena's 0-100 scale
        term.expect(rf"trial {first_id}: recorded: success=0 progress=0.3")
        second = term.expect(rf"== trial {first_id + 1} \(round {number}\) -- policy label (\w+) ==").group(1)
        term.expect(rf"-- robot done: score trial {first_id + 1} now")
        term.type(f"r {second}")
        term.type(f"r {first}")  # changed before sending: the last entry counts
        term.type(f"n {first} pushed more carefully")
        term.type("v no")
        term.expect(r"this round's pair is NOT valid")
        if valid:
            term.type("v yes")
            term.expect(r"this round's pair is valid")
        term.type("f 0.1")
        term.expect(rf"trial {first_id + 1}: recorded: success=0 progress=0.1")

    score_round(1, 1, valid=False)
    score_round(2, 3, valid=True)
    term.type("q")
    assert term.close() == 0

    events = read_journal(tmp_path / "ab.db").events
    submissions = {e.trial_id: e.payload["submission"] for e in events if e.kind == "score_accepted"}
    assert submissions[1]["instruction"] == submissions[2]["instruction"] == "stack the cup on the plate"
    assert submissions[2]["pair_invalid"] is True and "pair_invalid" not in submissions[4]
    assert "instruction" not in submissions[3]  # round 2: reset to the task shown
    rounds = ab_rounds(load_config(config), events)
    assert rounds.rounds == (2,) and rounds.n_invalid == 1
    assert rounds.data.tasks == ("Push the block onto the target.",)
    assert rounds.data.outcome.tolist() == [2]  # A (the first run) preferred


def test_operator_confirms_the_reset_before_the_robot_starts(
        start_node: Any, terminal: Any, tmp_path: pathlib.Path) -> None:
    """confirm_reset: the terminal asks "scene reset for trial N? [enter]" with the scene to set up,
    shows the round's labels, refuses a score before the run, and Enter starts the robot."""
    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    robot = start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    start_node("evaluation_manager", params={"config_file": str(config), "session_id": "tty",
                                             "journal_dir": str(tmp_path), "journal_fsync": False,
                                             "confirm_reset": True})
    term = terminal("scorer:=bob", "ack_timeout:=1.0")

    label = term.expect(r"== trial 1 \(round 1\) -- policy label (\w+) ==").group(1)
    labels = term.expect(r"round 1: labels (\w+), (\w+) -- this trial: (\w+)")
    assert label in labels.group(1, 2) and labels.group(3) == label and labels.group(1) < labels.group(2)
    condition = term.expect(r"initial condition: (c\d)").group(1)
    term.expect(rf"-- scene reset for trial 1\? \({condition}: Block at spot {condition[1:]}\.\) \[enter\] --")
    term.type("s")
    term.expect(r"the robot has not run this trial yet: reset the scene, press Enter")
    assert "rollout started" not in robot.output
    term.type("")
    term.expect(r"scene reset: trial 1: reset confirmed")
    robot.wait_for(r"trial 1 \(attempt 1\): rollout started")
    term.seen("-- robot done: score trial 1 now (s, or f [P]) --")
    term.type("s")
    term.expect(r"trial 1: recorded: success=1 progress=1")

    other = term.expect(r"== trial 2 \(round 1\) -- policy label (\w+) ==").group(1)
    term.expect(rf"round 1: labels {labels.group(1)}, {labels.group(2)} -- this trial: {other}")
    term.expect(r"-- scene reset for trial 2\? \(c\d: Block at spot \d\.\) \[enter\] --")
    term.type("u")  # undo trial 1 while trial 2 waits for its reset: the terminal says what runs it again
    term.expect(rf"undo: trial 1 voided; it runs again as trial 3 after the pending trial 2 \(label {label}, "
                rf"round 1, condition {condition}\)")
    term.type("")
    term.expect(r"scene reset: trial 2: reset confirmed")
    term.type("q")
    assert term.close() == 0
    assert "policy_a" not in term.screen and "policy_b" not in term.screen, "the terminal must stay blinded"
    resets = [(e.trial_id, e.payload["attempt"]) for e in read_journal(tmp_path / "tty.db").events
              if e.kind == "reset_confirmed"]
    assert resets == [(1, 1), (2, 1)]


def test_a_lost_answer_to_the_reset_confirmation_is_re_sent(
        start_node: Any, terminal: Any, tmp_path: pathlib.Path) -> None:
    """The manager applies the confirmation but its answer is lost: the terminal sends it again and
    gets "already confirmed" (idempotent); the robot runs the trial once."""
    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    robot = start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    manager = start_node(str(pathlib.Path(__file__).with_name("lossy_manager.py")), params={
        "config_file": str(config), "session_id": "tty", "journal_dir": str(tmp_path), "journal_fsync": False,
        "confirm_reset": True})
    term = terminal("ack_timeout:=1.0")
    term.expect(r"-- scene reset for trial 1\? \(c\d: Block at spot \d\.\) \[enter\] --")
    term.type("")
    manager.wait_for(r"lossy_manager: response dropped: trial 1: reset confirmed")
    term.expect(r"scene reset: trial 1: reset already confirmed")
    term.seen("-- robot done: score trial 1 now (s, or f [P]) --")
    term.type("s")
    term.expect(r"trial 1: recorded: success=1 progress=1")
    term.type("q")
    assert term.close() == 0
    assert len(re.findall(r"trial 1 \(attempt 1\): rollout started", robot.output)) == 1
    events = read_journal(tmp_path / "tty.db").events
    assert [(e.trial_id, e.payload["attempt"]) for e in events if e.kind == "reset_confirmed"] == [(1, 1)]


#: Bytes a terminal passes on as typed (no line-discipline control characters: ^C, ^D, ^U ... act on the tty).
TYPED = bytes([0x1B, *range(0x20, 0x7F), *range(0x80, 0x100)])


@pytest.mark.parametrize("locale", [{"LC_ALL": "C.UTF-8"}, {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"},
                                    {"LC_ALL": "C", "PYTHONIOENCODING": "latin-1"}], ids=["utf8", "ascii", "latin1"])
def test_random_bytes_in_every_command_in_any_locale(start_node: Any, tmp_path: pathlib.Path, ros_env: dict[str, str],
                                                     namespace: str, locale: dict[str, str]) -> None:
    """Every command with random bytes after it (notes, preference, instruction, progress, undo reason, a
    random word) in a UTF-8, an ASCII and a Latin-1 terminal: the terminal answers each and stays up; a
    note with a byte that is not UTF-8 reaches the journal with U+FFFD in its place."""
    import random

    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "operator.yaml", scoring="operator")
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    start_node("evaluation_manager", params={"config_file": str(config), "session_id": "tty",
                                             "journal_dir": str(tmp_path), "journal_fsync": False})
    term = Terminal([str(LIB / "teleop_scorer"), "--ros-args", "-r", f"__ns:={namespace}", "-p", "ack_timeout:=1.0"],
                    {**ros_env, **locale})
    try:
        term.expect(r"== trial 1 \(round 1\) -- policy label \w+ ==")
        term.expect(r"-- robot done: score trial 1 now")
        rng = random.Random(str(locale))
        for command in ("n", "r", "i", "p", "f", "v", "u", "h", "", "zz"):
            for _ in range(3):
                junk = bytes(rng.choice(TYPED) for _ in range(rng.randrange(1, 40)))
                os.write(term.master, command.encode() + b" " + junk + b"\n")
        for reset in ("r =", "i", "v yes"):  # (a random preference, an instruction outside design ab: refused)
            term.type(reset)
        os.write(term.master, b"n slipped \xff at \xc3( the end\n")
        term.type("f 0.5")
        term.expect(r"trial 1: recorded: success=0 progress=0.5", timeout=30.0)
        term.type("q")
        assert term.close() == 0, term.screen
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
    assert "Traceback" not in term.screen and "Error" not in term.screen, term.screen
    first = next(e for e in read_journal(tmp_path / "tty.db").events
                 if e.kind == "score_accepted" and e.trial_id == 1).payload["submission"]
    assert first["notes"] == "slipped \ufffd at \ufffd( the end"


def test_a_late_terminal_sees_every_open_trial_of_two_arms_and_scores_either(
        start_node: Any, terminal: Any, probe: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import TrialRequest

    from evalstop_ros import qos
    from evalstop_ros.session import read_journal

    arms = ("arm_1/run_trial", "arm_2/run_trial")
    config = write_config(tmp_path / "arms.yaml", scoring="operator", runner={"runners": list(arms)})
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "arms", "journal_dir": str(tmp_path), "journal_fsync": False})
    probe.hear()

    def requested(trial_id: int) -> None:
        probe.spin_until(lambda: any(r.trial_id == trial_id for r in requests), 60.0, f"trial {trial_id} requested")

    start_operator_arm(start_node, namespace, "arm_1", 240.0)  # holds trial 1 for longer than the test
    requested(1)
    start_operator_arm(start_node, namespace, "arm_2", 0.2)
    requested(3)  # round 2 on the second arm, published after trial 1's request
    manager.wait_for(r"trial 3 \(label \w+\) run ok", timeout=60.0)
    term = terminal("ack_timeout:=2.0")  # joins after both trials were requested
    term.seen("== trial 1 (round 1)", timeout=30.0)
    term.seen("== trial 3 (round 2)", timeout=30.0)
    term.type("t 7")
    term.expect(r"t N: N one of the open trials \(1, 3(, 4)?\); found '7'")  # 4: if the fast arm went on
    term.type("t 3")
    term.expect(r"scoring trial 3 next")
    term.type("s")
    # held for its turn; under load the first answer may come after a re-send, which is then a duplicate
    term.expect(r"trial 3: (recorded: success=1 progress=1 \(trial 3: score held until trial 1 is scored"
                r"|already recorded)", timeout=30.0)
    term.type("t 1")
    term.expect(r"scoring trial 1 next")
    term.type("q")
    assert term.close() == 0
    held = [e.trial_id for e in read_journal(tmp_path / "arms.db").events if e.kind == "score_held"]
    assert held == [3]
