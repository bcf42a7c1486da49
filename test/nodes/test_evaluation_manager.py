"""evaluation_manager with sim_robot, as processes over DDS: sessions, operator scores, services."""

from __future__ import annotations

import json
import math
import pathlib
import re
import time
from typing import Any

import pytest
from nodes_support import final_status, public_view, same_float, write_config

pytestmark = pytest.mark.usefixtures("ros_env")


def _subscribe_all(probe: Any) -> dict[str, list[Any]]:
    from diagnostic_msgs.msg import DiagnosticArray
    from evalstop.msg import ComparisonStatus, ScoreAck, SessionConfig, SessionEvent, SessionStatus, TrialRequest

    from evalstop_ros import qos

    return {
        "config": probe.collect(SessionConfig, "session_config", qos.CONFIG_QOS),
        "event": probe.collect(SessionEvent, "session_event", qos.JOURNAL_EVENT_QOS),
        "status": probe.collect(SessionStatus, "session_status", qos.STATUS_QOS),
        "comparison": probe.collect(ComparisonStatus, "comparison_status", qos.COMPARISON_QOS),
        "ack": probe.collect(ScoreAck, "score_ack", qos.SCORE_ACK_QOS),
        "request": probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS),
        "diagnostics": probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS),
    }


def _manager_params(tmp_path: pathlib.Path, config: pathlib.Path, **extra: Any) -> dict[str, Any]:
    """The manager's parameters; with ``exit_on_finish`` it lingers 0.2 s (not its 2 s): every test
    here has heard the manager before its session began and waits for the final status itself."""
    return {"config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
            "journal_fsync": False, "exit_linger": 0.2, **extra}


def test_paired_session_reaches_the_decision_of_the_offline_analysis(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session import load_config, offline_decisions, read_journal

    config = write_config(tmp_path / "session.yaml")
    topics = _subscribe_all(probe)
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, exit_on_finish=True))
    probe.hear()  # the session waits for its runner: no early ack or status is missed
    # 0.1 vs 0.9: STEP decides within n_max 50 with probability 1 - 1.5e-5 (Monte Carlo, 200 000
    # sequences); at 0.3 vs 0.8 it failed to 1.35e-3 -- once in CI, with N-SCORE undecided too
    start_node("sim_robot", params={"success_rates": [0.1, 0.9], "duration": 0.0})
    final = final_status(probe, topics["status"])
    assert manager.wait() == 0
    manager.wait_for(r"session s1 finished: \d+ trials scored, 2/2 tests decided")

    offline = offline_decisions(load_config(config), tmp_path / "journals" / "s1.db")
    assert [(o.policy_a, o.policy_b, o.metric) for o in offline] == \
        [(c.policy_a, c.policy_b, c.metric) for c in final.comparisons]
    for live, result in zip(final.comparisons, (o.result for o in offline)):
        assert (live.decision, live.stopping_trial, live.n) == \
            (int(result.decision), result.stopping_trial or 0, result.n_observed)
        assert same_float(live.pvalue, result.pvalue), (live.pvalue, result.pvalue)
        assert same_float(live.evalue, float(result.evalues[-1])), (live.evalue, result.evalues[-1])
    assert any(c.decision in (1, 2) for c in final.comparisons), "0.1 vs 0.9 should be decided"
    # every scored trial was acknowledged, none rejected; the request topic ends with "nothing pending"
    probe.spin_until(lambda: len(topics["ack"]) >= final.trials_done, 10.0, "all acks")
    assert all(a.accepted and not a.reason for a in topics["ack"])
    probe.spin_until(lambda: topics["request"] and topics["request"][-1].trial_id == 0, 10.0, "the final request")
    # comparison_status carried each decision; diagnostics one status per comparison + the session
    probe.spin_until(lambda: {(c.metric, c.decision) for c in final.comparisons}
                     <= {(c.metric, c.decision) for c in topics["comparison"]}, 10.0, "every decision on comparison_status")
    probe.spin_until(lambda: topics["diagnostics"], 10.0, "/diagnostics")
    names = [s.name for s in topics["diagnostics"][-1].status]
    assert names[0] == "evaluation_manager: session" and len(names) == 1 + len(final.comparisons)
    # session_config and session_event replay the journal exactly (a recording is self-contained)
    journal = read_journal(tmp_path / "journals" / "s1.db")
    # ... through the public view until the key is revealed (session/public_view.py), then with the real names
    from evalstop_ros.session.public_view import public_config_json

    view = public_view(tmp_path / "journals" / "s1.db")
    probe.spin_until(lambda: len(topics["config"]) >= 2, 10.0, "the config again, after the reveal")
    first, config_msg = topics["config"][0], topics["config"][-1]
    assert (config_msg.session_id, config_msg.config_json, config_msg.config_hash) == \
        ("s1", journal.config_json, journal.config_hash)
    assert first.config_json == public_config_json(journal.config_json, view) != journal.config_json
    probe.spin_until(lambda: len(topics["event"]) >= len(journal.events), 10.0, "every journal event")
    from evalstop_ros.session.blinding import seal
    reveal = next(e.seq for e in journal.events if e.kind == "key_revealed")
    assert [(e.seq, e.kind, e.trial_id, json.loads(e.payload_json)) for e in topics["event"]] == \
        [(e.seq, e.kind, e.trial_id or 0, view.event_payload(e.kind, seal(e.kind, e.payload)) if e.seq < reveal
          else seal(e.kind, e.payload)) for e in journal.events]  # requests sealed, stand-ins until the reveal


