"""The runner's command guard, schedule, frame bounds and blinding through ROS (issue 19).

Policy servers are openpi's own ``WebsocketPolicyServer`` (separate venv, tools/openpi_policy_server.py)
serving scripted policies that go wrong (:mod:`evalstop_ros.runner.scripted`): positions out of
the arm's range, NaN, jumps far beyond a tick's velocity, a 5 s stall mid-episode, a 300 MB frame,
an error text naming the policy. What reaches the robot is read where it leaves the runner: the
``sim`` arm's episode recordings (every command as sent, with its time) and, for the ``ros2``
adapter, the published ``JointTrajectory`` commands (stamped when sent).
"""

from __future__ import annotations

import importlib
import pathlib
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import yaml
from nodes_support import write_config
from runner_support import free_port, start_openpi_server, stop

pytestmark = pytest.mark.usefixtures("ros_env")

FAILED = r"(?P<category>[a-z ]+) \(error (?P<id>[0-9a-f]{8})\)"
SIM_LIMIT = 1.5   # evalstop_ros.runner.adapters.sim.SIM_POSITION_LIMIT (rad); sim speed limit 1 rad/s


class OpenpiServers:
    """openpi servers started for one test (stopped at its end)."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.tmp_path, self.processes = tmp_path, []  # type: ignore[var-annotated]

    def start(self, kind: str, *options: str, port: int = 0) -> int:
        port = port or free_port()
        self.processes.append(start_openpi_server(kind, port, self.tmp_path / f"{kind}-{port}.log", *options))
        return port


@pytest.fixture
def openpi(tmp_path: pathlib.Path) -> Iterator[OpenpiServers]:
    servers = OpenpiServers(tmp_path)
    yield servers
    for process in servers.processes:
        stop(process)


def _servers_file(tmp_path: pathlib.Path, ports: dict[str, int]) -> pathlib.Path:
    path = tmp_path / "servers.yaml"
    path.write_text(yaml.safe_dump({"policy_servers": {p: {"host": "127.0.0.1", "port": port}
                                                       for p, port in ports.items()}}))
    return path


def _runner(start_node: Any, tmp_path: pathlib.Path, ports: dict[str, int], **params: Any) -> Any:
    return start_node("policy_runner", params={
        "servers_file": str(_servers_file(tmp_path, ports)), "robot": "sim", "rate": 100.0, "max_steps": 30,
        "connect_timeout": 10.0, "infer_timeout": 10.0, "record_dir": str(tmp_path / "episodes"),
        "error_log_dir": str(tmp_path / "runner-errors"), **params})


def _recorded(tmp_path: pathlib.Path) -> list[dict[str, Any]]:
    """Every recorded episode (actions as sent to the arm, and when), in the order they were written
    (a trial's second attempt runs after later trials)."""
    out = []
    for path in sorted((tmp_path / "episodes").rglob("episode.npz"), key=lambda path: path.stat().st_mtime_ns):
        with np.load(path) as npz:
            out.append(dict(npz, folder=path.parent.name))
    return out


def _assert_within_the_sim_limits(episodes: list[dict[str, Any]], period: float) -> None:
    """No command outside the sim's limits, no tick faster than its speed, no two closer than half a period."""
    assert episodes
    for data in episodes:
        actions, times = data["actions"], data["step_time"]
        if len(actions) == 0:
            continue
        assert np.all(np.isfinite(actions))
        assert np.abs(actions[:, :7]).max() <= SIM_LIMIT and set(np.unique(actions[:, 7])) <= {0.0, 1.0}
        assert np.all(np.diff(times) >= period / 2), np.diff(times).min()


def _journal(tmp_path: pathlib.Path) -> list[tuple[str, dict[str, Any]]]:
    """The journal's events as its owner reads them (sealed fields such as a runner's detail restored)."""
    from evalstop_ros.session import read_journal

    return [(event.kind, event.payload) for event in read_journal(tmp_path / "journals" / "s1.db").events]


def test_a_policy_outside_the_limits_never_moves_the_arm_and_the_session_pauses_with_nothing_lost(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers) -> None:
    """A policy whose chunks leave the arm's range: the guard refuses them, the session pauses after
    its fault limit, the operator channels get the category and the id and the journal the sealed
    detail. Which chunks the guard refuses, and why (out of range, NaN), is the episode loop's
    (test/runner/test_episode.py, the same scripted policies over the openpi protocol)."""
    from evalstop.msg import SessionStatus

    from evalstop_ros import qos

    kind, detail = "out_of_limits", "joint4 above its position limit 1.5 rad"
    ports = {"bad_vla": openpi.start(kind), "good_vla": openpi.start("good")}
    config = write_config(tmp_path / "vla.yaml", policies=["bad_vla", "good_vla"], n_max=50,
                          metrics=[{"name": "success", "method": "step", "alpha": 0.05}], alpha=0.05)
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    runner = _runner(start_node, tmp_path, ports)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "max_attempts": 2})
    probe.spin_until(lambda: statuses and statuses[-1].state == SessionStatus.STATE_PAUSED, 120.0, "paused")
    manager.wait_for(r"session paused: runner failed 2 times on trial (\d+)")
    journal = _journal(tmp_path)
    failures = [p for k, p in journal if k == "runner_result" and not p["ok"]]
    assert len(failures) == 2
    for failure in failures:
        # operator channels get the category and the id; the joint and the limit are journaled sealed
        assert re.fullmatch(r"refused by the command guard \(error [0-9a-f]{8}\)", failure["message"]), failure
        assert re.match(rf"refused by the command guard \(error [0-9a-f]{{8}}\): {detail}(; recorded in \S+)?$",
                        failure["detail"]), failure
    # nothing lost: every run that ended ok was scored and kept
    oks = sum(k == "runner_result" and p["ok"] for k, p in journal)
    assert sum(k == "score_accepted" for k, _ in journal) == oks == statuses[-1].trials_done
    _assert_within_the_sim_limits(_recorded(tmp_path), 1.0 / 100.0)
    runner.wait_for(r"rollout failed: refused by the command guard \(error [0-9a-f]{8}\): .*; robot stopped")
    assert "bad_vla" not in runner.output and str(ports["bad_vla"]) not in runner.output
    assert manager.stop() == 0 and runner.stop() == 0


