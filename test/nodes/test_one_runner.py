"""One runner per action (issue 21): a second action server on the manager's runner action pauses the
session with a WARN in ``/diagnostics``, and no goal is sent while two runners could both run it.

Two stations on one ROS domain with the default action name ``run_trial`` is the way this happens:
every goal request reaches both servers, both robots run the rollout, and rclpy's action client only
logs "Ignoring unexpected goal response" for the second. The manager reports the ROS graph
(:meth:`evalstop_ros.nodes.runner_link.RunnerLink.graph`) to the rule both managers apply
(:mod:`evalstop_ros.session.runner_check`); a node serving only the goal service is
test_sealed_goals.py's.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from nodes_support import write_config

pytestmark = pytest.mark.usefixtures("ros_env")


def _session_diagnostic(array: Any) -> Any:
    return next(s for s in array.status if s.name == "evaluation_manager: session")


def test_a_second_runner_on_the_action_pauses_the_session_with_a_warning(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from evalstop.msg import SessionStatus
    from evalstop.srv import SessionControl

    from evalstop_ros import qos

    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    diagnostics = probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
    config = write_config(tmp_path / "session.yaml", n_max=500)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "dup", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False})
    probe.hear()
    # one runner: the session runs (slow rollouts, so that it is still running when the second comes)
    first = start_node("sim_robot", params={"duration": 0.3})
    probe.spin_until(lambda: statuses and statuses[-1].trials_done >= 2, 60.0, "two trials scored with one runner")
    assert statuses[-1].state == SessionStatus.STATE_RUNNING

    second = start_node("sim_robot", params={"duration": 0.3}, ros_args=["-r", "__node:=sim_robot_b"])
    warning = manager.wait_for(r"\[WARN\] \[[\w.]*evaluation_manager\]: session paused: 2 runners serve the action "
                               r"'run_trial'[^\n]*", 60.0)
    assert "stop all but one" in warning.group(0)
    probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_PAUSED, 20.0, "the paused status")
    warn = probe.spin_until(lambda: next((d for d in map(_session_diagnostic, reversed(diagnostics))
                                          if d.level == DiagnosticStatus.WARN and "2 runners serve" in d.message
                                          and dict((v.key, v.value) for v in d.values).get("state") == "paused"),
                                         None), 20.0, "the WARN diagnostic")
    assert re.match(r"(paused: )?2 runners serve the action 'run_trial'", warn.message), warn.message
    assert dict((v.key, v.value) for v in warn.values)["state"] == "paused"

    # while paused with two runners, no rollout starts on either robot; resuming pauses again
    started = [len(re.findall(r"rollout started", n.output)) for n in (first, second)]
    resume = SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME, reason="try again")
    assert probe.call(SessionControl, "session_control", resume).ok
    manager.wait_for(r"session paused: 2 runners serve", 30.0, count=2)
    probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_PAUSED, 20.0, "paused again")
    probe.spin_for(1.0)
    assert [len(re.findall(r"rollout started", n.output)) for n in (first, second)] == started
    # a goal sent in the instant before the second server was discovered reaches both servers (every
    # server of an action's goal service receives each request): at most that one; none once paused
    assert started[1] <= 1, "the second runner ran goals after the manager saw it"

    # one runner again: the WARN names no second runner, and the operator's resume runs trials on it
    second.stop()
    # (a participant's goodbye can be lost under load: DDS then drops it when its lease runs out; a goal
    # held while the second server appeared leaves the link "waiting for the runner action server" until
    # the resume sends it again: the pause then says so, and names no second runner)
    one_runner = re.compile(r"paused(: waiting for the runner action server 'run_trial')?")
    try:
        probe.spin_until(lambda: one_runner.fullmatch(_session_diagnostic(diagnostics[-1]).message), 120.0,
                         "the diagnostic without the second runner")
    except BaseException:
        print(f"last diagnostic: {_session_diagnostic(diagnostics[-1]).message!r}\nmanager:\n{manager.tail(30)}")
        raise
    scored = statuses[-1].trials_done
    assert probe.call(SessionControl, "session_control", resume).ok
    probe.spin_until(lambda: statuses[-1].trials_done > scored, 60.0, "a trial scored after the resume")
    assert statuses[-1].state == SessionStatus.STATE_RUNNING