def test_three_policies_drop_the_decided_policy(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    # policy_a fails almost always; b and c are alike: a's two comparisons decide early, a
    # leaves the rotation, b vs c runs on to its budget.  Success only, STEP at 0.15 / 3
    # comparisons = 0.05 two-sided (the shipped n_max 50 table at 0.025 per direction).
    config = write_config(tmp_path / "three.yaml", policies=["policy_a", "policy_b", "policy_c"],
                          metrics=[{"name": "success", "method": "step", "alpha": 0.15}], alpha=0.15, n_max=50)
    topics = _subscribe_all(probe)
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, exit_on_finish=True))
    probe.hear()
    start_node("sim_robot", params={"policies": ["policy_a", "policy_b", "policy_c"],
                                    "success_rates": [0.02, 0.9, 0.9], "progress_means": [0.1, 0.4, 0.4],
                                    "duration": 0.0})
    final = final_status(probe, topics["status"], timeout=180.0)
    assert manager.wait() == 0
    by_pair = {(c.policy_a, c.policy_b): c for c in final.comparisons}
    assert by_pair[("policy_a", "policy_b")].decision == 1 and by_pair[("policy_a", "policy_c")].decision == 1
    assert by_pair[("policy_b", "policy_c")].n > max(by_pair[("policy_a", "policy_b")].n,
                                                     by_pair[("policy_a", "policy_c")].n)
    view = public_view(tmp_path / "journals" / "s1.db")  # the running statuses name stand-ins only
    running = [s for s in topics["status"] if s.state == 1]
    assert not {p for s in running for p in s.active_policies} & {"policy_a", "policy_b", "policy_c"}
    active = [[view.restore(p) for p in s.active_policies] for s in running]
    assert any(sorted(a) == ["policy_b", "policy_c"] for a in active), \
        f"policy_a never dropped: {sorted({tuple(a) for a in active})} in {len(running)} statuses"
    # once dropped, never back
    dropped_at = next(i for i, a in enumerate(active) if "policy_a" not in a)
    assert all("policy_a" not in a for a in active[dropped_at:])
    assert final.letters, "letters for three scored policies"


