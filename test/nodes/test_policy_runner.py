"""policy_runner over DDS: served policies on the ``sim`` arm, driven by the evaluation manager.

The policy servers are real protocol peers: openpi's own ``WebsocketPolicyServer``
(openpi-server, separate venv with numpy < 2) for the end-to-end session, the project's server
(:mod:`evalstop_ros.runner.server`) for the failure cases. The sim arm's outcome depends on the
actions the policy returns, so the "good" policy really succeeds more often.
"""

from __future__ import annotations

import json
import pathlib
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from nodes_support import final_status, write_config
from runner_support import free_port, start_openpi_server, stop
from test_multi_policy import _assert_matches_offline

from evalstop_ros.runner.server import PolicyServer

pytestmark = pytest.mark.usefixtures("ros_env")

POLICIES = ["bad_vla", "good_vla"]


def _servers_file(path: pathlib.Path, ports: dict[str, int]) -> pathlib.Path:
    path.write_text(yaml.safe_dump({"policy_servers": {p: {"host": "127.0.0.1", "port": port}
                                                       for p, port in ports.items()}}))
    return path


def _runner_params(servers: pathlib.Path, **extra: Any) -> dict[str, Any]:
    return {"servers_file": str(servers), "robot": "sim", "rate": 300.0, "max_steps": 30, "sim.seed": 7,
            "connect_timeout": 5.0, "infer_timeout": 5.0, "error_log_dir": str(servers.parent / "runner-errors"),
            **extra}


#: A failed run's operator message: a category and an error id, nothing from the server.
FAILED = r"(?P<category>[a-z ]+) \(error (?P<id>[0-9a-f]{8})\)"


def _private_entry(servers: pathlib.Path, message: str) -> dict[str, Any]:
    """The runner's private error-log entry of an operator message (file 0600, directory 0700)."""
    import re
    import stat

    from evalstop_ros.runner.errors import ErrorLog

    match = re.match(FAILED, message)
    assert match, message
    log = ErrorLog(servers.parent / "runner-errors")
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600 and stat.S_IMODE(log.directory.stat().st_mode) == 0o700
    entry = log.find(match["id"])
    assert entry is not None and entry["category"] == match["category"]
    return entry


def _manager_params(tmp_path: pathlib.Path, config: pathlib.Path, **extra: Any) -> dict[str, Any]:
    return {"config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
            "journal_fsync": False, **extra}


def _journal(tmp_path: pathlib.Path) -> list[tuple[str, dict[str, Any]]]:
    with sqlite3.connect(tmp_path / "journals" / "s1.db") as db:
        return [(kind, json.loads(payload)) for kind, payload in db.execute("SELECT kind, payload FROM events")]


@pytest.fixture
def openpi_servers(tmp_path: pathlib.Path) -> Iterator[dict[str, int]]:
    ports = {"bad_vla": free_port(), "good_vla": free_port()}
    processes = [start_openpi_server(kind.split("_")[0], port, tmp_path / f"{kind}.log") for kind, port in ports.items()]
    yield ports
    for process in processes:
        stop(process)


def _collect(probe: Any) -> list[Any]:
    from evalstop.msg import SessionStatus

    from evalstop_ros import qos

    return probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)


def test_good_policy_wins_against_openpi_servers_and_matches_the_offline_analysis(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, openpi_servers: dict[str, int]) -> None:
    config = write_config(tmp_path / "vla.yaml", policies=POLICIES, n_max=50,
                          metrics=[{"name": "success", "method": "step", "alpha": 0.05}], alpha=0.05)
    statuses = _collect(probe)
    runner = start_node("policy_runner", params=_runner_params(_servers_file(tmp_path / "s.yaml", openpi_servers)))
    runner.wait_for(r"serving RunTrial on 'run_trial' with the 'sim' robot: 2 policies")
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, exit_on_finish=True,
                                                                      exit_linger=0.5))
    final = final_status(probe, statuses, timeout=240.0)
    assert manager.wait() == 0
    assert final.state_name == "finished"
    (test,) = _assert_matches_offline(final, config, tmp_path / "journals" / "s1.db")
    assert (test.policy_a, test.policy_b, test.decision) == ("bad_vla", "good_vla", 1), "good_vla is better"
    # the runner's log never names a policy or its server
    assert not any(word in runner.output for word in ("bad_vla", "good_vla", str(openpi_servers["good_vla"])))
    # the sim arm ends a rollout when its task is done (success), else after max_steps
    runner.wait_for(r"trial 1: rollout done, (\d+ steps, ended by task_done, success=1|30 steps, ended by max_steps, "
                    r"success=0) progress=")


