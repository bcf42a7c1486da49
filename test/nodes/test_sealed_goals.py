"""Blind on the wire, through ROS: sealed runner goals against leaking openpi servers.

Two openpi servers put their policy's name and checkpoint in their metadata and every reply; the
manager and policy_runner share a runner key (``goal_key_file``). Before the key is revealed:

* a node in another namespace that starts serving the manager's hidden ``run_trial/_action/send_goal``
  (and never answers) beside the runner pauses the session, with a WARN on ``/diagnostics`` naming
  both nodes; any goal it received before that carries a label and a seal, no policy, and does not
  open without the runner key (goals in Fast DDS's shared memory are covered by ``nobody`` below);
* a spy subscribed to every topic, hidden ones (the action's feedback and status) included, hears no
  policy id, checkpoint or server address;
* user ``nobody`` (``setpriv``) reading every file it can under the lab's directory (journal, keys,
  servers file, runner error log), ``/dev/shm`` (Fast DDS's shared-memory segments), ``/tmp`` and every
  process's command line finds none of them either.

Positive controls: ``nobody`` did read Fast DDS's segments (0644, the environment's measured fact), and
after the reveal the spy hears the real ids. (Which bytes a segment holds at one instant is no control:
Fast DDS re-uses its buffers, and on a loaded machine a canary that a talker of its own published in
clear to this test's probe twenty times a second was missing from every segment for two minutes.)
The audit re-derives every journaled goal seal from the revealed key and verifies the session.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from nodes_support import launch_default, write_config
from runner_support import free_port, start_openpi_server, stop

pytestmark = pytest.mark.usefixtures("ros_env")

#: Run as user nobody: which of the needles (JSON on stdin: not on its own command line) appear in which
#: readable file under the roots (argv[1:]) or in which process's command line (the pids in $SKIP_PIDS are the stand-ins of remote
#: policy servers, on another machine in a lab).
FIND_AS_NOBODY = r"""
import json, os, sys
needles = [n.encode() for n in json.loads(sys.stdin.read())]
skip = set(os.environ.get("SKIP_PIDS", "").split())
found = {}
segments = 0  # Fast DDS shared-memory segments read (not empty)
def scan(where, data):
    for needle in needles:
        if needle in data:
            found.setdefault(needle.decode(), []).append(where)
for root in sys.argv[1:]:
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith("/tmp/bash_jobs")]
        for name in files:
            path = os.path.join(top, name)
            try:
                if not os.path.islink(path) and os.path.isfile(path):
                    with open(path, "rb") as f:
                        data = f.read(256 << 20)
                    scan(path, data)
                    segments += bool(data) and root == "/dev/shm" and name.startswith(("fastdds_", "fastrtps_"))
            except OSError:
                pass
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if pid not in skip:
                scan(f"/proc/{pid}/cmdline", f.read())
    except OSError:
        pass
print(json.dumps([found, segments]))
"""


def _as_nobody(needles: list[str], roots: list[pathlib.Path | str], skip_pids: list[int]
               ) -> tuple[dict[str, list[str]], int]:
    """Which needles nobody found where, and how many of Fast DDS's shared-memory segments it read."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.fail("this test switches to user nobody: it needs root, setpriv (util-linux) and /usr/bin/python3")
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c",
               FIND_AS_NOBODY, *map(str, roots)]
    done = subprocess.run(command, input=json.dumps(needles), capture_output=True, text=True, timeout=300, check=True,
                          env={"PATH": "/usr/bin:/bin", "SKIP_PIDS": " ".join(map(str, skip_pids))})
    found, segments = json.loads(done.stdout)
    return dict(found), int(segments)


