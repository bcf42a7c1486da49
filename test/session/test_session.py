"""Tests of evalstop_ros.session.session: the journaled evaluation state machine."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

import numpy as np
import pytest
import session_sim as sim

from evalstop_ros.session import (
    EvaluationSession,
    JournalError,
    PendingTrial,
    ScoreOutcome,
    SessionError,
    SessionState,
    offline_decisions,
    read_journal,
)
from evalstop_ros.session.journal import Journal
from evalstop_ros.stats.nscore import nscore_test
from evalstop_ros.stats.sequential import Decision
from evalstop_ros.stats.step import step_test

#: Two-sided N-SCORE on success only: decides within ~10 pairs on all-or-nothing data.
FAST = {"metrics": [{"name": "success", "method": "nscore"}]}
Outcomes = Callable[[PendingTrial], tuple[bool, float]]


def open_session(path, session_id: str = "s1", **overrides) -> EvaluationSession:
    return EvaluationSession.open(path, sim.make_config(**overrides), session_id, durable=False, plan_key=sim.TEST_KEY)


def started(path, **overrides) -> EvaluationSession:
    session = open_session(path, **overrides)
    session.start()
    return session


def ran(session: EvaluationSession) -> PendingTrial:
    """The pending trial, after a successful run."""
    trial = session.next_trial()
    assert trial is not None
    if session.status().awaiting == "run":
        session.record_runner_result(trial.trial_id, True, 2.0)
    return trial


def play(session: EvaluationSession, outcomes: Outcomes, trials: int | None = None) -> list[PendingTrial]:
    """Run and score ``trials`` trials (all, if None) with ``outcomes``."""
    done = []
    while trials is None or len(done) < trials:
        if session.next_trial() is None:
            break
        trial = ran(session)
        success, progress = outcomes(trial)
        assert session.submit_score(trial.trial_id, trial.token, success, progress).accepted
        done.append(trial)
    return done


def by_policy(rates: dict[str, float]) -> Outcomes:
    """Deterministic lab (session_sim.outcome) with per-policy success rates."""
    return lambda t: sim.outcome(t.policy_id, t.trial_id, rates)


def fixed(values: dict[str, bool]) -> Outcomes:
    """Each policy always succeeds or always fails."""
    return lambda t: (values[t.policy_id], float(values[t.policy_id]))


def freeze(session: EvaluationSession) -> tuple[object, ...]:
    """Everything observable about a session, NaN made comparable."""

    def clean(value: object) -> object:
        return "nan" if isinstance(value, float) and math.isnan(value) else value

    comparisons = [tuple(clean(v) for v in dataclasses.astuple(c)) for c in session.comparisons()]
    return session.status(), comparisons, session.pending_trial()


def kinds(path) -> list[str]:
    return [e.kind for e in read_journal(path).events]


def assert_matches_offline(session: EvaluationSession, path) -> None:
    offline = offline_decisions(session.config, path)
    for status, result in zip(session.comparisons(), offline, strict=True):
        assert (status.policy_a, status.policy_b, status.metric) == (result.policy_a, result.policy_b, result.metric)
        assert (status.decision, status.stopping_trial, status.n) == (
            result.result.decision, result.result.stopping_trial, result.result.n_observed)
        assert status.pvalue == pytest.approx(result.result.pvalue, nan_ok=True, rel=0, abs=0)


# -- life cycle -------------------------------------------------------------------------------
def test_new_session_is_idle_and_refuses_trials(journal_path):
    with open_session(journal_path) as session:
        assert session.state == SessionState.IDLE
        with pytest.raises(SessionError, match=r"cannot request a trial: session 's1' is idle"):
            session.next_trial()
        with pytest.raises(SessionError, match=r"cannot pause: session 's1' is idle"):
            session.pause("x")


def test_start_pause_resume_abort(journal_path):
    with started(journal_path) as session:
        with pytest.raises(SessionError, match=r"cannot start: session 's1' is running"):
            session.start()
        session.resume()  # a re-sent resume whose answer was lost: nothing happens
        session.pause("lunch")
        session.pause("lunch")  # re-sent: journaled once
        assert session.state == SessionState.PAUSED
        with pytest.raises(SessionError, match=r"cannot request a trial: session 's1' is paused"):
            session.next_trial()
        session.resume()
        with pytest.raises(SessionError, match=r"cannot abort: a reason is required"):
            session.abort(" ")
        session.abort("robot broke")
        session.abort("robot broke")  # re-sent: journaled once
        assert session.state == SessionState.ABORTED and session.next_trial() is None
        with pytest.raises(SessionError, match=r"cannot resume: session 's1' is aborted"):
            session.resume()
    assert kinds(journal_path) == ["config", "started", "paused", "resumed", "aborted", "key_revealed"]


def test_state_survives_reopening(journal_path):
    with started(journal_path) as session:
        session.pause("lunch")
    with open_session(journal_path) as session:
        assert session.state == SessionState.PAUSED


# -- trials ------------------------------------------------------------------------------------
def test_next_trial_is_journaled_once_and_repeated_until_closed(journal_path):
    with started(journal_path) as session:
        first = session.next_trial()
        assert first is not None and session.next_trial() == first == session.pending_trial()
        assert (first.session_id, first.trial_id, first.round, first.attempt, first.rerun_of) == ("s1", 1, 1, 1, None)
        assert first.policy_id in ("pi0", "pi1") and first.label in ("X", "Y")
        assert first.reset_instructions.startswith("Block at spot") and first.task == "push"
        assert first.token == session.plan.token("s1", 1)
    assert kinds(journal_path).count("trial_requested") == 1


def test_operator_prompt_hides_the_policy(journal_path):
    with started(journal_path) as session:
        trial = session.next_trial()
        prompt = trial.operator_prompt()
        assert not hasattr(prompt, "policy_id")
        assert "pi0" not in repr(prompt) and "pi1" not in repr(prompt)
        assert (prompt.trial_id, prompt.label, prompt.token, prompt.initial_condition) == (
            trial.trial_id, trial.label, trial.token, trial.initial_condition)


def test_paired_round_runs_each_policy_once_from_one_condition(journal_path):
    with started(journal_path) as session:
        trials = play(session, fixed({"pi0": False, "pi1": False}), trials=20)
    for k in range(0, 20, 2):
        one, two = trials[k], trials[k + 1]
        assert one.round == two.round == k // 2 + 1
        assert {one.policy_id, two.policy_id} == {"pi0", "pi1"}
        assert one.initial_condition == two.initial_condition
    assert len({(t.policy_id, t.trial_id % 2) for t in trials}) > 2  # the order changes between rounds


def test_failed_run_keeps_the_trial_pending_for_a_retry(journal_path):
    with started(journal_path) as session:
        trial = session.next_trial()
        retry = session.record_runner_result(trial.trial_id, False, 3.0, "gripper fault")
        assert retry == dataclasses.replace(trial, attempt=2) == session.next_trial()
        rejected = session.submit_score(trial.trial_id, trial.token, True, 1.0)
        assert not rejected.accepted and rejected.reason == "trial 1 has no successful run recorded yet"
        assert session.record_runner_result(trial.trial_id, True, 3.0) is None
        assert session.status().awaiting == "score"
        assert session.submit_score(trial.trial_id, trial.token, True, 1.0).accepted


def test_runner_result_must_name_the_pending_trial(journal_path):
    with started(journal_path) as session:
        session.next_trial()
        with pytest.raises(SessionError, match=r"runner result for trial 7, but the pending trial is 1"):
            session.record_runner_result(7, True, 1.0)
        with pytest.raises(SessionError, match=r"`duration_s` must be a finite number >= 0; found -1"):
            session.record_runner_result(1, True, -1)


# -- scores ------------------------------------------------------------------------------------
def test_accepted_score_is_journaled_before_it_feeds_the_tests(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        outcome = session.submit_score(trial.trial_id, trial.token, True, 0.9, operator="ana", notes="clean",
                                       preference=trial.label)
        assert outcome == ScoreOutcome(True, False, "trial 1 scored")
    event = read_journal(journal_path).events[-1]
    assert (event.kind, event.trial_id) == ("score_accepted", 1)
    assert event.payload["submission"] == {"token": trial.token, "success": True, "progress": 0.9,
                                           "operator": "ana", "notes": "clean", "preference": trial.label}


REJECTIONS: list[tuple[str, Callable[[EvaluationSession, PendingTrial], ScoreOutcome], str]] = [
    ("unknown trial", lambda s, t: s.submit_score(99, t.token, True, 1.0), r"unknown trial 99"),
    ("not an id", lambda s, t: s.submit_score("7", t.token, True, 1.0), r"unknown trial '7'"),  # type: ignore[arg-type]
    ("wrong token", lambda s, t: s.submit_score(t.trial_id, "0" * 12, True, 1.0), r"wrong token for trial 7"),
    ("NaN progress", lambda s, t: s.submit_score(t.trial_id, t.token, True, float("nan")),
     r"`progress` must be finite; found nan"),
    ("infinite progress", lambda s, t: s.submit_score(t.trial_id, t.token, True, float("inf")),
     r"`progress` must be finite; found inf"),
    ("progress above 1", lambda s, t: s.submit_score(t.trial_id, t.token, True, 1.2),
     r"`progress` must lie in \[0, 1\]; found 1\.2"),
    ("negative progress", lambda s, t: s.submit_score(t.trial_id, t.token, False, -0.1),
     r"`progress` must lie in \[0, 1\]; found -0\.1"),
    ("progress not a number", lambda s, t: s.submit_score(t.trial_id, t.token, False, "0.5"),  # type: ignore[arg-type]
     r"`progress` must be a number in \[0, 1\]; found '0\.5'"),
    ("success not a bool", lambda s, t: s.submit_score(t.trial_id, t.token, 1, 1.0),  # type: ignore[arg-type]
     r"`success` must be true or false; found 1"),
    ("unknown preference", lambda s, t: s.submit_score(t.trial_id, t.token, True, 1.0, preference="Q"),
     r"`preference` must be '', '=' or one of the labels \['X', 'Y'\]; found 'Q'"),
]


@pytest.mark.parametrize(("case", "submit", "reason"), REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_rejected_score_is_journaled_and_changes_nothing(journal_path, case, submit, reason):
    with started(journal_path) as session:
        play(session, by_policy({"pi0": 0.3, "pi1": 0.7}), trials=6)
        trial = ran(session)
        before = freeze(session)
        outcome = submit(session, trial)
        assert not outcome.accepted and not outcome.duplicate
        assert re.fullmatch(reason, outcome.reason), outcome.reason
        assert freeze(session) == before
        event = read_journal(journal_path).events[-1]
        assert event.kind == "score_rejected" and event.payload["reason"] == outcome.reason
        assert event.payload["claimed_trial_id"] in (trial.trial_id, 99, "7")
        assert event.trial_id == (trial.trial_id if event.payload["claimed_trial_id"] == trial.trial_id else None)
        # The trial can still be scored properly afterwards.
        assert session.submit_score(trial.trial_id, trial.token, True, 1.0).accepted


def test_score_while_paused_is_rejected_and_changes_nothing(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        session.pause("operator break")
        before = freeze(session)
        outcome = session.submit_score(trial.trial_id, trial.token, True, 1.0)
        assert outcome == ScoreOutcome(False, False, "session is paused; scores are accepted only while it runs")
        assert freeze(session) == before


def test_second_different_score_is_rejected(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        session.submit_score(trial.trial_id, trial.token, True, 1.0)
        before = freeze(session)
        outcome = session.submit_score(trial.trial_id, trial.token, False, 0.2)
        assert outcome.reason == "trial 1 is already scored; use a correction to change it" and not outcome.accepted
        assert freeze(session) == before


def test_identical_resubmission_is_an_acknowledged_duplicate(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        session.submit_score(trial.trial_id, trial.token, True, 1.0, operator="ana")
        before = freeze(session)
        outcome = session.submit_score(trial.trial_id, trial.token, True, 1, operator="ana")  # 1 == 1.0
        assert (outcome.accepted, outcome.duplicate) == (True, True)
        assert freeze(session) == before
    assert kinds(journal_path)[-1] == "score_duplicate"


def test_duplicate_is_acknowledged_after_the_session_finished(journal_path):
    with started(journal_path, **FAST) as session:
        trials = play(session, fixed({"pi0": False, "pi1": True}))
        assert session.state == SessionState.FINISHED
        last = trials[-1]
        success, progress = fixed({"pi0": False, "pi1": True})(last)
        assert session.submit_score(last.trial_id, last.token, success, progress).duplicate


def test_score_for_a_voided_trial_is_rejected(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        session.void_score(trial.trial_id, "camera unplugged")
        outcome = session.submit_score(trial.trial_id, trial.token, True, 1.0)
        assert outcome.reason == "trial 1 was voided" and not outcome.accepted


def test_post_decision_score_is_recorded_but_fed_to_no_test(journal_path):
    # pi0 loses both its comparisons fast; pi1 and pi2 tie forever; pi0 stays in the rotation.
    with started(journal_path, policies=["pi0", "pi1", "pi2"], drop_decided=False, **FAST) as session:
        outcomes = fixed({"pi0": False, "pi1": True, "pi2": True})
        while any(c.decision == Decision.CONTINUE for c in session.comparisons() if c.policy_a == "pi0"):
            play(session, outcomes, trials=1)
        consumed = {(c.policy_a, c.policy_b): c.n for c in session.comparisons()}
        trial = ran(session)
        while trial.policy_id != "pi0":
            session.submit_score(trial.trial_id, trial.token, True, 1.0)
            trial = ran(session)
        before = [c for c in session.comparisons() if c.policy_a == "pi0"]
        outcome = session.submit_score(trial.trial_id, trial.token, False, 0.0)
        assert (outcome.accepted, outcome.post_decision) == (True, True)
        assert "fed to no test" in outcome.reason
        assert [c for c in session.comparisons() if c.policy_a == "pi0"] == before
        assert consumed[("pi0", "pi1")] == before[0].n
    assert "post_decision_score" in kinds(journal_path)


# -- statistics ---------------------------------------------------------------------------------
def _round_pairs(path, metric: str) -> tuple[list[float], list[float]]:
    """pi0/pi1 scores paired by round, read straight from the journal (no session code)."""
    rounds: dict[int, dict[str, float]] = {}
    policy_of: dict[int, tuple[int, str]] = {}
    for event in read_journal(path).events:
        if event.kind == "trial_requested":
            policy_of[event.trial_id] = (event.payload["round"], event.payload["policy_id"])
        elif event.kind == "score_accepted":
            round_number, policy = policy_of[event.trial_id]
            value = event.payload["submission"]["success" if metric == "success" else "progress"]
            rounds.setdefault(round_number, {})[policy] = float(value)
    complete = [r for _, r in sorted(rounds.items()) if len(r) == 2]
    return [r["pi0"] for r in complete], [r["pi1"] for r in complete]


@pytest.mark.parametrize("rates", [{"pi0": 0.3, "pi1": 0.75}, {"pi0": 0.7, "pi1": 0.25}, {"pi0": 0.5, "pi1": 0.5}])
def test_two_policy_session_equals_step_and_nscore_run_offline(journal_path, rates):
    with started(journal_path) as session:
        play(session, by_policy(rates))
        assert session.state == SessionState.FINISHED
        success, progress = session.comparisons()
        config = session.config
        a, b = _round_pairs(journal_path, "success")
        expected = step_test(a, b, alpha=success.alpha, alternative="two-sided", n_max=config.n_max,
                             seed=session.plan.step_seed(0, 0))
        assert (success.decision, success.stopping_trial, success.n) == (
            expected.decision, expected.stopping_trial, expected.n_observed)
        a, b = _round_pairs(journal_path, "progress")
        expected = nscore_test(a, b, alpha=progress.alpha, alternative="two-sided", bins=21, n_max=config.n_max)
        assert (progress.decision, progress.stopping_trial, progress.n, progress.pvalue, progress.evalue) == (
            expected.decision, expected.stopping_trial, expected.n_observed, expected.pvalue, expected.evalues[-1])
        assert_matches_offline(session, journal_path)


def test_decision_is_journaled_with_its_trigger(journal_path):
    with started(journal_path, **FAST) as session:
        play(session, fixed({"pi0": False, "pi1": True}))
        (status,) = session.comparisons()
    decision = next(e for e in read_journal(journal_path).events if e.kind == "decision")
    assert decision.payload["decision"] == "B_BETTER" == status.decision.name
    assert decision.payload["n"] == status.n == status.stopping_trial
    assert decision.payload["pvalue"] == status.pvalue
    assert decision.trial_id == 2 * status.n  # the round's second trial completed the deciding pair
    assert kinds(journal_path)[-3:] == ["decision", "finished", "key_revealed"]


def test_budget_exhausted_after_n_max_pairs(journal_path):
    with started(journal_path, n_max=5, **FAST) as session:
        trials = play(session, fixed({"pi0": True, "pi1": True}))
        (status,) = session.comparisons()
        assert (status.decision, status.n, status.stopping_trial, len(trials)) == (Decision.BUDGET_EXHAUSTED, 5, None, 10)
        assert session.state == SessionState.FINISHED and session.next_trial() is None


def test_three_policies_drop_decided_policies_from_the_rotation(journal_path):
    config = {"policies": ["pi0", "pi1", "pi2"], "n_max": 20, **FAST}
    with started(journal_path, **config) as session:
        assert session.status().max_trials_left == 3 * 20
        outcomes = fixed({"pi0": False, "pi1": True, "pi2": True})
        while "pi0" in session.status().active_policies:
            play(session, outcomes, trials=1)
        decided_at = len(read_journal(journal_path).events)
        assert session.status().active_policies == ("pi1", "pi2")
        later = play(session, outcomes)
        assert later and all(t.policy_id != "pi0" for t in later)
        statuses = {(c.policy_a, c.policy_b): c.decision for c in session.comparisons()}
        assert statuses == {("pi0", "pi1"): Decision.B_BETTER, ("pi0", "pi2"): Decision.B_BETTER,
                            ("pi1", "pi2"): Decision.BUDGET_EXHAUSTED}
        assert session.state == SessionState.FINISHED and session.status().max_trials_left == 0
        assert_matches_offline(session, journal_path)
    assert decided_at < len(read_journal(journal_path).events)


def test_without_drop_decided_every_policy_keeps_running(journal_path):
    config = {"policies": ["pi0", "pi1", "pi2"], "n_max": 12, "drop_decided": False, **FAST}
    with started(journal_path, **config) as session:
        trials = play(session, fixed({"pi0": False, "pi1": True, "pi2": True}))
        assert sum(t.policy_id == "pi0" for t in trials) == 12
        assert_matches_offline(session, journal_path)


def test_independent_design_pairs_by_per_policy_index(journal_path):
    with started(journal_path, design="independent") as session:
        trials = play(session, by_policy({"pi0": 0.2, "pi1": 0.8}))
        assert_matches_offline(session, journal_path)
    for k in range(0, len(trials) - 1, 2):
        assert {trials[k].policy_id, trials[k + 1].policy_id} == {"pi0", "pi1"}  # balanced blocks
    # Each trial draws its own condition: within a block the condition changes.
    assert any(trials[k].initial_condition != trials[k + 1].initial_condition for k in range(0, len(trials) - 1, 2))


def test_pooled_rows_read_every_task_and_there_are_no_claims(journal_path):
    # Sequential Holm and its run_family equivalence: test_session_families.py.
    with started(journal_path) as session:
        assert {c.task for c in session.comparisons()} == {""}
        assert session.claims() == []
        with pytest.raises(SessionError, match=r"per-task letters need a non-pooled claim; found task 'push' with "
                                               r"claim 'pooled'"):
            session.letters(task="push")


def test_letters_group_the_policies_by_decisions(journal_path):
    config = {"policies": ["pi0", "pi1", "pi2"], "n_max": 15, **FAST}
    with started(journal_path, **config) as session:
        assert session.letters() == {}
        play(session, fixed({"pi0": False, "pi1": True, "pi2": True}))
        assert session.letters() == {"pi1": "a", "pi2": "a", "pi0": "b"}
        with pytest.raises(SessionError, match=r"`metric` should be one of \['success'\]; found 'progress'"):
            session.letters("progress")


# -- corrections --------------------------------------------------------------------------------
def test_correction_needs_a_reason_and_a_score(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        assert session.correct_score(trial.trial_id, True, 1.0, "typo").reason == "trial 1 has no score to correct"
        session.submit_score(trial.trial_id, trial.token, False, 0.0)
        assert session.correct_score(trial.trial_id, True, 1.0, "").reason == "a reason is required"
        assert session.correct_score(trial.trial_id, False, 0.0, "same").reason == "trial 1 already has this score"
        assert session.correct_score(trial.trial_id, True, 2.0, "bad").reason == "`progress` must lie in [0, 1]; found 2.0"
        assert session.correct_score(42, True, 1.0, "x").reason == "unknown trial 42"
    assert "correction" not in kinds(journal_path)


def test_correction_replays_the_tests(journal_path):
    with started(journal_path) as session:
        play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=20)
        first = read_journal(journal_path).events
        scored = [e for e in first if e.kind == "score_accepted"][3]
        old = scored.payload["submission"]
        outcome = session.correct_score(scored.trial_id, not old["success"], 0.5, "operator pressed the wrong key")
        assert outcome.applied
        assert_matches_offline(session, journal_path)
        snapshot = freeze(session)
    event = read_journal(journal_path).events[-1]
    assert event.kind == "correction" and event.payload["previous"] == {"success": old["success"],
                                                                       "progress": old["progress"]}
    with open_session(journal_path) as session:
        assert freeze(session) == snapshot


def test_correction_can_make_an_earlier_decision(journal_path):
    with started(journal_path, **FAST) as session:
        trials = play(session, fixed({"pi0": False, "pi1": False}), trials=16)
        for trial in trials:
            if trial.policy_id == "pi1" and session.comparisons()[0].decision == Decision.CONTINUE:
                assert session.correct_score(trial.trial_id, True, 1.0, "scored from the wrong camera").applied
        (status,) = session.comparisons()
        assert status.decision == Decision.B_BETTER and status.stopping_trial < 8
        assert session.state == SessionState.FINISHED
        assert_matches_offline(session, journal_path)


def test_correction_of_a_consumed_trial_is_refused(journal_path):
    with started(journal_path, **FAST) as session:
        trials = play(session, fixed({"pi0": False, "pi1": True}))
        before = freeze(session)
        outcome = session.correct_score(trials[0].trial_id, True, 1.0, "late doubt")
        assert not outcome.applied
        assert "already decided B_BETTER" in outcome.reason and "cannot change" in outcome.reason
        assert freeze(session) == before


# -- voids and undo -------------------------------------------------------------------------------
def test_voided_score_is_rerun_in_the_same_round(journal_path):
    with started(journal_path) as session:
        play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=5)
        voided = read_journal(journal_path).events
        target = [e for e in voided if e.kind == "trial_requested"][2]  # round 2
        assert session.void_score(target.trial_id, "scene was not reset").applied
        rerun = session.next_trial()
        assert rerun.rerun_of == target.trial_id and rerun.trial_id == 6
        assert (rerun.round, rerun.policy_id, rerun.initial_condition) == (
            target.payload["round"], target.payload["policy_id"], target.payload["initial_condition"])
        assert rerun.token != target.payload["token"]
        play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=10)
        assert session.status().trials_voided == 1
        assert_matches_offline(session, journal_path)


def test_voided_pending_trial_is_skipped(journal_path):
    with started(journal_path) as session:
        trial = session.next_trial()
        session.record_runner_result(trial.trial_id, False, 1.0, "policy server down")
        assert session.void_score(trial.trial_id, "policy server down").applied
        following = session.next_trial()
        assert following.trial_id == 2 and following.rerun_of is None and following.round == 1
        assert following.policy_id != trial.policy_id


def test_void_needs_a_reason_and_a_live_trial(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        assert session.void_score(trial.trial_id, "").reason == "a reason is required"
        assert session.void_score(trial.trial_id, "ok").applied
        assert session.void_score(trial.trial_id, "again").reason == "trial 1 is voided"


def test_void_of_a_consumed_trial_is_refused(journal_path):
    with started(journal_path, **FAST) as session:
        play(session, fixed({"pi0": False, "pi1": True}))
        before = freeze(session)
        outcome = session.undo_last("second thoughts")
        assert not outcome.applied and "already decided" in outcome.reason
        assert freeze(session) == before


def test_undo_last_voids_the_most_recent_score(journal_path):
    with started(journal_path) as session:
        assert session.undo_last("nothing yet").reason == "no scored trial to undo"
        trials = play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=3)
        outcome = session.undo_last("operator scored the wrong trial")
        assert (outcome.applied, outcome.trial_id) == (True, trials[-1].trial_id)
        assert session.next_trial().rerun_of == trials[-1].trial_id


def test_independent_void_refused_when_it_would_shift_decided_pairs(journal_path):
    # pi0 always fails, pi1 always succeeds: decided within a few pairs.  Voiding pi1's first
    # score would re-pair every later pi1 score, including the pairs the decision consumed.
    with started(journal_path, design="independent", **FAST) as session:
        trials = play(session, fixed({"pi0": False, "pi1": True}))
        first_pi1 = next(t for t in trials if t.policy_id == "pi1")
        outcome = session.void_score(first_pi1.trial_id, "late doubt")
        assert not outcome.applied and "already decided" in outcome.reason


# -- replay ------------------------------------------------------------------------------------------
def test_reopening_reproduces_the_state_exactly(journal_path):
    rates = {"pi0": 0.35, "pi1": 0.65}
    with started(journal_path) as session:
        play(session, by_policy(rates), trials=33)
        ran(session)
        snapshot = freeze(session)
    with open_session(journal_path) as session:
        assert freeze(session) == snapshot
        assert session.status().awaiting == "score"


def test_replay_refuses_a_journal_the_plan_cannot_have_written(journal_path):
    with started(journal_path) as session:
        trial = session.next_trial()
    config = sim.make_config()
    with Journal.open(journal_path, "s1", config) as journal:
        journal.append("runner_result", trial.trial_id, ok=True, duration_s=1.0, message="")
        journal.append("score_accepted", trial.trial_id, submission={"token": trial.token, "success": True,
                                                                      "progress": 1.0, "operator": "", "notes": "",
                                                                      "preference": ""})
        journal.append("trial_requested", 2, round=1, policy_id=trial.policy_id, label="X", task="push",
                       initial_condition="c0", token="0" * 12, rerun_of=None)
    with pytest.raises(JournalError, match=r"event 6 \(trial_requested\): replay diverged"):
        open_session(journal_path)


def test_replay_refuses_a_decision_the_tests_do_not_reproduce(journal_path):
    with started(journal_path, **FAST) as session:
        play(session, fixed({"pi0": False, "pi1": True}), trials=4)
    with Journal.open(journal_path, "s1", sim.make_config(**FAST)) as journal:
        journal.append("decision", 4, test=0, decision="A_BETTER", n=2, stopping_trial=2)
    with pytest.raises(JournalError, match=r"replay diverged: pi0 vs pi1 \[success/nscore\]: journal has"):
        open_session(journal_path, **FAST)


def test_missing_decision_event_is_written_on_reopen(journal_path):
    # A crash between a score and its decision event: the reopened session writes it.
    with started(journal_path, **FAST) as session:
        play(session, fixed({"pi0": False, "pi1": True}))
    events = read_journal(journal_path).events
    cut = next(e.seq for e in events if e.kind == "decision")
    truncated = journal_path.with_name("cut.db")
    with Journal.open(truncated, "s1", sim.make_config(**FAST), plan_key=sim.TEST_KEY) as journal:
        for event in events[1:cut - 1]:
            journal.append(event.kind, event.trial_id, **event.payload)
    with open_session(truncated, **FAST) as session:
        assert session.state == SessionState.FINISHED
    assert kinds(truncated)[-3:] == ["decision", "finished", "key_revealed"]


def test_session_refuses_a_journal_of_another_session(journal_path):
    config = sim.make_config()
    with Journal.open(journal_path, "s1", config) as journal:
        with pytest.raises(JournalError, match=r"belongs to session 's1', not 's2'"):
            EvaluationSession(config, journal, "s2")


def test_status_counts(journal_path):
    with started(journal_path) as session:
        status = session.status()
        assert (status.state, status.trials_requested, status.pending_trial_id, status.awaiting) == (
            SessionState.RUNNING, 0, None, None)
        assert (status.comparisons_total, status.comparisons_decided, status.max_trials_left) == (2, 0, 100)
        play(session, fixed({"pi0": True, "pi1": True}), trials=4)
        session.next_trial()
        status = session.status()
        assert (status.trials_requested, status.trials_scored, status.rounds, status.pending_trial_id) == (5, 4, 3, 5)
        assert status.awaiting == "run" and status.max_trials_left == 96
        assert status.active_policies == ("pi0", "pi1")


def test_outcome_values_are_plain_python(journal_path):
    with started(journal_path) as session:
        trial = ran(session)
        outcome = session.submit_score(trial.trial_id, trial.token, np.bool_(True), np.float64(1.0))
        assert outcome.accepted
        assert all(isinstance(v, (float, int)) for c in session.comparisons() for v in (c.alpha, c.n, c.pvalue))


def test_session_can_be_called_from_several_threads(journal_path):
    # The manager node's executor may run callbacks on other threads than the one that opened it.
    import threading

    with started(journal_path) as session:
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(20):
                    session.status(), session.comparisons()
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for thread in threads:
            thread.start()
        play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=10)
        for thread in threads:
            thread.join()
        done = threading.Thread(target=lambda: play(session, by_policy({"pi0": 0.4, "pi1": 0.6}), trials=2))
        done.start()
        done.join()
        assert not errors and session.status().trials_scored == 12
