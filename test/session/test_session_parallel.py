"""Several runners, one session (:meth:`TrialDriver.dispatch`, docs/parallel.md): trials run at once on
every runner, results are journaled as they arrive, scores enter the tests in plan order, so the
decisions are a serial session's whatever the durations; at the stop what still runs is cancelled and
a late result is journaled as after the stop, never used."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession, SessionState, read_journal
from evalstop_ros.session.driver import Action, TrialDriver, Verdict
from evalstop_ros.session.errors import ConfigError, SessionError
from evalstop_ros.session.offline import offline_decisions
from evalstop_ros.session.publishing import diagnostics
from evalstop_ros.session.runner_check import RunnerGraph
from evalstop_ros.session.runner_pool import RunnerPool

RATES = {"pi0": 0.3, "pi1": 0.8}
ARMS = ("arm_1/run_trial", "arm_2/run_trial", "arm_3/run_trial")
AUTO = {"scoring": "auto", "metrics": [{"name": "success", "method": "nscore"}]}


def open_session(path: pathlib.Path, **overrides: object) -> EvaluationSession:
    session = EvaluationSession.open(path, sim.make_config(**{**AUTO, **overrides}), "s1", durable=False,
                                     plan_key=sim.TEST_KEY)
    if session.state == SessionState.IDLE:
        session.start()
    return session


def slow_failures(success: bool, trial_id: int) -> float:
    """``end_on_success``: a success ends at once, a failure runs to the timeout (plus jitter)."""
    return (1.0 if success else 10.0) + sim._uniform("jitter", trial_id)


def run_parallel(driver: TrialDriver, duration: Callable[[bool, int], float] = slow_failures,
                 until: Callable[[TrialDriver], bool] = lambda driver: driver.finished) -> dict[str, list[int]]:
    """Run ``driver``'s session on simulated runners (a discrete-event clock) until ``until``; the runs
    still on a runner then are returned (runner -> trial ids), not reported."""
    clock, running = 0.0, {}
    ran: dict[str, list[int]] = {}
    while not until(driver):
        for work in driver.dispatch():
            assert work.action is Action.RUN
            success, _ = sim.outcome(work.trial.policy_id, work.trial.trial_id, RATES)
            running[work.runner] = (clock + duration(success, work.trial.trial_id), work.trial)
            ran.setdefault(work.runner, []).append(work.trial.trial_id)
        assert running, "no runner got work in a running session"
        runner = min(running, key=lambda r: running[r][0])
        end, trial = running.pop(runner)
        clock = end
        score = sim.outcome(trial.policy_id, trial.trial_id, RATES)
        assert driver.run_done(trial, True, end, auto_score=score, runner=runner).verdict is not Verdict.IGNORED
    return {runner: [trial.trial_id] for runner, (_, trial) in running.items()}


def serial_decisions(path: pathlib.Path) -> list[tuple[str, int, int | None]]:
    with EvaluationSession.open(path, sim.make_config(**AUTO), "s1", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        driver = TrialDriver(session)
        while (upcoming := driver.advance()).action is Action.RUN:
            assert upcoming.trial is not None
            driver.run_done(upcoming.trial, True, 1.0,
                            auto_score=sim.outcome(upcoming.trial.policy_id, upcoming.trial.trial_id, RATES))
        assert session.state == SessionState.FINISHED
        return [(c.decision.name, c.n, c.stopping_trial) for c in session.comparisons()]


def test_runners_overlap_and_decide_as_a_serial_session(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "parallel.db"
    with open_session(path) as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        run_parallel(driver)
        assert session.state == SessionState.FINISHED
        live = [(c.decision.name, c.n, c.stopping_trial) for c in session.comparisons()]
        cancelled = driver.stop("the session is decided")
    assert live == serial_decisions(tmp_path / "serial.db")
    assert live[0][0] != "CONTINUE"
    events = read_journal(path).events
    dispatched = [e for e in events if e.kind == "trial_dispatched"]
    assert {e.payload["runner"] for e in dispatched} == set(ARMS[:2])
    # results arrive out of plan order, and scores enter the tests in it
    results = [e.trial_id for e in events if e.kind == "runner_result"]
    scored = [e.trial_id for e in events if e.kind == "score_accepted"]
    assert results != sorted(results) and scored == sorted(scored)
    given_up = [e.trial_id for e in events if e.kind == "trial_cancelled"]  # running, and a round's rest never started
    assert {w.trial.trial_id for w in cancelled} <= set(given_up) and given_up
    offline = offline_decisions(sim.make_config(**AUTO), path)
    assert [(r.result.decision.name, r.result.n_observed, r.result.stopping_trial) for r in offline] == live
    sim.audit_verified(path)


def test_a_result_after_the_stop_is_journaled_and_never_used(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "late.db"
    with open_session(path) as session:
        driver = TrialDriver(session, runners=ARMS)
        run_parallel(driver)
        decided = [(c.decision.name, c.n) for c in session.comparisons()]
        cancelled = driver.stop("the session is decided")
        assert cancelled, "three arms with slow failures: a run is still on a robot at the stop"
        for work in cancelled:
            verdict = driver.run_done(work.trial, True, 12.0, auto_score=(True, 1.0), runner=work.runner)
            assert verdict.verdict is Verdict.AFTER_STOP and "after the stop" in verdict.message
        assert [(c.decision.name, c.n) for c in session.comparisons()] == decided
    events = read_journal(path).events
    late = [e for e in events if e.kind == "result_after_stop"]
    assert [e.trial_id for e in late] == [w.trial.trial_id for w in cancelled]
    assert all(e.payload["runner"] in ARMS for e in late)
    assert not [e for e in events if e.kind == "score_accepted" and e.trial_id in {w.trial.trial_id for w in cancelled}]
    sim.audit_verified(path)


def test_a_paired_round_stays_on_one_runner(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "rounds.db"
    with open_session(path) as session:
        run_parallel(TrialDriver(session, runners=ARMS[:2]))
    events = read_journal(path).events
    rounds = {e.trial_id: e.payload["round"] for e in events if e.kind == "trial_requested"}
    runner_of: dict[int, set[str]] = {}
    for e in events:
        if e.kind == "trial_dispatched":
            runner_of.setdefault(rounds[e.trial_id], set()).add(e.payload["runner"])
    assert len(runner_of) > 4 and all(len(runners) == 1 for runners in runner_of.values())
    assert len({next(iter(r)) for r in runner_of.values()}) == 2  # and both runners worked


def test_a_restart_with_results_waiting_reproduces_the_plan_order(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "crash.db"
    with open_session(path) as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        run_parallel(driver, until=lambda d: d.session.status().trials_scored >= 6 and any(
            session.trial_phase(t.trial_id) == "score" for t in session.open_trials()))
        waiting = [t for t in session.open_trials() if session.trial_phase(t.trial_id) == "score"]
    # crash: the journal alone holds the results that wait for their predecessors
    with open_session(path) as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        run_parallel(driver)
        live = [(c.decision.name, c.n, c.stopping_trial) for c in session.comparisons()]
        driver.stop("the session is decided")
    assert live == serial_decisions(tmp_path / "serial.db")
    assert waiting, "two arms with slow failures: a later trial's result waits for an earlier one at the crash"
    events = read_journal(path).events
    assert [e.trial_id for e in events if e.kind == "score_accepted"] == sorted(
        e.trial_id for e in events if e.kind == "score_accepted")
    sim.audit_verified(path)


def test_an_operator_score_for_a_later_trial_is_held_for_its_turn(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "operator.db"
    with open_session(path, scoring="operator") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        first, other = driver.dispatch()  # round 1 on the first arm, round 2 on the other
        assert (first.trial.trial_id, other.trial.trial_id) == (1, 3) and first.runner != other.runner
        driver.run_done(other.trial, True, 1.0, runner=other.runner)
        held = session.submit_score(3, other.trial.token, True, 1.0, operator="op")
        assert held.accepted and held.held and not held.duplicate and "held until trial 1 is scored" in held.reason
        assert session.submit_score(3, other.trial.token, True, 1.0, operator="op").duplicate  # a re-send
        changed = session.submit_score(3, other.trial.token, False, 0.0, operator="op")
        assert not changed.accepted and "held" in changed.reason
        assert session.status().trials_scored == 0
        driver.run_done(first.trial, True, 1.0, runner=first.runner)
        assert session.submit_score(1, first.trial.token, False, 0.2, operator="op").accepted
        assert session.status().trials_scored == 1  # trial 2 is not scored yet: 3 still waits
        second = next(w for w in driver.dispatch() if w.runner == first.runner)
        assert (second.runner, second.trial.trial_id) == (first.runner, 2)
        driver.run_done(second.trial, True, 1.0, runner=second.runner)
        assert session.submit_score(2, second.trial.token, True, 1.0, operator="op").accepted
        assert session.status().trials_scored == 3
        resent = session.submit_score(3, other.trial.token, True, 1.0, operator="op")
        assert resent.accepted and resent.duplicate
        session.abort("enough for this test")
        driver.stop("aborted")
    events = read_journal(path).events
    scored = [(e.kind, e.trial_id, e.payload.get("held", False)) for e in events
              if e.kind in ("score_held", "score_accepted")]
    assert scored == [("score_held", 3, False), ("score_accepted", 1, False), ("score_accepted", 2, False),
                      ("score_accepted", 3, True)]
    sim.audit_verified(path)


def test_a_held_score_the_stop_leaves_uncounted_is_journaled_and_audits(tmp_path: pathlib.Path) -> None:
    """A score held for its turn when the session stops stays held, never counted, and the audit
    verifies the journal (over ROS, test_record_e2e's two-arm session meets this only when its
    decision falls among held scores)."""
    path = tmp_path / "held.db"
    with open_session(path, scoring="operator") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        first, other = driver.dispatch()
        driver.run_done(other.trial, True, 1.0, runner=other.runner)
        assert session.submit_score(other.trial.trial_id, other.trial.token, True, 1.0, operator="op").held
        session.abort("the operator ends the session")
        driver.stop("aborted")
    events = read_journal(path).events
    assert [e.trial_id for e in events if e.kind == "score_held"] == [other.trial.trial_id]
    assert not [e for e in events if e.kind == "score_accepted"]
    sim.audit_verified(path)


def test_held_scores_in_a_row_are_no_runner_faults(tmp_path: pathlib.Path) -> None:
    """An operator who scores a fast arm's trials while a slow arm still runs the head trial: each score is
    held (``score_held``), none counts as a failed run, so the session does not pause at the fault limit."""
    with open_session(tmp_path / "held.db", scoring="operator") as session:
        driver = TrialDriver(session, runners=ARMS[:2], max_ahead=8)  # three rounds past the head
        slow, fast = driver.dispatch()
        ran = []
        for _ in range(2):  # two rounds on the fast arm, trial 1 still on the slow one
            work = fast
            while work.trial.round == fast.trial.round:
                driver.run_done(work.trial, True, 0.1, runner=work.runner)
                ran.append(work.trial)
                work = next(w for w in driver.dispatch() if w.runner == fast.runner)
            fast = work
        outcomes = [session.submit_score(t.trial_id, t.token, True, 1.0, operator="op") for t in ran]
        assert len(ran) == 4 and all(o.accepted and o.held for o in outcomes), outcomes
        assert (session.state, session.runner_faults) == (SessionState.RUNNING, 0)
        assert driver.dispatch() == [] and not driver.finished  # both arms busy; nothing paused


def test_operator_scores_sent_in_completion_order_decide_as_a_serial_session(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "completion.db"
    operator = {"scoring": "operator"}
    with open_session(path, **operator) as session:
        driver = TrialDriver(session, runners=ARMS)
        clock, running = 0.0, {}
        while not driver.finished:
            for work in driver.dispatch():
                success, _ = sim.outcome(work.trial.policy_id, work.trial.trial_id, RATES)
                running[work.runner] = (clock + slow_failures(success, work.trial.trial_id), work.trial)
            runner = min(running, key=lambda r: running[r][0])
            clock, trial = running.pop(runner)
            driver.run_done(trial, True, clock, runner=runner)
            success, progress = sim.outcome(trial.policy_id, trial.trial_id, RATES)
            outcome = session.submit_score(trial.trial_id, trial.token, success, progress, operator="op")
            assert outcome.accepted or driver.finished, outcome.reason  # at once, whatever came first
        live = [(c.decision.name, c.n, c.stopping_trial) for c in session.comparisons()]
        driver.stop("the session is decided")
    assert live == serial_decisions(tmp_path / "serial.db")
    events = read_journal(path).events
    assert any(e.kind == "score_held" for e in events), "three arms with slow failures: some score waited"
    assert not any(e.kind == "score_rejected" for e in events)
    scored = [e.trial_id for e in events if e.kind == "score_accepted"]
    assert scored == sorted(scored)
    offline = offline_decisions(sim.make_config(**{**AUTO, **operator}), path)
    assert [(r.result.decision.name, r.result.n_observed, r.result.stopping_trial) for r in offline] == live
    sim.audit_verified(path)


def test_a_held_score_survives_a_crash_and_enters_after_its_predecessors(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "held.db"
    with open_session(path, scoring="operator") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        first, other = driver.dispatch()
        driver.run_done(other.trial, True, 1.0, runner=other.runner)
        assert session.submit_score(3, other.trial.token, True, 0.9, operator="op").accepted
        driver.run_done(first.trial, True, 1.0, runner=first.runner)
        assert session.submit_score(1, first.trial.token, True, 1.0, operator="op").accepted
    # crash: the held score is in the journal alone
    with open_session(path, scoring="operator") as session:
        assert session.status().trials_scored == 1
        driver = TrialDriver(session, runners=ARMS[:2])
        second = next(w for w in driver.dispatch() if w.trial.trial_id == 2)
        session.pause("the operator steps away")
        assert session.void_score(2, "the scene was knocked over before the run").applied
        assert session.status().trials_scored == 1  # paused: the held score waits
        session.resume()
        assert session.status().trials_scored == 2
        record = {t.trial_id: t for t in session.open_trials()}
        assert 3 not in record and second.trial.trial_id not in record
    with open_session(path, scoring="operator") as session:  # offline = live
        assert session.status().trials_scored == 2
    events = read_journal(path).events
    released = [e for e in events if e.kind == "score_accepted" and e.trial_id == 3]
    assert len(released) == 1 and released[0].payload["held"] is True
    assert released[0].payload["submission"]["progress"] == 0.9


def test_voiding_a_trial_on_a_runner_cancels_its_run_there(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "void.db"
    with open_session(path, scoring="operator") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        first, other = driver.dispatch()
        assert driver.cancel_voided() == []  # nothing voided: nothing cancelled
        assert session.void_score(3, "the arm bumped the table").applied
        cancelled = driver.cancel_voided()
        assert [(w.runner, w.trial.trial_id) for w in cancelled] == [(other.runner, 3)]
        assert driver.cancel_voided() == []  # once
        assert driver.dispatch() == []  # the arm holds until its cancelled run reports
        ended = driver.run_done(other.trial, False, 0.4, "goal canceled", runner=other.runner)
        assert ended.verdict is Verdict.IGNORED
        assert [(w.runner, w.trial.trial_id) for w in driver.dispatch()] == [(other.runner, 4)]
        assert session.runner_faults == 0  # a cancelled run is no fault of the runner
    events = read_journal(path).events
    assert [(e.trial_id, e.payload["runner"]) for e in events if e.kind == "trial_cancelled"] == [(3, other.runner)]
    assert not any(e.kind == "runner_result" and e.trial_id == 3 for e in events)


def test_a_dead_workers_retry_goes_to_a_live_idle_one(tmp_path: pathlib.Path) -> None:
    with open_session(tmp_path / "elsewhere.db") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        (first,) = driver.dispatch([ARMS[0]])  # the other worker idles
        assert first.trial.trial_id == 1 and driver.retry_elsewhere(ARMS[0]) is None  # it runs: 2 stays
        assert driver.run_done(first.trial, False, 2.0, "robot fault", runner=ARMS[0]).verdict is Verdict.RETRY
        assert driver.retry_elsewhere(ARMS[0], down=[ARMS[1]]) is None  # no live runner to take it
        assert driver.retry_elsewhere(ARMS[0]) == ARMS[1]
        moved = driver.dispatch([ARMS[1]])
        assert [(w.runner, w.trial.trial_id, w.trial.attempt) for w in moved] == [(ARMS[1], 1, 2)]
        driver.run_done(moved[0].trial, True, 1.0, auto_score=(True, 1.0), runner=ARMS[1])
        assert [(w.runner, w.trial.trial_id) for w in driver.dispatch([ARMS[1]])] == [(ARMS[1], 2)]  # its round
        assert [w.trial.trial_id for w in driver.dispatch([ARMS[0]])] == [3]  # the dead one, back: the next round
        assert session.status().trials_scored == 1
    runs = [(e.trial_id, e.payload["runner"], e.payload["attempt"])
            for e in read_journal(tmp_path / "elsewhere.db").events if e.kind == "trial_dispatched"]
    assert runs == [(1, ARMS[0], 1), (1, ARMS[1], 2), (2, ARMS[1], 1), (3, ARMS[0], 1)]


def test_a_failed_run_is_retried_on_its_runner(tmp_path: pathlib.Path) -> None:
    with open_session(tmp_path / "retry.db") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        first, second = driver.dispatch()
        assert driver.run_done(first.trial, False, 1.0, "arm fault", runner=first.runner).verdict is Verdict.RETRY
        (again,) = driver.dispatch()
        assert again.runner == first.runner and again.trial.trial_id == first.trial.trial_id
        assert again.trial.attempt == 2 and second.runner not in {w.runner for w in driver.dispatch()}


def test_one_arms_failures_in_a_row_pause_the_session_whatever_the_other_arm_does(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "faults.db"
    with open_session(path, runner={"max_attempts": 3}) as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        broken = driver.dispatch()[0]
        assert broken.runner == ARMS[0]
        for attempt in (1, 2, 3):
            for work in driver.dispatch():  # the good arm runs its trials and succeeds between the faults
                if work.runner == ARMS[1]:
                    driver.run_done(work.trial, True, 1.0, auto_score=(True, 1.0), runner=ARMS[1])
            assert session.runner_faults == attempt - 1
            verdict = driver.run_done(broken.trial, False, 1.0, "arm fault", runner=ARMS[0])
            if attempt < 3:
                assert verdict.verdict is Verdict.RETRY and session.state == SessionState.RUNNING
                (again,) = [w for w in driver.dispatch() if w.runner == ARMS[0]]
                assert again.trial.trial_id == broken.trial.trial_id
                broken = again
        assert verdict.verdict is Verdict.PAUSED and ARMS[0] in verdict.message
        assert session.status().state == SessionState.PAUSED
    with open_session(path, runner={"max_attempts": 3}) as again_open:  # the journal holds the count
        assert again_open.state == SessionState.PAUSED and again_open.runner_faults == 3
        assert again_open.faulty_run() == (broken.trial.trial_id, ARMS[0])
        (status, *_) = diagnostics(again_open, node="manager", hardware_id="arms", runner="", max_attempts=3)
        assert status.message == f"paused: runner {ARMS[0]} failed 3 times in a row on trial 1"
        paused = [e.payload["reason"] for e in read_journal(path).events if e.kind == "paused"]
        assert paused and paused[-1].startswith(f"runner {ARMS[0]} failed 3 times in a row on trial 1")
        again_open.resume()
        assert again_open.runner_faults == 0


def fast_arm_runs(path: pathlib.Path, max_ahead: int | None) -> tuple[int, int]:
    """A slow arm holds trial 1 while the fast arm runs every trial it is given at once: (the fast arm's runs
    before it gets nothing more, the open trials then)."""
    with open_session(path) as session:
        driver = TrialDriver(session, runners=ARMS[:2], max_ahead=max_ahead)
        slow, work = driver.dispatch()
        assert (slow.runner, slow.trial.trial_id, work.runner) == (ARMS[0], 1, ARMS[1])
        fast, given = 0, [work]
        while given:
            driver.run_done(given[0].trial, True, 1.0, auto_score=(True, 1.0), runner=ARMS[1])
            fast += 1
            assert fast < 200, "the fast arm never stops"
            given = [w for w in driver.dispatch() if w.runner == ARMS[1]]
        assert session.status().trials_scored == 0  # all wait for trial 1
        open_now = len(session.open_trials())
        driver.run_done(slow.trial, True, 5.0, auto_score=(False, 0.0), runner=ARMS[0])
        work = driver.dispatch()  # the rest of the slow arm's round, and the fast arm's work again
        assert {(w.runner, w.trial.trial_id) for w in work if w.runner == ARMS[0]} == {(ARMS[0], 2)}
        assert any(w.runner == ARMS[1] for w in work)
        driver.run_done(work[0].trial, True, 5.0, auto_score=(False, 0.0), runner=ARMS[0])
        assert session.status().trials_scored == open_now  # the fast arm's results entered after trials 1, 2
        return fast, open_now


def test_a_fast_arm_runs_at_most_max_ahead_trials_past_a_slow_one(tmp_path: pathlib.Path) -> None:
    assert fast_arm_runs(tmp_path / "default.db", None) == (2, 4)  # 2 x 2 runners: trial 1's round, and one more
    assert fast_arm_runs(tmp_path / "six.db", 6) == (4, 6)
    with pytest.raises(SessionError, match="at least 1"):
        TrialDriver(open_session(tmp_path / "bad.db"), runners=ARMS[:2], max_ahead=0)
    assert sim.make_config(runner={"runners": list(ARMS[:2]), "max_ahead": 6}).runner.max_ahead == 6
    with pytest.raises(ConfigError, match="max_ahead"):
        sim.make_config(runner={"runners": list(ARMS[:2]), "max_ahead": 0})


ACTIVE = {
    "schedule": "active", "claim": "per-task", "active": {"embedding": "random"},
    "metrics": [{"name": "success", "alternative": "greater", "method": "nscore"}],
    "tasks": [{"id": f"t{i}", "description": f"task {i}", "initial_conditions": [{"id": "c", "reset_instructions": "r"}]}
              for i in range(2)],
}


@pytest.mark.parametrize("overrides", [sim.ADASTOP_SESSION, ACTIVE])
def test_plans_chosen_from_the_scores_refuse_several_runners(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="name one runner"):
        sim.make_config(**{**overrides, "runner": {"runners": list(ARMS[:2])}})


def test_the_runner_list_is_checked_and_defaults_to_the_one_action() -> None:
    assert sim.make_config().runner.actions == ("run_trial",)
    assert sim.make_config(runner={"runners": list(ARMS)}).runner.actions == ARMS
    with pytest.raises(ConfigError, match="distinct"):
        sim.make_config(runner={"runners": [ARMS[0], ARMS[0]]})
    with pytest.raises(SessionError, match="distinct"):
        RunnerPool((ARMS[0], ARMS[0]))


def test_a_one_entry_runner_list_is_the_one_runner() -> None:
    one = sim.make_config(runner={"runners": [ARMS[1]]}).runner
    assert one.actions == (ARMS[1],) and one.one_action() == ARMS[1] and one.one_action(ARMS[1]) == ARMS[1]
    assert sim.make_config().runner.one_action("lab/run_trial") == "lab/run_trial"  # the manager's parameter
    assert sim.make_config().runner.one_action() == "run_trial"
    with pytest.raises(ValueError, match="name one runner"):
        one.one_action(ARMS[0])  # the file names one runner, the node's parameter another


def test_a_second_server_on_one_runner_holds_it_and_pauses_the_session(tmp_path: pathlib.Path) -> None:
    with open_session(tmp_path / "duplicate.db") as session:
        driver = TrialDriver(session, runners=ARMS[:2])
        alone = RunnerGraph(ARMS[0], 1, ("/arm_1/sim_robot",), ("/arm_1/sim_robot",), ("/arm_1/sim_robot",))
        assert driver.watch_runners(alone, ARMS[0]) == "" and session.state == SessionState.RUNNING
        two = RunnerGraph(ARMS[1], 2, ("/arm_2/rogue", "/arm_2/sim_robot"), ("/arm_2/sim_robot",), ())
        paused = driver.watch_runners(two, ARMS[1])
        assert "2 runners serve the action" in paused and session.state == SessionState.PAUSED
        session.resume()
        assert {w.runner for w in driver.dispatch()} == {ARMS[0]}  # arm_2 stays held while the rogue is there
