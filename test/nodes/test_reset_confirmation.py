"""The operator confirms each scene reset before the robot starts (``confirm_reset``), over DDS.

The manager (a process) holds the RunTrial goal until ``session_control`` COMMAND_CONFIRM_RESET
names the pending trial; sim_robot (a process) runs it only then.  Service calls are re-sent
when no answer comes (Fast DDS may drop one); a confirmation is idempotent, a stale one refused.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest
from nodes_support import final_status, write_config

pytestmark = pytest.mark.usefixtures("ros_env")


def _confirm(trial_id: int, attempt: int = 0) -> Any:
    from evalstop.srv import SessionControl

    return SessionControl.Request(command=SessionControl.Request.COMMAND_CONFIRM_RESET, trial_id=trial_id,
                                  attempt=attempt)


def test_the_robot_starts_only_after_the_operator_confirms_the_reset(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus, TrialRequest
    from evalstop.srv import SessionControl

    from evalstop_ros import qos
    from evalstop_ros.session import load_config, offline_decisions, read_journal

    config = write_config(tmp_path / "session.yaml", n_max=50)
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    robot = start_node("sim_robot", params={"success_rates": [0.1, 0.95], "duration": 0.0})
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path), "journal_fsync": False,
        "confirm_reset": True, "exit_on_finish": True, "exit_linger": 0.2})

    probe.spin_until(lambda: statuses and statuses[-1].state_name == "running:awaiting_reset"
                     and statuses[-1].pending_trial_id == 1, 20.0, "trial 1 awaiting its reset")
    request = probe.spin_until(lambda: next((r for r in requests if r.trial_id == 1), None), 10.0, "request 1")
    assert request.label in request.round_labels and len(request.round_labels) == 2
    # the trial waits: no goal reaches the robot, however long the operator takes (polled, not slept)
    quiet_until = time.monotonic() + 1.5
    probe.spin_until(lambda: time.monotonic() > quiet_until, 5.0, "a quiet second and a half")
    assert "rollout started" not in robot.output
    assert statuses[-1].state_name == "running:awaiting_reset"

    stale = probe.call(SessionControl, "session_control", _confirm(2))
    assert not stale.ok and stale.message.startswith("trial 2 is not the pending trial (trial 1 is)")
    over = probe.call(SessionControl, "session_control", _confirm(1, attempt=2))
    assert not over.ok and "attempt 2 is over" in over.message
    assert "rollout started" not in robot.output

    answer = probe.call(SessionControl, "session_control", _confirm(1, attempt=1))
    assert (answer.ok, answer.message) == (True, "trial 1: reset confirmed")
    again = probe.call(SessionControl, "session_control", _confirm(1, attempt=1))  # the answer was lost: re-sent
    assert (again.ok, again.message) == (True, "trial 1: reset already confirmed")
    robot.wait_for(r"trial 1 \(attempt 1\): rollout started")
    manager.wait_for(r"trial 1 \(label \w+\): scene reset confirmed for attempt 1")

    # the rest of the session: confirm every reset the status asks for (re-sent while it still asks)
    confirmed: set[int] = {1}
    deadline = time.monotonic() + 240.0
    while not (statuses and statuses[-1].state == SessionStatus.STATE_FINISHED):
        probe.executor.spin_once(timeout_sec=0.05)
        last = statuses[-1]
        if last.state_name == "running:awaiting_reset":
            response = probe.call(SessionControl, "session_control", _confirm(last.pending_trial_id), resend_after=2.0)
            assert response.ok or "is not the pending trial" in response.message, response.message
            confirmed.add(last.pending_trial_id)
        assert time.monotonic() < deadline, "no decision within 240 s"
    final = final_status(probe, statuses)
    assert manager.wait() == 0

    events = read_journal(tmp_path / "s1.db").events
    runs = [e.trial_id for e in events if e.kind == "runner_result"]
    resets = [e.trial_id for e in events if e.kind == "reset_confirmed"]
    assert runs == resets, "one confirmation before each run"
    for trial_id in runs:
        seqs = [e.seq for e in events if e.trial_id == trial_id and e.kind in ("reset_confirmed", "runner_result")]
        kinds = [e.kind for e in events if e.trial_id == trial_id and e.kind in ("reset_confirmed", "runner_result")]
        assert kinds == ["reset_confirmed", "runner_result"] and seqs == sorted(seqs)
    offline = offline_decisions(load_config(config, confirm_reset=True), tmp_path / "s1.db")
    assert [(int(o.result.decision), o.result.stopping_trial or 0) for o in offline] == \
        [(c.decision, c.stopping_trial) for c in final.comparisons]
    from evalstop_ros.audit import audit

    report = audit(tmp_path / "s1.db")
    assert report.verified, [v.message for v in report.violations]