def test_operator_scores_with_tokens_and_every_rejection_has_a_reason(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import TrialScore
    from rclpy.parameter import Parameter

    from evalstop_ros import qos

    # Operator scoring; progress by N-SCORE over 2 pairs: the session ends after 4 trials.
    config = write_config(tmp_path / "operator.yaml", scoring="operator", n_max=2,
                          metrics=[{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}])
    topics = _subscribe_all(probe)
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config))
    scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)

    def awaiting_score(trial_id: int) -> Any:
        return probe.spin_until(
            lambda: next((s for s in reversed(topics["status"]) if s.pending_trial_id == trial_id
                          and s.state_name == "running:awaiting_score"), None), 20.0, f"trial {trial_id} to be run")

    def send(trial_id: int, token: str, progress: float, success: bool = False) -> Any:
        before = len(topics["ack"])
        scores.publish(TrialScore(trial_id=trial_id, token=token, success=success, progress=progress,
                                  scorer="tester", notes="from the test"))
        probe.spin_until(lambda: len(topics["ack"]) > before, 20.0, f"the ack of a score for trial {trial_id}")
        return topics["ack"][-1]

    awaiting_score(1)
    request = probe.spin_until(lambda: next((r for r in topics["request"] if r.trial_id == 1), None), 10.0, "trial 1")
    assert request.label and request.token and request.reset_instructions == "Block at spot " + request.initial_condition[1:] + "."
    token = request.token
    rejected = [  # (trial id, token, progress, published and logged reason)
        (1, "0" * len(token), 0.5, "wrong token for trial 1"),
        (99, token, 0.5, "unknown trial 99"),
        (1, token, math.nan, "`progress` must be finite; found nan"),
        (1, token, 1.5, "`progress` must lie in [0, 1]; found 1.5"),
        (1, token, -0.25, "`progress` must lie in [0, 1]; found -0.25"),
    ]
    for trial_id, sent_token, progress, reason in rejected:
        ack = send(trial_id, sent_token, progress)
        assert (ack.accepted, ack.duplicate, ack.reason) == (False, False, reason)
        manager.wait_for(rf"\[WARN\] \[\S*evaluation_manager\]: score for trial {trial_id} \(scorer 'tester'\) "
                         rf"rejected: {_re(reason)}")
    ack = send(1, token, 0.5)
    assert (ack.trial_id, ack.accepted, ack.duplicate, ack.reason) == (1, True, False, "")
    manager.wait_for(r"trial 1 \(label \w+\) scored: success=0 progress=0.5")
    ack = send(1, token, 0.5)  # the same score again: a retransmission
    assert (ack.accepted, ack.duplicate) == (True, True) and "duplicate" in ack.reason
    ack = send(1, token, 0.7)
    assert (ack.accepted, ack.reason) == (False, "trial 1 is already scored; use a correction to change it")

    # a late operator terminal gets the pending trial (transient local, every open trial's request kept)
    awaiting_score(2)
    from evalstop.msg import TrialRequest
    late = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    probe.spin_until(lambda: any(r.trial_id == 2 for r in late), 10.0, "the latched request of trial 2")

    # the pre-registered settings cannot change mid-session
    result = probe.set_parameters("evaluation_manager", [Parameter("alpha", value=0.1)])[0]
    assert not result.successful
    assert result.reason.startswith("cannot change `alpha` while session 's1' is running: the test is pre-registered")
    manager.wait_for(r"parameter change refused: cannot change `alpha`")

    token2 = late[-1].token
    for trial_id, progress in ((2, 0.75), (3, 0.25), (4, 1.0)):
        if trial_id > 2:
            awaiting_score(trial_id)
            token2 = probe.spin_until(lambda: next((r.token for r in topics["request"] if r.trial_id == trial_id), None),
                                      10.0, f"trial {trial_id}")
        assert send(trial_id, token2, progress).accepted
    final = final_status(probe, topics["status"])
    assert final.state_name == "finished" and final.trials_done == 4
    # scores after the end are rejected with a reason
    ack = send(5, "whatever", 0.5)
    assert (ack.accepted, ack.reason) == (False, "unknown trial 5")
    ack = send(4, token2, 0.0)
    assert (ack.accepted, ack.reason) == (False, "trial 4 is already scored; use a correction to change it")
    assert manager.stop() == 0


