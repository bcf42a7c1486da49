"""sim_robot: the simulated RunTrial action server, run as a process and driven over DDS."""

from __future__ import annotations

import re
import time
from typing import Any, NamedTuple

import pytest

pytestmark = pytest.mark.usefixtures("ros_env")


class Run(NamedTuple):
    accepted: bool
    result: Any
    feedback: list[Any]


def run_goal(probe: Any, *, policy: str, trial: int, session: str = "s1", timeout: float = 20.0) -> Run:
    """Send one RunTrial goal from the probe and wait for its result."""
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    client = ActionClient(probe.node, RunTrial, "run_trial")
    probe.spin_until(client.server_is_ready, timeout, "the run_trial action server")
    feedback: list[Any] = []
    goal = RunTrial.Goal(session_id=session, trial_id=trial, policy_id=policy, task="t", initial_condition="c")
    # Right after discovery Fast DDS may drop the goal response ("failed to send response
    # (timeout)"); sim_robot repeats a re-sent goal's rollout, so send it again, as a runner would.
    deadline = time.monotonic() + timeout
    while True:
        sent = client.send_goal_async(goal, feedback_callback=lambda fb: feedback.append(fb.feedback))
        try:
            handle = probe.spin_until(lambda: sent.done() and sent.result(), 3.0, "goal response")
            break
        except pytest.fail.Exception:
            if time.monotonic() > deadline:
                raise
    if not handle.accepted:
        client.destroy()
        return Run(False, None, feedback)
    done = handle.get_result_async()
    probe.spin_until(done.done, timeout, "goal result")
    # the rollout's last feedback ("done") travels apart from the result and may come after it: a grace
    # of 2 s for it (a test that checks it still fails without it)
    grace = time.monotonic() + 2.0
    while feedback and feedback[-1].phase != "done" and time.monotonic() < grace:
        probe.executor.spin_once(timeout_sec=0.05)
    client.destroy()
    return Run(True, done.result().result, feedback)


def test_rollouts_follow_the_success_rates(start_node: Any, probe: Any) -> None:
    robot = start_node("sim_robot", params={"policies": ["always", "never"], "success_rates": [1.0, 0.0],
                                            "progress_means": [0.5, 0.3]})
    robot.wait_for(r"serving RunTrial on 'run_trial': 2 policies")
    for trial in (1, 2):
        win = run_goal(probe, policy="always", trial=2 * trial - 1)
        loss = run_goal(probe, policy="never", trial=2 * trial)
        assert win.result.ok and win.result.auto_scored
        assert (win.result.auto_success, win.result.auto_progress) == (True, 1.0)
        assert loss.result.ok and loss.result.auto_scored and not loss.result.auto_success
        assert 0.0 < loss.result.auto_progress < 1.0
        assert win.feedback[-1].phase == "done" and win.feedback[-1].progress == 1.0
    robot.wait_for(r"trial 1: rollout done, success=1 progress=1\.000")
    robot.wait_for(r"trial 4 \(attempt \d+\): rollout started")
    assert robot.stop() == 0
    assert "always" not in robot.output and "never" not in robot.output, "no policy id in the log by default"


def test_policy_ids_are_logged_only_when_asked(start_node: Any, probe: Any) -> None:
    robot = start_node("sim_robot", params={"policies": ["always"], "success_rates": [1.0], "progress_means": [0.5],
                                            "log_policy_ids": True})
    robot.wait_for(r"serving RunTrial on 'run_trial': always=1")
    assert run_goal(probe, policy="always", trial=1).result.ok
    robot.wait_for(r"trial 1 \(policy always, attempt \d+\): rollout started")
    robot.wait_for(r"trial 1 \(policy always\): rollout done, success=1 progress=1\.000")


def test_a_goal_sent_again_gets_the_same_rollout(start_node: Any, probe: Any) -> None:
    from evalstop_ros.nodes.sim_robot import simulate_outcome

    start_node("sim_robot", params={"policies": ["p"], "success_rates": [0.5], "progress_means": [0.4], "seed": 3})
    first = [run_goal(probe, policy="p", trial=t).result for t in range(1, 7)]
    again = [run_goal(probe, policy="p", trial=t).result for t in range(1, 7)]
    outcomes = [(r.auto_success, r.auto_progress) for r in first]
    assert outcomes == [(r.auto_success, r.auto_progress) for r in again]
    assert outcomes == [tuple(simulate_outcome(3, "s1", "p", t, success_rate=0.5, progress_mean=0.4,
                                               concentration=8.0)) for t in range(1, 7)]
    assert len(set(outcomes)) > 1, "six rollouts at rate 0.5 should not all be identical"


def test_unknown_policy_is_rejected_with_a_log_line(start_node: Any, probe: Any) -> None:
    robot = start_node("sim_robot")
    assert not run_goal(probe, policy="nobody", trial=4).accepted
    robot.wait_for(r"\[ERROR\] \[\S*sim_robot\]: trial 4: goal rejected, unknown policy$")
    assert "nobody" not in robot.output


