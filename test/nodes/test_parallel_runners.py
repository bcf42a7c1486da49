"""Two runners, one session, through ROS (docs/parallel.md): two sim_robot nodes, each in its own
namespace, whose successes end sooner than their failures, serve one evaluation_manager session at
once; the decision equals the offline re-analysis in plan order, the audit is VERIFIED, and at the
stop a trial still on a robot is cancelled and journaled as after the stop."""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest
from nodes_support import final_status, start_operator_arm, write_config

pytestmark = pytest.mark.usefixtures("ros_env")

ARMS = ("arm_1", "arm_2")


def test_two_runners_serve_one_session_in_plan_order(start_node: Any, probe: Any, namespace: str,
                                                     tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus, TrialRequest

    from evalstop_ros import qos
    from evalstop_ros.audit import audit
    from evalstop_ros.session import load_config, offline_decisions, read_journal

    config = write_config(tmp_path / "parallel.yaml", n_max=40,
                          metrics=[{"name": "success", "method": "nscore", "alpha": 0.1}],
                          runner={"runners": [f"{arm}/run_trial" for arm in ARMS], "timeout_s": 30.0})
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "exit_on_finish": True, "exit_linger": 4.0})
    probe.hear()
    for arm in ARMS:  # a failure runs 1.2 s, a success ends after 0.3 s (end_on_success)
        start_node("sim_robot", ns=f"{namespace}/{arm}", params={
            "policies": ["policy_a", "policy_b"], "success_rates": [0.15, 0.9], "progress_means": [0.3, 0.3],
            "duration": 1.2, "success_duration": 0.3})
    final = final_status(probe, statuses, timeout=300.0)
    assert final.state_name == "finished"
    assert manager.wait(timeout=60.0) == 0
    journal = tmp_path / "journals" / "s1.db"
    events = read_journal(journal).events
    # both arms ran trials, and their episodes overlapped in time
    start: dict[int, tuple[str, int]] = {}
    episodes = []
    for event in events:
        if event.kind == "trial_dispatched":
            start[event.trial_id] = (event.payload["runner"], event.stamp_ns)
        elif event.kind in ("runner_result", "result_after_stop") and event.trial_id in start:
            runner, begun = start.pop(event.trial_id)
            episodes.append((runner, begun, event.stamp_ns))
    assert {runner for runner, _, _ in episodes} == {f"{arm}/run_trial" for arm in ARMS}
    assert any(r1 != r2 and b1 < e2 and b2 < e1 for r1, b1, e1 in episodes for r2, b2, e2 in episodes)
    # scores entered in plan order; the decision is the offline re-analysis of the journal
    scored = [e.trial_id for e in events if e.kind == "score_accepted"]
    assert scored == sorted(scored)
    offline = offline_decisions(load_config(config), journal)
    live = [(c.decision, c.stopping_trial, c.n) for c in final.comparisons]
    assert live == [(int(o.result.decision), o.result.stopping_trial or 0, o.result.n_observed) for o in offline]
    assert live[0][0] in (1, 2)
    # at the stop: every trial still on a robot (nearly always one: the other arm's) was cancelled there,
    # and a result that came back from one is journaled as after the stop
    stop = next(i for i, e in enumerate(events) if e.kind == "finished")
    on_robot = {e.trial_id: e.payload["runner"] for e in events[:stop] if e.kind == "trial_dispatched"}
    for e in events[:stop]:
        if e.kind == "runner_result":
            on_robot.pop(e.trial_id, None)
    cancelled = {e.trial_id: e.payload["runner"] for e in events if e.kind == "trial_cancelled" and e.payload["runner"]}
    late = {e.trial_id for e in events if e.kind == "result_after_stop"}
    assert on_robot.items() <= cancelled.items() and late <= on_robot.keys()  # (and any trial queued for an arm)
    # each operator prompt names the arm to reset and score, and no policy
    assert {r.reset_instructions.split(":")[0] for r in requests} == {f"On {arm}/run_trial" for arm in ARMS}
    assert not any("policy_" in r.reset_instructions for r in requests)
    report = audit(journal)
    assert report.verified, [v.message for v in report.violations]


def test_a_score_waits_for_its_turn_and_a_voided_run_is_cancelled_on_its_arm(
        start_node: Any, probe: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import ScoreAck, SessionStatus, TrialRequest, TrialScore
    from evalstop.srv import CorrectScore, SessionControl

    from evalstop_ros import qos
    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "held.yaml", scoring="operator",
                          metrics=[{"name": "success", "method": "nscore", "alpha": 0.1}],
                          runner={"runners": [f"{arm}/run_trial" for arm in ARMS], "timeout_s": 300.0})
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    acks = probe.collect(ScoreAck, "score_ack", qos.SCORE_ACK_QOS)
    scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "exit_on_finish": True, "exit_linger": 4.0})
    probe.hear()
    def arm(name: str, duration: float) -> None:
        start_operator_arm(start_node, namespace, name, duration)

    def request(trial_id: int) -> TrialRequest:
        return probe.spin_until(lambda: next((r for r in requests if r.trial_id == trial_id), None), 60.0,
                                f"trial {trial_id} requested")

    arm(ARMS[0], 240.0)  # far longer than the test waits for anything
    slow = request(1)  # round 1 on arm_1, the only runner yet
    arm(ARMS[1], 0.2)
    fast = request(3)  # round 2 on arm_2
    assert (slow.reset_instructions.split(":")[0], fast.reset_instructions.split(":")[0]) == (
        f"On {ARMS[0]}/run_trial", f"On {ARMS[1]}/run_trial")
    manager.wait_for(r"trial 3 \(label \w+\) run ok", timeout=60.0)
    score = TrialScore(trial_id=3, token=fast.token, success=True, progress=1.0, scorer="tester")
    deadline = time.monotonic() + 30.0
    while not any(a.trial_id == 3 for a in acks):  # re-sent: DDS may lose it (a re-send is a duplicate)
        assert time.monotonic() < deadline, "no ack of trial 3's score"
        scores.publish(score)
        probe.spin_for(0.5)
    ack = next(a for a in acks if a.trial_id == 3)
    assert ack.accepted and "held" in ack.reason
    void = CorrectScore.Request(trial_id=1, action=CorrectScore.Request.ACTION_VOID, reason="the arm stalled",
                                scorer="tester")
    assert probe.call(CorrectScore, "correct_score", void).ok
    manager.wait_for(rf"trial 1: voided during its run; canceled on runner '{ARMS[0]}/run_trial'", timeout=30.0)
    request(2)  # arm_1 is free long before its 240 s rollout would have ended: the run was cancelled there
    control = SessionControl.Request(command=SessionControl.Request.COMMAND_ABORT, reason="end of the test")
    assert probe.call(SessionControl, "session_control", control).ok
    assert final_status(probe, statuses, timeout=120.0).state_name == "aborted"
    assert manager.wait(timeout=60.0) == 0
    events = read_journal(tmp_path / "journals" / "s1.db").events
    assert [(e.trial_id, e.payload["runner"]) for e in events if e.kind == "trial_cancelled"][0] == (
        1, f"{ARMS[0]}/run_trial")
    assert [e.trial_id for e in events if e.kind == "score_held"] == [3]
    assert not any(e.kind == "runner_result" and e.trial_id == 1 for e in events)