def test_pause_resume_undo_and_abort(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus, TrialScore
    from evalstop.srv import CorrectScore, SessionControl

    from evalstop_ros import qos

    config = write_config(tmp_path / "control.yaml", scoring="operator")
    topics = _subscribe_all(probe)
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, exit_on_finish=True))
    scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
    probe.spin_until(lambda: any(s.state_name == "running:awaiting_score" for s in topics["status"]), 20.0, "trial 1")
    token = probe.spin_until(lambda: next((r.token for r in topics["request"] if r.trial_id == 1), None), 10.0, "t1")

    control = SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason="operator break")
    assert probe.call(SessionControl, "session_control", control).ok
    probe.spin_until(lambda: topics["status"][-1].state == SessionStatus.STATE_PAUSED, 10.0, "paused")
    scores.publish(TrialScore(trial_id=1, token=token, success=True, progress=1.0, scorer="tester"))
    probe.spin_until(lambda: topics["ack"], 10.0, "ack")
    assert topics["ack"][-1].reason == "session is paused; scores are accepted only while it runs"
    again = probe.call(SessionControl, "session_control", control)  # a re-send: nothing changes
    assert again.ok and topics["status"][-1].state == SessionStatus.STATE_PAUSED
    control.command = SessionControl.Request.COMMAND_RESUME
    assert probe.call(SessionControl, "session_control", control).ok

    scores.publish(TrialScore(trial_id=1, token=token, success=True, progress=1.0, scorer="tester"))
    probe.spin_until(lambda: len(topics["ack"]) >= 2 and topics["ack"][-1].accepted, 10.0, "accepted ack")
    undo = CorrectScore.Request(trial_id=0, action=CorrectScore.Request.ACTION_UNDO, reason="wrong button",
                                scorer="tester")
    response = probe.call(CorrectScore, "correct_score", undo, resend_after=None)  # "undo the last" is not idempotent
    assert response.ok and response.message.startswith("trial 1 voided; it runs again as trial ")
    manager.wait_for(r"trial 1 \(label \w+\) voided: wrong button \(by tester\)")
    undo.trial_id = 7
    response = probe.call(CorrectScore, "correct_score", undo)
    assert not response.ok and response.message.startswith("ACTION_UNDO takes trial_id 0")
    no_reason = CorrectScore.Request(trial_id=1, action=CorrectScore.Request.ACTION_CORRECT, progress=0.5)
    assert probe.call(CorrectScore, "correct_score", no_reason).message == "a reason is required"

    control = SessionControl.Request(command=SessionControl.Request.COMMAND_ABORT, reason="end of the test")
    assert probe.call(SessionControl, "session_control", control).ok
    final = final_status(probe, topics["status"])
    assert final.state == SessionStatus.STATE_ABORTED
    assert manager.wait() == 0
    manager.wait_for(r"session s1 aborted: end of the test")


def test_automatic_score_is_held_while_paused_and_survives_a_crash(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus
    from evalstop.srv import SessionControl

    from evalstop_ros import qos

    config = write_config(tmp_path / "auto.yaml")
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    start_node("sim_robot", params={"duration": 3.0})  # slow rollouts: time to pause during one
    params = _manager_params(tmp_path, config)
    manager = start_node("evaluation_manager", params=params)
    pause = SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason="coffee")
    resume = SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME)

    # paused during a rollout: its score is journaled and held, and recorded on resume (no re-run)
    manager.wait_for(r"trial 1 \(label \w+, attempt 1\): runner goal sent")
    assert probe.call(SessionControl, "session_control", pause).ok
    held = int(manager.wait_for(r"trial (\d+): automatic score held until the session resumes").group(1))
    assert probe.call(SessionControl, "session_control", resume).ok
    manager.wait_for(rf"trial {held} \(label \w+\) scored")
    assert "automatic score missing" not in manager.output

    # the same, but the manager dies while holding the score: restarted (still paused, as
    # journaled) and resumed, it submits the journaled score; the trial does not run again
    manager.wait_for(rf"trial {held + 1} \(label \w+, attempt 1\): runner goal sent")
    assert probe.call(SessionControl, "session_control", pause).ok
    held = int(manager.wait_for(r"trial (\d+): automatic score held until the session resumes", count=2).group(1))
    manager.kill()
    probe.spin_for(0.5)  # deliver what the killed process sent, then forget it
    statuses.clear()
    restarted = start_node("evaluation_manager", params=params)
    restarted.wait_for(r"session s1 resumed from its journal \(paused, \d+ trials scored\)")
    # a status from the new process: discovery is done, a request now reaches it (until then
    # the dead server may still count as "ready" and swallow the request)
    probe.spin_until(lambda: statuses, 20.0, "a status from the restarted manager")
    assert probe.call(SessionControl, "session_control", resume).ok
    restarted.wait_for(rf"trial {held} \(label \w+\) scored")
    assert "automatic score missing" not in restarted.output
    assert not any(f"trial {held} (label" in line and "runner goal sent" in line
                   for line in restarted.output.splitlines())
    assert restarted.stop() == 0


