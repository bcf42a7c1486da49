"""The trial loop's rules (:class:`~evalstop_ros.session.driver.TrialDriver`): the journaled fault
limit, held automatic scores, and the operator's fallback when an automatic score is missing --
each decided from the journal alone, so a re-opened journal gives the same answer."""

from __future__ import annotations

import json
import pathlib

import session_sim as sim

from evalstop_ros.session import EvaluationSession, SessionConfig, SessionState, read_journal
from evalstop_ros.session.config_input import apply_overrides
from evalstop_ros.session.driver import Action, TrialDriver, Verdict
from evalstop_ros.session.journal import journaled_fault_limit

FAST = {"metrics": [{"name": "success", "method": "nscore"}]}

#: Hashes of ``sim.make_config()`` and its ``scoring: auto`` form as computed before
#: ``runner.max_attempts`` existed: a journal written then must still open (and audit) unchanged.
def open_session(path: pathlib.Path, config: SessionConfig) -> EvaluationSession:
    session = EvaluationSession.open(path, config, "s1", durable=False, plan_key=sim.TEST_KEY)
    if session.state == SessionState.IDLE:
        session.start()
    return session


def kinds(path: pathlib.Path) -> list[str]:
    return [event.kind for event in read_journal(path).events]


def test_max_attempts_is_journaled_and_enters_the_hash() -> None:
    assert json.loads(sim.make_config().canonical_json())["runner"]["max_attempts"] == 3  # the default, written out
    assert sim.make_config(runner={"max_attempts": 3}).config_hash == sim.make_config().config_hash
    config = sim.make_config(runner={"max_attempts": 5})
    assert json.loads(config.canonical_json())["runner"]["max_attempts"] == 5
    assert config.config_hash != sim.make_config().config_hash
    # the manager's parameter is a default: it fills in a file without the limit, never replaces one
    assert apply_overrides({"seed": 1}, max_attempts=4) == {"seed": 1, "runner": {"max_attempts": 4}}
    assert apply_overrides({"runner": {"max_attempts": 2}}, max_attempts=4) == {"runner": {"max_attempts": 2}}