def _run_goal(probe: Any, trial: int, policy: str = "bad_vla", timeout: float = 60.0,
              feedback: list[Any] | None = None) -> Any:
    """One RunTrial goal (re-sent while DDS drops the goal response); its result."""
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    client = ActionClient(probe.node, RunTrial, "run_trial")
    probe.spin_until(client.server_is_ready, 20.0, "run_trial")
    goal = RunTrial.Goal(session_id="s", trial_id=trial, policy_id=policy, task="t", initial_condition="c",
                         attempt=1)
    sink = feedback if feedback is not None else []
    result = probe.run_goal(client, goal, timeout, lambda fb: sink.append(fb.feedback))
    client.destroy()
    return result


def test_a_5_s_stall_mid_episode_holds_the_arm_and_resumes_without_a_burst(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers) -> None:
    port = openpi.start("stall", "--delay", "5")
    runner = _runner(start_node, tmp_path, {"bad_vla": port}, rate=15.0, max_steps=20, watchdog_ticks=5,
                     **{"sim.end_on_success": False})  # a full-length rollout: the stall lies inside it
    feedback: list[Any] = []
    result = _run_goal(probe, 1, feedback=feedback)
    assert result.ok, result.message
    runner.wait_for(r"trial 1: watchdog: no valid action for 5 ticks \(0\.33 s\), robot holding position")
    phases = [f.phase for f in feedback]
    assert "holding" in phases and phases.index("holding") < len(phases) - 1, "the feedback says so too"
    (episode,) = _recorded(tmp_path)
    assert len(episode["actions"]) == 20
    gaps = np.diff(episode["step_time"])
    assert gaps.max() > 4.5, "the stall"
    assert gaps.min() >= 0.5 / 15.0, "no two commands closer than half a period: no catch-up burst"
    _assert_within_the_sim_limits([episode], 1.0 / 15.0)