def test_an_auto_scored_run_without_its_score_waits_for_the_operator_across_a_restart(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    """``scoring: auto`` but the runner sends no score: the trial waits for trial_score, and after
    a kill -9 the restarted manager still waits (the rule is the journal's: session/driver.py), it
    does not run the trial again; the max_attempts parameter is refused while the session runs."""
    from evalstop.msg import SessionStatus, TrialRequest, TrialScore
    from rclpy.parameter import Parameter

    from evalstop_ros import qos

    config = write_config(tmp_path / "auto.yaml", scoring="auto")
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    start_node("sim_robot", params={"auto_score": False, "duration": 0.0})
    params = _manager_params(tmp_path, config)
    manager = start_node("evaluation_manager", params=params)
    manager.wait_for(r"trial 1: scoring is 'auto' but the runner returned no score; waiting for trial_score")
    result = probe.set_parameters("evaluation_manager", [Parameter("max_attempts", value=5)])[0]
    assert not result.successful and result.reason.startswith("cannot change `max_attempts` while session 's1'")
    manager.kill()
    probe.spin_for(0.5)  # deliver what the killed process sent, then forget it
    statuses.clear()
    restarted = start_node("evaluation_manager", params=params)
    restarted.wait_for(r"session s1 resumed from its journal \(running, 0 trials scored\)")
    restarted.wait_for(r"trial 1: scoring is 'auto' but the runner returned no score; waiting for the operator's score")
    requests = probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS)
    token = probe.spin_until(lambda: next((r.token for r in requests if r.trial_id == 1), None), 20.0, "trial 1")
    scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
    deadline = time.monotonic() + 30.0
    while not re.search(r"trial 1 \(label \w+\) scored", restarted.output):  # re-sent: DDS may lose it
        assert time.monotonic() < deadline, restarted.output
        scores.publish(TrialScore(trial_id=1, token=token, success=True, progress=1.0, scorer="tester"))
        probe.spin_for(0.5)
    restarted.wait_for(r"trial 1 \(label \w+\) scored: success=1")
    restarted.wait_for(r"trial 2 \(label \w+, attempt 1\): runner goal sent")
    assert not any(line for line in restarted.output.splitlines() if "trial 1 (label" in line and "runner goal sent" in line)
    assert restarted.stop() == 0