def test_a_journal_of_the_default_limit_resumes_with_it_and_audits_verified(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    with open_session(path, sim.make_config(**FAST)) as session:
        for _ in range(9):
            sim.step(session, {"pi0": 0.3, "pi1": 0.7})
    assert read_journal(path).config_hash == sim.make_config(**FAST).config_hash
    assert journaled_fault_limit(path) == 3  # what the manager resumes it with, whatever its parameter says
    with open_session(path, sim.make_config(**FAST, runner={"max_attempts": 3})) as session:
        assert TrialDriver(session).max_attempts == 3
        sim.drive(session, {"pi0": 0.3, "pi1": 0.7})
        assert session.state == SessionState.FINISHED
    sim.audit_verified(path)


def test_the_fault_limit_pauses_at_the_journaled_max_attempts(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    config = sim.make_config(**FAST, runner={"max_attempts": 2})
    with open_session(path, config) as session:
        driver = TrialDriver(session)
        upcoming = driver.advance()
        assert upcoming.action is Action.RUN and upcoming.trial is not None
        trial = upcoming.trial
        assert driver.run_done(trial, False, 1.0, "arm fault").verdict is Verdict.RETRY
        retry = driver.advance()
        assert retry.action is Action.RUN and retry.trial is not None and retry.trial.attempt == 2
        verdict = driver.run_done(retry.trial, False, 1.0, "arm fault")
        assert verdict.verdict is Verdict.PAUSED and "failed 2 times" in verdict.message
        assert session.state == SessionState.PAUSED and driver.advance().action is Action.WAIT
    assert kinds(path)[-1] == "paused"
    with open_session(path, config) as session:  # re-opened: still paused; resumed: two more runs
        driver = TrialDriver(session)
        assert session.state == SessionState.PAUSED and driver.advance().action is Action.WAIT
        session.resume()
        third = driver.advance()
        assert third.action is Action.RUN and third.trial is not None and third.trial.attempt == 3
        assert driver.run_done(third.trial, False, 1.0, "arm fault").verdict is Verdict.RETRY
        fourth = driver.advance()
        assert fourth.trial is not None
        assert driver.run_done(fourth.trial, False, 1.0, "arm fault").verdict is Verdict.PAUSED
    assert kinds(path).count("paused") == 2 and journaled_fault_limit(path) == 2
    sim.audit_verified(path)


def test_a_crash_between_the_last_fault_and_the_pause_pauses_on_resume(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    config = sim.make_config(**FAST, runner={"max_attempts": 2})
    with open_session(path, config) as session:
        trial = session.next_trial()
        assert trial is not None
        session.record_runner_result(trial.trial_id, False, 1.0, "arm fault")
        session.record_runner_result(trial.trial_id, False, 1.0, "arm fault")  # then the process died
        assert session.state == SessionState.RUNNING
    with open_session(path, config) as session:
        assert TrialDriver(session).advance().action is Action.WAIT
        assert session.state == SessionState.PAUSED
    assert kinds(path)[-1] == "paused"


def _auto_run(path: pathlib.Path, auto_score: tuple[bool, float] | None) -> tuple[SessionConfig, int, Verdict]:
    config = sim.make_config(**FAST, scoring="auto")
    with open_session(path, config) as session:
        driver = TrialDriver(session)
        upcoming = driver.advance()
        assert upcoming.action is Action.RUN and upcoming.trial is not None
        verdict = driver.run_done(upcoming.trial, True, 2.0, auto_score=auto_score)
        waiting = driver.advance()
        assert (waiting.action, waiting.auto) == (Action.SCORE, None)  # not run again, not scored by itself
        return config, upcoming.trial.trial_id, verdict.verdict


def test_an_auto_trial_without_its_score_waits_for_the_operator_also_after_reopening(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    config, trial_id, verdict = _auto_run(path, None)
    assert verdict is Verdict.OPERATOR
    with open_session(path, config) as session:
        driver = TrialDriver(session)
        waiting = driver.advance()
        assert waiting.action is Action.SCORE and waiting.trial is not None and waiting.trial.trial_id == trial_id
        assert "returned no score" in driver.operator_fallback()
        assert session.submit_score(trial_id, waiting.trial.token, True, 1.0, "alice").accepted
        assert driver.advance().action is Action.RUN
    assert kinds(path).count("runner_result") == 1  # the robot never ran it a second time


def test_an_invalid_auto_score_is_left_to_the_operator_and_not_submitted(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    config, trial_id, verdict = _auto_run(path, (True, 1.5))
    assert verdict is Verdict.OPERATOR
    with open_session(path, config) as session:
        driver = TrialDriver(session)
        assert driver.advance().action is Action.SCORE and "must lie in [0, 1]" in driver.operator_fallback()
    assert "score_rejected" not in kinds(path) and "score_accepted" not in kinds(path)


def test_a_held_auto_score_is_submitted_on_resume_after_a_restart(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    config = sim.make_config(**FAST, scoring="auto", runner={"action_name": "arm"})
    with open_session(path, config) as session:
        driver = TrialDriver(session)
        upcoming = driver.advance()
        assert upcoming.trial is not None
        session.pause("operator break")  # during the rollout
        verdict = driver.run_done(upcoming.trial, True, 2.0, auto_score=(False, 0.25))
        assert verdict.verdict is Verdict.HELD
        assert driver.advance().action is Action.WAIT and "score_accepted" not in kinds(path)
    with open_session(path, config) as session:  # restarted, still paused: held
        driver = TrialDriver(session)
        assert driver.advance().action is Action.WAIT
        session.resume()
        upcoming = driver.advance()
        assert upcoming.auto is not None and upcoming.auto.outcome.accepted
        assert upcoming.auto.trial.trial_id == 1 and upcoming.action is Action.RUN and upcoming.trial is not None
        assert upcoming.trial.trial_id == 2
    scored = [e for e in read_journal(path).events if e.kind == "score_accepted"]
    assert [(e.trial_id, e.payload["submission"]["operator"], e.payload["submission"]["progress"])
            for e in scored] == [(1, "auto:arm", 0.25)]
    assert kinds(path).count("runner_result") == 1