def test_injected_runner_failure(start_node: Any, probe: Any) -> None:
    robot = start_node("sim_robot", params={"failure_probability": 1.0})
    run = run_goal(probe, policy="policy_a", trial=1)
    assert run.accepted and not run.result.ok and not run.result.auto_scored
    assert re.fullmatch(r"robot fault \(error [0-9a-f]{8}\): injected \(failure_probability 1\)", run.result.message)
    robot.wait_for(r"trial 1: rollout FAILED: robot fault \(error [0-9a-f]{8}\): injected")
    assert "policy_a" not in robot.output


def test_invalid_parameters_exit_with_status_2(start_node: Any) -> None:
    robot = start_node("sim_robot", params={"policies": ["a", "b"], "success_rates": [0.5]})
    assert robot.wait() == 2
    assert "`success_rates` (1) and `progress_means` (2) need one value per policy" in robot.output


def test_parameter_change_is_checked(start_node: Any, probe: Any) -> None:
    from rclpy.parameter import Parameter

    robot = start_node("sim_robot")
    result = probe.set_parameters("sim_robot", [Parameter("success_rates", value=[1.5, 0.5])])[0]
    assert not result.successful
    assert result.reason == "`success_rates` must lie in [0, 1]; found 1.5 for policy 'policy_a'"
    robot.wait_for(r"parameter change refused: `success_rates` must lie in \[0, 1\]")
    assert probe.set_parameters("sim_robot", [Parameter("success_rates", value=[1.0, 1.0])])[0].successful
    assert run_goal(probe, policy="policy_a", trial=9).result.auto_success


def test_ctrl_c_during_a_rollout_ends_quietly(start_node: Any, probe: Any) -> None:
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    """Ctrl-C mid-rollout ends the process at once (a rollout's sleep ends with the context), cleanly
    (status 0, nothing logged as an error): a 300 s rollout of 5 steps would hold it 60 s past
    ``stop``'s 15 s, after which it is killed (status -9)."""
    robot = start_node("sim_robot", params={"duration": 300.0})
    client = ActionClient(probe.node, RunTrial, "run_trial")
    probe.spin_until(client.server_is_ready, 20.0, "the run_trial action server")
    goal = RunTrial.Goal(session_id="s1", trial_id=1, policy_id="policy_a", task="t", initial_condition="c", attempt=1)
    deadline = time.monotonic() + 20.0
    while "rollout started" not in robot.output:  # re-sent while DDS drops the goal (sim_robot repeats it)
        client.send_goal_async(goal)
        probe.spin_for(1.0)
        assert time.monotonic() < deadline, robot.output
    assert robot.stop() == 0
    assert "Traceback" not in robot.output and "[ERROR]" not in robot.output, robot.output


def test_sealed_goals_run_with_the_runner_key_only(start_node: Any, probe: Any, tmp_path: Any) -> None:
    """A goal sealed by a manager with a runner key: a runner holding the key runs it and proves it in the
    result; one without a key (or with another) fails it as ``sealed goal (error <id>)``."""
    from evalstop.action import RunTrial
    from rclpy.action import ActionClient

    from evalstop_ros.session.auth import new_keys, write_keys
    from evalstop_ros.session.goal_sealing import GoalSealer, session_seal_key

    keys = {name: write_keys(tmp_path / f"{name}.key", new_keys(["runner"])) for name in ("lab", "other")}
    lab_key = bytes.fromhex(keys["lab"].read_text().split()[-1])
    sealer = GoalSealer(lab_key, session_seal_key(bytes(32), "s1"), "s1")
    runners = {"keyed": start_node("sim_robot", params={"goal_key_file": str(keys["lab"])}, ns="/keyed"),
               "keyless": start_node("sim_robot", ns="/keyless"),
               "other": start_node("sim_robot", params={"goal_key_file": str(keys["other"])}, ns="/other")}
    results = {}
    for name in runners:
        client = ActionClient(probe.node, RunTrial, f"/{name}/run_trial")
        goal = RunTrial.Goal(session_id="s1", trial_id=1, label="X", task="t", initial_condition="c", attempt=1,
                             **sealer.goal_fields(1, 1, "policy_b"))
        results[name] = probe.run_goal(client, goal, 60.0)
        assert sealer.result_problem(goal, results[name]) == ("" if name == "keyed" else "no runner proof")
    assert results["keyed"].ok and results["keyed"].auto_scored
    for name in ("keyless", "other"):
        assert not results[name].ok and re.fullmatch(r"sealed goal \(error [0-9a-f]{8}\): (no runner key|it does not "
                                                     r"open with this runner's key)", results[name].message)
    runners["keyless"].wait_for(r"trial 1: sealed goal: no runner key; the run fails")
    runners["other"].wait_for(r"trial 1: sealed goal: it does not open with this runner's key; the run fails")
    assert all("policy_b" not in r.output for r in runners.values())