def test_parameters_override_the_config_before_the_session_starts(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    config = write_config(tmp_path / "override.yaml", n_max=50,
                          metrics=[{"name": "progress", "method": "wsr", "alpha": 0.05}])
    topics = _subscribe_all(probe)
    manager = start_node("evaluation_manager", params=_manager_params(
        tmp_path, config, exit_on_finish=True, exit_linger=0.5, n_max=3, method="nscore", alpha=0.2))
    probe.hear()  # six quick trials and a short linger: hear the manager first
    start_node("sim_robot", params={"duration": 0.0})
    final = final_status(probe, topics["status"])
    assert manager.wait() == 0
    (comparison,) = final.comparisons
    assert (comparison.method, comparison.n, comparison.alpha) == ("nscore", 3, pytest.approx(0.2))
    assert comparison.decision == 3 and final.trials_done == 6


#: A bad value and a file that is not text: the manager turns every ``ConfigError`` of ``load_config``
#: into its one fatal line and exit 2. Each value's own message, and that nothing is journaled before
#: it, are checked below ROS (test/session/test_config_bounds.py, test_session_config.py).
BAD_CONFIGS = {
    "n_max 1e12": ({"n_max": 1e12}, r"n_max: Input should be less than or equal to 100000; found 1000000000000\.0"),
    "not UTF-8": (None, r"not UTF-8 text \(byte 0xff at offset \d+\)"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_exits_with_status_2_leaves_no_journal_and_the_id_stays_usable(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, case: str) -> None:
    overrides, message = BAD_CONFIGS[case]
    config = tmp_path / "session.yaml"
    if overrides is None:
        config.write_bytes(write_config(config).read_bytes().replace(b"push", b"p\xffsh"))
    else:
        write_config(config, **overrides)
    params = _manager_params(tmp_path, config, exit_on_finish=True)
    manager = start_node("evaluation_manager", params=params)
    assert manager.wait(timeout=120.0) == 2  # a deadline: start-up is slow on a loaded machine
    fatal = [line for line in manager.output.splitlines() if "[FATAL]" in line or "[ERROR]" in line]
    assert len(fatal) == 1 and re.search(r"\[FATAL\] \[\S*evaluation_manager\]: cannot start: invalid config "
                                         r".*session\.yaml: " + message, fatal[0]), manager.output
    assert "Traceback" not in manager.output
    assert not list(pathlib.Path(params["journal_dir"]).glob("*.db*"))  # nothing journaled
    write_config(config, n_max=4, metrics=[{"name": "success", "method": "nscore", "alpha": 0.05}])  # fixed
    topics = _subscribe_all(probe)
    fixed = start_node("evaluation_manager", params=params)
    probe.hear(timeout=120.0)  # else a fast session can end, and the manager exit, before the probe matched
    start_node("sim_robot", params={"duration": 0.0})
    final = final_status(probe, topics["status"])
    assert fixed.wait(timeout=120.0) == 0 and final.session_id == params["session_id"]


def _re(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(("argument", "message"), [
    ("n_max:=1.5", r"n_max"),
    ("alpha:=2.0", r"`alpha` must lie in \[0\.0, 1\.0\]; found 2\.0"),
    ("max_attempts:=0", r"`max_attempts` must lie in \[1, 1000\]; found 0"),
])
def test_invalid_parameters_give_one_fatal_line_and_exit_2(
        start_node: Any, tmp_path: pathlib.Path, argument: str, message: str) -> None:
    config = write_config(tmp_path / "session.yaml")
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config),
                         ros_args=["-p", argument])
    assert manager.wait() == 2
    fatal = [line for line in manager.output.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and re.search(r"invalid parameters: .*" + message, fatal[0]), manager.output
    assert "Traceback" not in manager.output and str(config) not in fatal[0]


def test_a_runner_text_reaches_no_operator_channel_of_the_manager(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    """sim_robot's failure text carries a detail after its category and id (as policy_runner's
    guard refusals do): the manager shows only the category and the id on session_event, the
    paused reason, /rosout and /diagnostics, and journals the full text sealed (issue 19)."""
    from rcl_interfaces.msg import Log
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy

    from evalstop_ros.session import read_journal

    config = write_config(tmp_path / "session.yaml", n_max=4,
                          metrics=[{"name": "success", "method": "nscore", "alpha": 0.05}])
    topics = _subscribe_all(probe)
    rosout = probe.collect(Log, "/rosout", QoSProfile(depth=1000, reliability=QoSReliabilityPolicy.RELIABLE,
                                                      durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config, max_attempts=2))
    start_node("sim_robot", params={"failure_probability": 1.0, "duration": 0.0})
    final = probe.spin_until(lambda: next((s for s in topics["status"] if s.state == 2), None), 60.0, "paused")
    paused = probe.spin_until(lambda: next((json.loads(e.payload_json) for e in topics["event"]
                                            if e.kind == "paused"), None), 20.0, "the paused event")
    assert re.fullmatch(r"runner failed 2 times in a row on trial 1: robot fault \(error [0-9a-f]{8}\)",
                        paused["reason"]), paused
    manager.wait_for(r"session paused: runner failed 2 times on trial 1")
    probe.spin_until(lambda: any(a.status and "runner_faults" in [v.key for v in a.status[0].values]
                                 for a in topics["diagnostics"]), 20.0, "diagnostics")
    published = [e.payload_json for e in topics["event"]]
    published += [m.msg for m in rosout if m.name.endswith("evaluation_manager")]
    published += [f"{s.message} {[(v.key, v.value) for v in s.values]}" for a in topics["diagnostics"] for s in a.status]
    published += [final.state_name]
    assert published and not [text for text in published if "injected" in text or "failure_probability" in text]
    journal = read_journal(pathlib.Path(_manager_params(tmp_path, config)["journal_dir"]) / "s1.db")
    # the config file sets no limit: the max_attempts parameter filled it in, journaled with the session
    assert json.loads(journal.config_json)["runner"]["max_attempts"] == 2
    results = [e for e in journal.events if e.kind == "runner_result"]
    assert len(results) == 2 and all(re.fullmatch(r"robot fault \(error [0-9a-f]{8}\): injected \(failure_probability 1\)", r.payload["detail"]) for r in results)
    # the manager made its journal directory private, and every journal file, while the session runs
    journals = pathlib.Path(_manager_params(tmp_path, config)["journal_dir"])
    assert journals.stat().st_mode & 0o777 == 0o700
    assert {p.name: p.stat().st_mode & 0o777 for p in journals.iterdir()} == {
        name: 0o600 for name in ("s1.db", "s1.db-wal", "s1.db-shm", "s1.db.head", "s1.db.lock")}
    assert manager.stop() == 0
