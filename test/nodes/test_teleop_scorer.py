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
from nodes_support import operator_keys, write_config

pytestmark = pytest.mark.usefixtures("ros_env")

LIB = pathlib.Path(__file__).resolve().parents[2] / "build" / "ros" / "install" / "lib" / "evalstop"


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
    term.expect(r"progress must be a number in \[0, 1\]; found '2'")
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
        # 15 Hz and 2000 steps: a rollout lasts until the operator ends it
        runner = start_node("policy_runner", params={"servers_file": str(servers), "max_steps": 2000,
                                                     "timeout": 600.0, "key_file": str(clients["auto:runner"])})
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
        runner.wait_for(r"trial 2: rollout failed: emergency stop; robot stopped")
        term.type("x off")
        term.expect(r"emergency stop release: emergency stop released")
        term.type("q")
        assert term.close() == 0
        assert "policy_a" not in term.screen and "policy_b" not in term.screen
    paused = next(e for e in read_journal(tmp_path / "tty.db").events if e.kind == "paused")
    assert paused.payload["auth"]["operator"] == "auto:runner", "the runner's emergency-stop pause is signed"