def test_a_300_mb_frame_is_refused_with_the_runner_s_memory_bounded(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers) -> None:
    port = openpi.start("huge", "--fail-after", "1", "--frame-bytes", str(300 * 10**6))
    # infer_timeout 60 s: the server packs its 300 MB reply before the first byte leaves, which took
    # over 10 s beside other test workers on a loaded 2-core machine (the runner then reported "too
    # slow" before it saw the frame); the refusal and the memory bound below are what is checked
    runner = _runner(start_node, tmp_path, {"bad_vla": port, "good_vla": openpi.start("good")}, infer_timeout=60.0)
    runner.wait_for(r"serving RunTrial")
    status = pathlib.Path(f"/proc/{runner.proc.pid}/status")

    def peak_kib() -> int:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read_text())[1])  # type: ignore[index]

    assert _run_goal(probe, 1, "good_vla").ok   # a first rollout: the runner's own lazy imports and buffers
    before = peak_kib()
    result = _run_goal(probe, 2, timeout=180.0)
    assert not result.ok and re.fullmatch(r"protocol error \(error [0-9a-f]{8}\)(; recorded in \S+)?",
                                          result.message), result.message
    # stated bound: the runner's peak memory grows by less than the 32 MiB frame limit (903 MB before issue 19;
    # measured here: 0.3 MiB; without the limit the runner reads the whole frame and the goal times out)
    assert peak_kib() - before < 32 * 1024
    assert runner.stop() == 0


#: Per command type (and an array controller's space): the adversarial openpi servers, in the order their
#: goals are sent, back to back (the instant a result arrives): huge legal steps, late chunks of huge steps
#: after a watchdog hold, a refused chunk, a stall, a server error; last (after a rollout that ended well,
#: so that no homing comes first), a driver dropout during a stall.
_ADVERSARIES = {
    ("trajectory", "joint_position"): ["jump", "lurch", "out_of_limits", "stall", "error", "jump", "lurch"],
    ("array", "joint_position"): ["jump", "lurch", "out_of_limits", "jump", "out_of_limits", "lurch", "lurch"],
    ("array", "joint_velocity"): ["good", "stall", "error", "good", "error", "stall", "stall"],
}
_OPTIONS = {"lurch": ("--fail-after", "2", "--delay", "1.5"), "stall": ("--fail-after", "2", "--delay", "1.5"),
            "error": ("--fail-after", "3"), "out_of_limits": ("--fail-after", "2")}


#: The ros2 arm of these tests (the limits are the runner's parameters): rad, rad/s, rad/s^2.
_RATE, _LOWER, _UPPER, _SPEED, _ACCEL = 30.0, -1.5, 1.5, 1.0, 8.0
_NAMES = [f"j{i}" for i in range(1, 8)]


def _ros2_runner(start_node: Any, probe: Any, tmp_path: pathlib.Path, ports: dict[str, int], command_type: str,
                 space: str) -> tuple[Any, Any]:
    """A stand-in arm away from home (:mod:`standin_arm`) and ``policy_runner`` driving it (``robot:=ros2``)."""
    from standin_arm import StandInArm

    arm = StandInArm(probe.node, [*_NAMES, "gripper"], command_type, start=np.append(np.full(7, 0.4), 0.0),
                     dt=1.0 / _RATE, array_space=space)
    # (a 0.5 s freshness bound and a 0.8 s watchdog: a loaded machine delays joint states by 0.3 s and more)
    runner = _runner(start_node, tmp_path, ports, robot="ros2", rate=_RATE, max_steps=24, watchdog_ticks=24,
                     timeout=60.0, joint_state_max_age=0.5, home_tolerance=0.01, home_timeout=60.0, **{
                         "ros2.home": [0.0] * 7 + [0.5],   # the gripper half open: homing commands stand out
                         "ros2.joint_names": [*_NAMES, "gripper"], "ros2.command_type": command_type,
                         "ros2.array_space": space, "ros2.limits_source": "parameters",
                         "ros2.position_lower": [_LOWER] * 7, "ros2.position_upper": [_UPPER] * 7,
                         "ros2.velocity_limits": [_SPEED] * 7, "ros2.acceleration_limits": [_ACCEL] * 7,
                         "ros2.cameras": ["exterior_image_1_left=camera/image_raw",
                                          "wrist_image_left=camera/image_raw"]})
    runner.wait_for(r"command guard 'refuse': 7 joints")
    return arm, runner