class Spy:
    """Subscribes (raw) to every topic the graph shows, hidden ones and the action's too, with a QoS that
    matches all of its publishers; ``heard`` collects ``(topic, serialized bytes)``."""

    def __init__(self, probe: Any) -> None:
        self.probe, self.heard, self.topics = probe, [], set()
        probe.node.create_timer(0.2, self.subscribe)

    @staticmethod
    def _type(name: str) -> Any:
        package, kind, rest = name.split("/")
        module = importlib.import_module(f"{package}.{kind}")
        if kind == "action":  # e.g. evalstop/action/RunTrial_FeedbackMessage
            action, _, part = rest.partition("_")
            return getattr(getattr(module, action).Impl, part)
        return getattr(module, rest)

    def subscribe(self) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        node = self.probe.node
        for topic, types in node.get_topic_names_and_types():
            publishers = node.get_publishers_info_by_topic(topic)
            if topic in self.topics or not publishers:
                continue
            try:
                msg_type = self._type(types[0])
            except (AttributeError, ImportError, ValueError):
                continue
            reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
            latched = all(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in publishers)
            profile = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE if reliable
                                 else ReliabilityPolicy.BEST_EFFORT,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
            self.topics.add(topic)
            node.create_subscription(msg_type, topic, lambda raw, t=topic: self.heard.append((t, bytes(raw))),
                                     profile, raw=True)

    def leaks(self, needles: list[str], since: int = 0) -> dict[str, list[str]]:
        return {n: sorted({t for t, raw in self.heard[since:] if n.encode() in raw}) for n in needles
                if any(n.encode() in raw for _, raw in self.heard[since:])}