def test_emergency_stop_mid_episode_pauses_the_session_with_nothing_lost(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus
    from evalstop.srv import SessionControl
    from std_srvs.srv import SetBool

    config = write_config(tmp_path / "vla.yaml", policies=POLICIES, n_max=50,
                          metrics=[{"name": "success", "method": "step", "alpha": 0.05}], alpha=0.05)
    statuses = _collect(probe)
    with PolicyServer("bad") as bad, PolicyServer("good") as good:
        servers = _servers_file(tmp_path / "s.yaml", {"bad_vla": bad.port, "good_vla": good.port})
        # 15 Hz, 40 steps: a rollout takes ~2.7 s, time to press the button in the middle of one
        runner = start_node("policy_runner", params=_runner_params(servers, rate=15.0, max_steps=40,
                                                                   **{"sim.end_on_success": False}))
        manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config))
        runner.wait_for(r"trial 2: rollout done", timeout=60.0)
        runner.wait_for(r"trial 3 \(attempt 1\): rollout started", timeout=30.0)
        probe.spin_for(0.5)
        reply = probe.call(SetBool, "emergency_stop", SetBool.Request(data=True), resend_after=3.0)
        assert reply.success
        runner.wait_for(r"EMERGENCY STOP: robot holding position")
        runner.wait_for(r"trial 3: rollout failed: emergency stop \(error [0-9a-f]{8}\); robot stopped")
        probe.spin_until(lambda: statuses and statuses[-1].state == SessionStatus.STATE_PAUSED, 30.0, "paused")
        assert statuses[-1].trials_done == 2
        journal = _journal(tmp_path)
        assert ("paused", {"reason": "emergency stop at the robot (policy_runner)"}) in journal
        assert sum(kind == "score_accepted" for kind, _ in journal) == 2, "both finished trials are kept"
        failed = probe.spin_until(lambda: [p["message"] for k, p in _journal(tmp_path)
                                           if k == "runner_result" and not p["ok"]], 20.0, "the failed run journaled")
        assert len(failed) == 1 and re.fullmatch(r"emergency stop \(error [0-9a-f]{8}\)", failed[0])
        # while latched, no rollout runs; released and resumed, the session goes on from trial 3
        assert probe.call(SetBool, "emergency_stop", SetBool.Request(data=False), resend_after=3.0).success
        resume = SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME)
        assert probe.call(SessionControl, "session_control", resume, resend_after=3.0).ok
        runner.wait_for(r"trial 3 \(attempt 2\): rollout started", timeout=30.0)
        runner.wait_for(r"trial 3: rollout done", timeout=30.0)
        manager.wait_for(r"trial 3 \(label \w+\) scored", timeout=30.0)
        assert runner.stop() == 0 and manager.stop() == 0


def test_unreachable_server_fails_the_run_and_the_manager_pauses(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus

    config = write_config(tmp_path / "vla.yaml", policies=POLICIES)
    statuses = _collect(probe)
    dead = free_port()
    with PolicyServer("good") as good:
        servers = _servers_file(tmp_path / "s.yaml", {"bad_vla": dead, "good_vla": good.port})
        runner = start_node("policy_runner", params=_runner_params(servers, connect_timeout=1.0))
        manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, max_attempts=2))
        probe.spin_until(lambda: statuses and statuses[-1].state == SessionStatus.STATE_PAUSED, 60.0, "paused")
        line = manager.wait_for(r"session paused: runner failed 2 times on trial (\d+)")
        failed = runner.wait_for(rf"trial {line.group(1)}: rollout failed: ({FAILED}); robot stopped")
        assert failed["category"] == "unreachable"
        for log in (runner.output, manager.output):
            assert "bad_vla" not in log and str(dead) not in log
        entry = _private_entry(servers, failed.group(1))
        assert entry["policy"] == "bad_vla" and str(dead) in entry["text"], "the lab finds the cause by its id"
        assert runner.stop() == 0