def _arm_command(arm: Any, start: int, values: np.ndarray) -> tuple[int] | None:
    """The first command the arm got from ``start`` on (not homing's: a half-open gripper) with
    ``values`` (its 7 joints), as ``(index,)``; None if none yet."""
    found = next((i for i in range(start, len(arm.commands)) if arm.grippers[i] != 0.5
                  and np.array_equal(arm.commands[i].values, values)), None)
    return None if found is None else (found,)


def _assert_within_the_limits_and_every_rollout_starts_home(probe: Any, arm: Any, tmp_path: pathlib.Path,
                                                            rollouts: int) -> None:
    """Each rollout's first command (the episode recordings, in the order they were written) found the arm
    home, and every command the arm got is within the limits (:func:`command_check.violations`). Called once
    the runner's rollouts are over; spins while the last commands are on their way (DDS may be late)."""
    from command_check import violations

    from evalstop_ros.runner.guard import CommandLimits

    episodes = [(data["folder"], data["actions"]) for data in _recorded(tmp_path) if len(data["actions"])]
    assert len(episodes) >= rollouts
    sent = 0
    for folder, actions in episodes:   # each rollout's commands, found in order among all the arm got
        for k, action in enumerate(actions):
            (sent,) = probe.spin_until(lambda: _arm_command(arm, sent, action[:7]), 30.0,
                                       f"{folder}'s step {k} among the arm's commands from #{sent} on")
            if k == 0:
                pose = arm.commands[sent].measured[-1]
                assert np.abs(pose).max() <= 0.01 + 1e-9, ("a rollout started before the arm was home", pose)
            sent += 1
    limits = CommandLimits(tuple(_NAMES), (_LOWER,) * 7, (_UPPER,) * 7, (_SPEED,) * 7, (_ACCEL,) * 7)
    assert violations(arm.commands, limits) == []


@pytest.mark.parametrize(("command_type", "space"), list(_ADVERSARIES))
def test_an_adversarial_openpi_server_never_makes_the_ros2_arm_exceed_a_limit(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers, command_type: str,
        space: str) -> None:
    """The runner (``robot:=ros2``, the limits from parameters) against openpi's own server serving
    policies that go wrong, goals back to back, and a stand-in arm (:mod:`standin_arm`) that moves as
    its controller would and records every command: no command beyond a position, velocity or
    acceleration limit relative to the previous one or to the measured pose (:func:`command_check.violations`;
    a trajectory as its ``time_from_start`` says, an array over one period); every rollout's first
    command found the arm home; a driver dropout gets no hold, and the fault says why."""
    kinds = _ADVERSARIES[(command_type, space)]
    ports = {kind: openpi.start(kind, *_OPTIONS.get(kind, ())) for kind in dict.fromkeys(kinds)}
    arm, runner = _ros2_runner(start_node, probe, tmp_path, ports, command_type, space)
    results = []
    for trial, kind in enumerate(kinds[:-1], start=1):
        results.append((kind, _run_goal(probe, trial, kind, timeout=180.0)))
    for kind, result in results:
        expected_ok = kind in ("jump", "lurch", "stall", "good")
        assert result.ok == expected_ok, (kind, result.message)
    assert any(re.match(r"refused by the command guard \(error [0-9a-f]{8}\): j4 above its position limit 1\.5 rad",
                        r.message) for _, r in results) or "out_of_limits" not in kinds
    # a driver dropout during a stall: the watchdog's hold finds no fresh joint state, nothing is sent
    before = len(arm.commands)
    arm.fall_silent_after(4)   # after the first chunk of the last rollout (the arm is home: no homing first)
    dropout = _run_goal(probe, len(kinds), kinds[-1], timeout=180.0)
    probe.spin_for(0.5)
    silent_at = len(arm.commands)
    arm.fall_silent_after(None)
    assert not dropout.ok and re.match(r"robot fault \(error [0-9a-f]{8}\): no joint state fresher than 0\.5 s to "
                                       r"hold the robot", dropout.message), dropout.message
    runner.wait_for(r"robot not held: no joint state fresher than 0\.5 s")
    # afterwards the runner homes the arm before the next rollout, from the measured pose
    again = _run_goal(probe, len(kinds) + 1, kinds[0], timeout=180.0)
    assert again.ok, again.message
    probe.spin_for(0.5)
    assert len(arm.commands) > 150
    during = np.array([c.values for c in arm.commands[before + 4:silent_at]])
    if space == "joint_velocity" and command_type == "array":   # a velocity that lasts: ramped to zero, no state needed
        assert len(during) and np.all(during[-1] == 0.0) and np.all(np.diff(np.abs(during), axis=0) <= 1e-12), during
    else:
        assert len(during) == 0, "no hold, no stop, nothing at all during the dropout"
    _assert_within_the_limits_and_every_rollout_starts_home(probe, arm, tmp_path, len(kinds))
    if command_type == "trajectory":
        stamps = np.array(arm.stamps)
        assert np.diff(stamps).min() >= 0.5 / _RATE - 1e-3, "no two commands closer than half a period"
    assert runner.stop() == 0