@pytest.fixture
def lab() -> Iterator[pathlib.Path]:
    """The lab's directory, traversable by everybody (0755): only the files' own modes keep others out."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-sealed-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _private(path: pathlib.Path, text: str) -> pathlib.Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def test_sealed_goals_leak_no_policy_before_the_reveal(start_node: Any, probe: Any, namespace: str,
                                                        lab: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from evalstop.action import RunTrial
    from evalstop.msg import SessionStatus
    from evalstop.srv import SessionControl
    from rclpy.task import Future

    from evalstop_ros import qos
    from evalstop_ros.audit import audit
    from evalstop_ros.session.auth import new_keys, write_keys
    from evalstop_ros.session.goal_sealing import SealError, open_goal, read_runner_key

    tag = secrets.token_hex(4)  # ids no other test on this machine uses
    policies = [f"pi0_fast_droid_{tag}", f"pi0_flow_droid_{tag}"]
    ports = {policies[0]: free_port(), policies[1]: free_port()}
    servers = [start_openpi_server(kind, ports[policy], tmp_path / f"{kind}.log", "--leak", policy)
               for kind, policy in zip(("bad", "good"), policies)]
    try:
        needles = [*policies, *(f"127.0.0.1:{p}" for p in ports.values()), *(f"{p}/checkpoints" for p in policies)]
        servers_file = _private(lab / "servers.yaml", yaml.safe_dump({"policy_servers": {
            p: {"host": "127.0.0.1", "port": port} for p, port in ports.items()}}))
        key_file = write_keys(lab / "runner.key", new_keys(["runner"]))
        config = write_config(tmp_path / "vla.yaml", policies=policies, n_max=50, alpha=0.05,
                              metrics=[{"name": "success", "method": "step", "alpha": 0.05}])
        spy = Spy(probe)
        statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
        diagnostics = probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)

        manager = start_node("evaluation_manager", params={
            "config_file": str(config), "session_id": "s1", "journal_dir": str(lab / "journals"),
            "journal_fsync": False, "goal_key_file": str(key_file), "allow_unsealed": False, "max_attempts": 10})
        runner = start_node("policy_runner", params={
            "servers_file": str(servers_file), "robot": "sim", "rate": 300.0, "max_steps": 30, "sim.seed": 7,
            "connect_timeout": 5.0, "infer_timeout": 5.0, "error_log_dir": str(lab / "runner-errors"),
            "goal_key_file": str(key_file)})
        probe.spin_until(lambda: statuses and statuses[-1].trials_done >= 2, 240.0, "two trials scored")

        # a node elsewhere that serves only the manager's hidden goal service, and never answers
        import rclpy

        rogue = rclpy.create_node("rogue", namespace="/elsewhere", context=probe.context)
        received: list[Any] = []
        never: Future = Future()

        async def swallow(request: Any, response: Any) -> Any:
            received.append(request.goal)
            await never
            return response

        rogue.create_service(RunTrial.Impl.SendGoalService, f"{namespace}/run_trial/_action/send_goal", swallow)
        probe.executor.add_node(rogue)

        def warned() -> bool:
            return any(d.level == b"\x01" and "runners serve" in d.message and "/elsewhere/rogue" in d.message
                       for a in diagnostics for d in a.status)

        probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_PAUSED and warned(), 120.0,
                         "the pause and its WARN")
        manager.wait_for(r"session paused: 2 runners serve the action")
        # what it got before the manager saw it (a goal in flight, or none): a label and a seal, no policy
        for goal in received:
            assert goal.policy_id == "" and goal.label in ("X", "Y") and len(goal.sealed) > 0
            raw = bytes(goal.sealed) + bytes(goal.seal_key) + str(goal).encode()
            assert not [n for n in needles if n.encode() in raw]
            for key in (None, bytes(32)):
                with pytest.raises(SealError):
                    open_goal(key, goal)
            assert open_goal(read_runner_key(key_file), goal).identity in policies  # what the runner reads
        probe.executor.remove_node(rogue)
        rogue.destroy_node()
        count = len(diagnostics)
        probe.spin_until(lambda: any(a.status and "runners serve" not in a.status[0].message
                                     for a in diagnostics[count:]), 120.0, "the eavesdropper gone from the graph")
        resume = SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME, reason="eavesdropper gone")
        assert probe.call(SessionControl, "session_control", resume).ok
        topics = ("/_action/feedback", "/_action/status", "session_config", "/rosout", "/diagnostics")

        def heard_every_topic() -> bool:   # (a loaded machine may match the spy's subscription late)
            return all(any(t.endswith(suffix) for t, _ in spy.heard) for suffix in topics)

        probe.spin_until(lambda: statuses[-1].trials_done >= 4 and heard_every_topic(), 240.0,
                         f"two more trials scored and the spy hearing each of {topics}")
        # paused, so that the session cannot finish (and reveal) during the slow checks below
        pause = SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason="the leak checks")
        assert probe.call(SessionControl, "session_control", pause).ok
        probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_PAUSED, 60.0, "paused")  # the key still secret
        probe.spin_for(1.0)

        # before the reveal: nothing on any topic, in any file another user can read, in any command line
        # (the positive control: nobody did read Fast DDS's segments, so what they carried would have shown)
        assert spy.leaks(needles) == {}
        before = len(spy.heard)
        found, segments = _as_nobody(needles, [lab, "/dev/shm", "/tmp"], [s.pid for s in servers])
        assert found == {} and segments > 0
        assert stat.S_IMODE((lab / "journals").stat().st_mode) == 0o700  # the session tree, closed to others

        # the end: the key is revealed; the spy hears the real ids (its positive control)
        abort = SessionControl.Request(command=SessionControl.Request.COMMAND_ABORT, reason="end of the test")
        assert probe.call(SessionControl, "session_control", abort).ok
        probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_ABORTED, 60.0, "aborted")
        probe.spin_until(lambda: set(policies) <= set(spy.leaks(policies, before)), 60.0, "the real ids after the reveal")
        assert manager.stop() == 0 and runner.stop() == 0
    finally:
        for server in servers:
            stop(server)
    # the journal recorded every run's seal; the audit re-derives them from the revealed key
    from evalstop_ros.session import read_journal

    runs = [e for e in read_journal(lab / "journals" / "s1.db").events if e.kind == "runner_result"]
    assert len(runs) >= 4 and all("sealed" in e.payload["goal_seal"] for e in runs)
    report = audit(lab / "journals" / "s1.db")
    assert report.verified, [v.message for v in report.violations]
    assert "goal_seal_mismatch" not in {v.code for v in report.violations}


def test_real_robots_seal_their_goals_by_default_in_the_launch_files() -> None:
    assert {robot: launch_default("eval.launch.py", "allow_unsealed", robot)
            for robot in ("sim", "sim_policy", "droid", "widowx")} == {
        "sim": "true", "sim_policy": "true", "droid": "false", "widowx": "false"}
    assert {robot: launch_default("station.launch.py", "allow_unsealed", robot) for robot in ("sim", "none")} == {
        "sim": "true", "none": "false"}


@pytest.mark.parametrize("node", ["evaluation_manager", "station_manager"])
def test_without_a_runner_key_and_allow_unsealed_false_a_manager_refuses_to_start(
        start_node: Any, tmp_path: pathlib.Path, node: str) -> None:
    config = write_config(tmp_path / "session.yaml")
    params: dict[str, Any] = {"journal_dir": str(tmp_path / "journals"), "allow_unsealed": False}
    if node == "evaluation_manager":
        params.update(config_file=str(config), session_id="s1")
    else:
        (tmp_path / "hub.key").write_text("k" * 32)
        params.update(hub_url="http://127.0.0.1:9", station_id="lab", hub_key_file=str(tmp_path / "hub.key"))
    refused = start_node(node, params=params)
    assert refused.wait() == 2
    refused.wait_for(r"no `goal_key_file`, and `allow_unsealed` is false")
    (tmp_path / "short.key").write_text(f"runner {'ab' * 16}\n")
    bad = start_node(node, params={**params, "goal_key_file": str(tmp_path / "short.key")})
    assert bad.wait() == 2
    bad.wait_for(r"invalid parameters: .*the key has 16 bytes; 32 needed")
    assert not (tmp_path / "journals" / "s1.db").exists()


def test_a_result_without_the_runners_proof_is_refused(start_node: Any, probe: Any, namespace: str,
                                                      tmp_path: pathlib.Path) -> None:
    """An impersonator alone on the action (no runner key) answers every sealed goal with a perfect automatic
    score: the manager refuses each result (no runner proof), journals the refusal, counts no score, and
    pauses at the fault limit."""
    from evalstop.action import RunTrial
    from evalstop.msg import SessionStatus
    from rclpy.action import ActionServer

    from evalstop_ros import qos
    from evalstop_ros.session import read_journal
    from evalstop_ros.session.auth import new_keys, write_keys

    def forge(goal_handle: Any) -> Any:
        goal_handle.succeed()
        return RunTrial.Result(ok=True, message="done", duration=0.1, auto_scored=True, auto_success=True,
                               auto_progress=1.0)

    ActionServer(probe.node, RunTrial, f"{namespace}/run_trial", forge)
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    key_file = write_keys(tmp_path / "runner.key", new_keys(["runner"]))
    manager = start_node("evaluation_manager", params={
        "config_file": str(write_config(tmp_path / "session.yaml")), "session_id": "s1",
        "journal_dir": str(tmp_path / "journals"), "journal_fsync": False, "goal_key_file": str(key_file),
        "max_attempts": 2})
    probe.spin_until(lambda: statuses and statuses[-1].state == SessionStatus.STATE_PAUSED, 120.0, "the pause")
    manager.wait_for(r"trial 1: result refused: no runner proof \(a node without the runner key answered the goal\)")
    assert statuses[-1].trials_done == 0
    assert manager.stop() == 0
    events = read_journal(tmp_path / "journals" / "s1.db").events
    runs = [e.payload for e in events if e.kind == "runner_result"]
    assert [(r["ok"], r["message"]) for r in runs] == [(False, "result refused: no runner proof")] * 2
    assert not any(e.kind == "score_accepted" for e in events)
