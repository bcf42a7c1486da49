"""One runner per action (session/runner_check.py), the rule both manager nodes apply through the trial
driver: a second node on the goal service (or status/feedback) holds every goal and pauses the session,
journaled with the reason; servers of one node name get a grace period (a restarted runner)."""

from __future__ import annotations

import pathlib

import session_sim as sim

from evalstop_ros.session import EvaluationSession, SessionState, read_journal
from evalstop_ros.session.driver import TrialDriver
from evalstop_ros.session.runner_check import GRACE_S, RunnerCheck, RunnerGraph

ONE = RunnerGraph("/run_trial", 1, (), ("/sim_robot",), ("/sim_robot",))
#: a node that serves only the goal service: it receives every goal, publishes no status
EAVESDROPPER = RunnerGraph("/run_trial", 2, ("/lab/rogue", "/sim_robot"), ("/sim_robot",), ("/sim_robot",))
#: the same node name twice (a runner restarted after kill -9, until DDS drops the dead one)
RESTARTED = RunnerGraph("/run_trial", 2, ("/sim_robot",), ("/sim_robot", "/sim_robot"), ("/sim_robot", "/sim_robot"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_node_serving_only_the_goal_service_is_a_second_runner_at_once() -> None:
    check = RunnerCheck(clock=Clock())
    assert check.look(ONE) == "" and not check.hold
    found = check.look(EAVESDROPPER)
    assert found.startswith("2 runners serve the action '/run_trial' (/lab/rogue, /sim_robot)")
    assert check.duplicate and check.hold
    assert check.look(ONE) == "" and not check.hold  # gone: goals flow again


def test_servers_of_one_name_are_held_for_the_grace_period_then_a_duplicate() -> None:
    clock = Clock()
    check = RunnerCheck(clock=clock)
    assert check.look(RESTARTED) == "" and check.hold and not check.duplicate
    assert check.state.startswith("goals held: 2 servers named /sim_robot")
    clock.now = GRACE_S - 0.1
    assert check.look(RESTARTED) == ""
    clock.now = GRACE_S
    assert check.look(RESTARTED) and check.duplicate
    # an unresolved name (a just-started node) is not yet a second node either
    unknown = RunnerGraph("/run_trial", 2, (), ("/_NODE_NAME_UNKNOWN_", "/sim_robot"), ("/sim_robot",))
    fresh = RunnerCheck(clock=Clock())
    assert fresh.look(unknown) == "" and fresh.hold


def test_the_driver_pauses_a_running_session_on_a_second_runner(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s1.db"
    session = EvaluationSession.open(path, sim.make_config(), "s1", durable=False, plan_key=sim.TEST_KEY)
    with session:
        session.start()
        driver = TrialDriver(session)
        assert driver.watch_runners(ONE) == "" and session.state == SessionState.RUNNING
        reason = driver.watch_runners(EAVESDROPPER)
        assert reason and session.state == SessionState.PAUSED
        assert driver.watch_runners(EAVESDROPPER) == ""  # paused once, the goals stay held
        assert driver.runners.hold
    paused = [e for e in read_journal(path).events if e.kind == "paused"]
    assert [e.payload["reason"] for e in paused] == [reason]