def test_an_operator_who_scores_the_instant_an_episode_ends_never_catches_the_arm_homing(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers) -> None:
    """The manager sends the goals; the operator scores each trial the instant the session awaits its
    score, so the next goal follows at once, resets back to back: every rollout still starts with the
    arm home, and no command exceeds a limit."""
    from evalstop.msg import SessionStatus, TrialRequest, TrialScore

    from evalstop_ros import qos

    kinds = ["jump", "lurch", "stall"]
    ports = {kind: openpi.start(kind, *_OPTIONS.get(kind, ())) for kind in kinds}
    config = write_config(tmp_path / "arm.yaml", policies=kinds, n_max=50, scoring="operator", alpha=0.05,
                          metrics=[{"name": "success", "method": "step", "alpha": 0.05}])
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
    scored: dict[int, float] = {}

    def score_at_once() -> None:  # re-sent every second while the score is awaited (DDS may drop one)
        status = statuses[-1] if statuses else None
        if status is None or status.state_name != "running:awaiting_score":
            return
        trial = status.pending_trial_id
        request = next((r for r in reversed(requests) if r.trial_id == trial), None)
        if request is not None and time.monotonic() - scored.get(trial, -1.0) > 1.0:
            scored[trial] = time.monotonic()
            scores.publish(TrialScore(trial_id=trial, token=request.token, success=True, progress=1.0,
                                      scorer="tester"))

    probe.node.create_timer(0.005, score_at_once)
    arm, runner = _ros2_runner(start_node, probe, tmp_path, ports, "trajectory", "joint_position")
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False})
    probe.spin_until(lambda: statuses and statuses[-1].trials_done >= 6, 300.0, "six trials scored")
    assert manager.stop() == 0
    started = runner.output.count("): rollout started")   # the one the stop left running ends before the check
    probe.spin_until(lambda: len(re.findall(r": rollout (done|failed|stopped)", runner.output)) >= started, 120.0,
                     f"the runner's {started} rollouts to end")
    _assert_within_the_limits_and_every_rollout_starts_home(probe, arm, tmp_path, 6)
    assert runner.stop() == 0


