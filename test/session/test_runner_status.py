"""One ``/diagnostics`` status per runner (:mod:`evalstop_ros.session.runner_status`): what each arm does now,
its runs and faults counted from the journal of a real session served by two runners."""

from __future__ import annotations

import collections
import pathlib

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession, read_journal
from evalstop_ros.session.driver import Action, TrialDriver
from evalstop_ros.session.publishing import OK, WARN
from evalstop_ros.session.runner_status import RunnerNow, RunnerTally, runner_diagnostics

ARMS = ("arm_1/run_trial", "arm_2/run_trial")
RATES = {"pi0": 0.3, "pi1": 0.8}


@pytest.mark.parametrize(("now", "level", "state", "message"), [
    (RunnerNow("a", "/a", True), OK, "idle", "idle"),
    (RunnerNow("a", "/a", True, trial_id=7), OK, "running", "running trial 7"),
    (RunnerNow("a", "/a", True, trial_id=7, cancelled=True), OK, "cancelling",
     "trial 7 cancelled, waiting for the arm to stop"),
    (RunnerNow("a", "/a", True, reset_trial_id=9), OK, "reset", "trial 9 waits for the operator's scene reset"),
    (RunnerNow("a", "/ns/a", False), WARN, "unreachable", "unreachable: no action server '/ns/a'"),
    # a runner that went away mid-run says which trial was on it
    (RunnerNow("a", "/a", False, trial_id=4), WARN, "unreachable", "unreachable: no action server '/a' (trial 4 was on it)"),
    # the one-runner rule's reason wins: no goal goes to that action, reachable or not
    (RunnerNow("a", "/a", True, held="2 servers", trial_id=4), WARN, "held", "held: 2 servers"),
])
def test_each_state_of_an_arm(now: RunnerNow, level: int, state: str, message: str) -> None:
    (status,) = runner_diagnostics([now], RunnerTally(), node="evaluation_manager")
    assert (status.level, status.message, status.name, status.hardware_id) == (
        level, message, "evaluation_manager: runner a", now.action)
    assert dict(status.values)["state"] == state


def test_runs_and_faults_per_arm_are_counted_from_the_journal(tmp_path: pathlib.Path) -> None:
    """Two arms run a session, arm_1's first run fails; the tally of the journal's events says what each arm
    ran, also when read afresh (a restarted manager)."""
    config = sim.make_config(scoring="auto", metrics=[{"name": "success", "method": "nscore"}])
    ran: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    live = RunnerTally()
    with EvaluationSession.open(tmp_path / "s.db", config, "s1", durable=False, plan_key=sim.TEST_KEY) as session:
        session.on_commit = live.observe
        session.start()
        driver = TrialDriver(session, runners=ARMS)
        for _ in range(20):
            for work in driver.dispatch():
                assert work.action is Action.RUN
                ok = not (work.runner == ARMS[0] and not failed)
                driver.run_done(work.trial, ok, 1.0, auto_score=sim.outcome(work.trial.policy_id, work.trial.trial_id,
                                                                          RATES), runner=work.runner)
                ran[work.runner] += 1
                failed[work.runner] += not ok
    replayed = RunnerTally()
    for event in read_journal(tmp_path / "s.db").events:
        replayed.observe(event)
    assert set(ran) == set(ARMS) and failed[ARMS[0]] == 1
    for tally in (live, replayed):
        assert (dict(tally.runs), dict(tally.faults)) == (dict(ran), {ARMS[0]: 1})
    statuses = runner_diagnostics([RunnerNow(arm, f"/{arm}", True) for arm in ARMS], replayed, node="m")
    assert [(dict(s.values)["trials_run"], dict(s.values)["faults"]) for s in statuses] == [
        (str(ran[ARMS[0]]), "1"), (str(ran[ARMS[1]]), "0")]


def test_what_an_arm_is_at_running_cancelled_or_waiting_for_its_reset(tmp_path: pathlib.Path) -> None:
    """:meth:`TrialDriver.runner_work`: a run on its arm, the same run given up at the stop, and (with
    ``confirm_reset``) a trial waiting for the operator's scene reset of its arm."""
    config = sim.make_config(scoring="auto", metrics=[{"name": "success", "method": "nscore"}])
    with EvaluationSession.open(tmp_path / "s.db", config, "s1", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        driver = TrialDriver(session, runners=ARMS)
        first, second = driver.dispatch()
        assert driver.runner_work(first.runner, first.trial) == (False, 0)
        session.abort("end of the test")
        driver.stop("aborted")
        assert driver.runner_work(first.runner, first.trial) == (True, 0)  # still on the arm until it reports
    reset = sim.make_config(scoring="auto", confirm_reset=True, metrics=[{"name": "success", "method": "nscore"}])
    with EvaluationSession.open(tmp_path / "r.db", reset, "s1", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        driver = TrialDriver(session, runners=ARMS)
        waiting = driver.dispatch()
        assert [w.action for w in waiting] == [Action.RESET, Action.RESET]
        assert [driver.runner_work(w.runner, None) for w in waiting] == [(False, w.trial.trial_id) for w in waiting]