@pytest.mark.parametrize(("kind", "options", "category", "text"), [
    ("good", {"disconnect_after": 3}, "server error", "policy server closed the connection (waiting for action chunk)"),
    ("slow", {"delay": 3.0}, "too slow", "policy server too slow: no action chunk within 0.5 s"),
    ("error", {"error_text": "pi0_fast_droid checkpoint missing"}, "server error", "pi0_fast_droid checkpoint missing"),
    ("wrong_shape", {}, "protocol error", "policy server returned actions of shape (4, 7); expected (N, 8)"),
])
def test_server_failures_fail_the_run_with_a_category_and_an_error_id(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, kind: str, options: dict[str, Any], category: str,
        text: str) -> None:
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    servers = tmp_path / "s.yaml"
    with PolicyServer(kind, **options) as server:
        runner = start_node("policy_runner", params=_runner_params(
            _servers_file(servers, {"good_vla": server.port}), infer_timeout=0.5))
        client = ActionClient(probe.node, RunTrial, "run_trial")
        probe.spin_until(client.server_is_ready, 20.0, "run_trial")
        result = probe.run_goal(client, RunTrial.Goal(session_id="s", trial_id=7, policy_id="good_vla",
                                                        task="t", initial_condition="c", attempt=1))
        assert not result.ok and re.fullmatch(FAILED, result.message) and result.message.startswith(category + " ")
        runner.wait_for(rf"trial 7: rollout failed: {re.escape(result.message)}; robot stopped")
        for word in ("good_vla", str(server.port), "pi0_fast_droid", "Traceback"):
            assert word not in runner.output
        entry = _private_entry(servers, result.message)
        assert text in entry["text"] and entry["trial"] == "7" and entry["policy"] == "good_vla"
        client.destroy()


def test_a_goal_sent_again_is_the_same_run(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    with PolicyServer("good") as good:
        runner = start_node("policy_runner", params=_runner_params(
            _servers_file(tmp_path / "s.yaml", {"good_vla": good.port}), record_dir=str(tmp_path / "episodes")))
        client = ActionClient(probe.node, RunTrial, "run_trial")
        probe.spin_until(client.server_is_ready, 20.0, "run_trial")
        goal = RunTrial.Goal(session_id="s", trial_id=5, policy_id="good_vla", task="t", initial_condition="c",
                             attempt=1)
        results = [probe.run_goal(client, goal) for _ in range(2)]
        assert results[0].ok and results[0].auto_scored
        assert (results[0].auto_success, results[0].auto_progress, results[0].duration) == \
            (results[1].auto_success, results[1].auto_progress, results[1].duration)
        runner.wait_for(r"trial 5 \(attempt 1\): goal re-sent, same run")
        # recorded once, next to nothing that names the policy
        folder = tmp_path / "episodes" / "s" / "trial_0005_attempt_1"
        assert results[0].message.endswith(f"; recorded in {folder}")
        from evalstop_ros.runner.recorder import recording_of

        assert recording_of(results[0].message) == str(folder), "where the report finds the trial's videos"
        assert sorted(p.name for p in folder.iterdir()) == ["episode.npz", "exterior_image_1_left.mp4",
                                                            "wrist_image_left.mp4"]
        assert runner.output.count("trial 5 (attempt 1): rollout started") == 1
        unknown = RunTrial.Goal(session_id="s", trial_id=6, policy_id="nobody", attempt=1)
        sent = client.send_goal_async(unknown)
        handle = probe.spin_until(lambda: sent.done() and sent.result(), 20.0, "goal response")
        assert not handle.accepted
        runner.wait_for(r"trial 6: goal rejected, its policy has no server in servers_file")
        client.destroy()


def test_missing_servers_file_exits_with_status_2(start_node: Any) -> None:
    runner = start_node("policy_runner", params={"robot": "sim"})
    assert runner.wait() == 2
    assert "`servers_file` is required" in runner.output


@pytest.mark.parametrize(("params", "message"), [
    ({"guard_mode": "loose"}, "`guard_mode` must be one of refuse, clamp; found 'loose'"),
    ({"robot": "ros2", "ros2.limits_source": "parameters", "ros2.position_lower": [-1.0] * 7},
     "ros2.limits_source parameters needs ros2.position_upper, ros2.velocity_limits"),
])
def test_bad_guard_parameters_exit_with_status_2(start_node: Any, tmp_path: pathlib.Path, params: dict[str, Any],
                                                 message: str) -> None:
    runner = start_node("policy_runner", params=_runner_params(_servers_file(tmp_path / "s.yaml", {"p": 1}), **params))
    assert runner.wait() == 2
    assert message in runner.output