def test_nothing_on_any_topic_names_the_policy_or_its_server(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi: OpenpiServers) -> None:
    """A subscriber to every topic (and /rosout, /diagnostics, the latched ones) while a policy server fails
    with a text that names the policy and its address: none of that text, no server address and no policy
    id appears anywhere before the session ends -- the manager's own topics name the policies by their
    sealed stand-ins (session/public_view.py); once the session ends (abort) and the key is revealed, the
    latched session_config and the comparisons carry the real names."""
    from evalstop.msg import SessionConfig as SessionConfigMsg
    from evalstop.msg import SessionStatus
    from evalstop.srv import SessionControl
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from evalstop_ros import qos

    bad, good = free_port(), openpi.start("good")
    openpi.start("error", "--fail-after", "1", "--error-text",
                 f"bad_vla (pi0_fast_droid at ws://127.0.0.1:{bad}) crashed", port=bad)
    heard: list[tuple[str, bytes]] = []
    subscribed: set[str] = set()

    def subscribe_all() -> None:
        """Subscribe to every topic that has publishers, with a QoS every one of them matches."""
        for topic, types in probe.node.get_topic_names_and_types():
            publishers = probe.node.get_publishers_info_by_topic(topic)
            if topic in subscribed or not publishers:
                continue
            package, _, name = types[0].partition("/msg/")
            try:
                msg_type = getattr(importlib.import_module(f"{package}.msg"), name)
            except (AttributeError, ImportError):
                continue
            subscribed.add(topic)
            profile = QoSProfile(
                depth=1000,
                reliability=ReliabilityPolicy.RELIABLE if all(
                    p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
                else ReliabilityPolicy.BEST_EFFORT,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if all(
                    p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in publishers)
                else DurabilityPolicy.VOLATILE)
            probe.node.create_subscription(msg_type, topic, lambda raw, t=topic: heard.append((t, bytes(raw))),
                                           profile, raw=True)

    config = write_config(tmp_path / "vla.yaml", policies=["bad_vla", "good_vla"], n_max=50,
                          metrics=[{"name": "success", "method": "step", "alpha": 0.05}], alpha=0.05)
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    probe.node.create_timer(0.2, subscribe_all)
    subscribe_all()
    runner = _runner(start_node, tmp_path, {"bad_vla": bad, "good_vla": good})
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "max_attempts": 2})
    probe.spin_until(lambda: statuses and statuses[-1].state == SessionStatus.STATE_PAUSED, 120.0, "paused")
    probe.spin_for(1.0)
    probe.spin_until(lambda: any(t == "/diagnostics" for t, _ in heard), 30.0, "diagnostics")
    manager_topics = ("session_config", "session_event", "session_status", "comparison_status", "trial_request")
    for name in (*manager_topics, "/rosout", "/diagnostics"):
        assert any(t.endswith(name) for t in subscribed), (name, sorted(subscribed))
    for name in ("session_config", "session_event", "comparison_status", "/rosout", "/diagnostics"):
        assert any(t.endswith(name) for t, _ in heard), (name, sorted({t for t, _ in heard}))
    before_end = list(heard)
    for word in ("pi0_fast_droid", "crashed", str(bad), str(good), "Traceback", "bad_vla", "good_vla"):
        leaks = [t for t, raw in before_end if word.encode() in raw]
        assert not leaks, f"{word!r} on {sorted(set(leaks))}"
    # the manager's topics name the policies by their stand-ins
    assert any(b"policy:1" in raw and b"policy:2" in raw for t, raw in before_end if t.endswith("session_config"))
    assert any(b"policy:" in raw for t, raw in before_end if t.endswith("comparison_status"))
    logs_before_end = (runner.output, manager.output)
    for log in logs_before_end:
        for word in ("pi0_fast_droid", str(bad), "bad_vla", "good_vla"):
            assert word not in log, word

    # the end: the key is revealed, the latched config and every comparison again with the real names
    abort = SessionControl.Request(command=SessionControl.Request.COMMAND_ABORT, reason="end of the test")
    assert probe.call(SessionControl, "session_control", abort).ok
    probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_ABORTED, 60.0, "aborted")
    configs = probe.collect(SessionConfigMsg, "session_config", qos.LATCHED_QOS)  # a late subscriber
    probe.spin_until(lambda: configs and "bad_vla" in configs[-1].config_json, 30.0, "the real config, latched")
    assert "policy:1" not in configs[-1].config_json
    probe.spin_until(lambda: any(t.endswith("comparison_status") and b"bad_vla" in raw
                                 for t, raw in heard[len(before_end):]), 30.0, "the comparisons with their real names")
    assert {(c.policy_a, c.policy_b) for c in statuses[-1].comparisons} <= {("bad_vla", "good_vla"),
                                                                             ("good_vla", "bad_vla")}
    assert manager.stop() == 0 and runner.stop() == 0
