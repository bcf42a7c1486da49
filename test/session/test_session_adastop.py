"""AdaStop sessions (``design: adastop``): interim scheduling, decisions, edits, offline equivalence.

Five agents (session_sim.ADASTOP_SESSION: N = 5 trials per interim, K = 6 interims, B = 200
permutation paths, all pairs, alpha 0.05) with mean progress 0.3, 0.5, 0.5, 0.6, 0.9
(session_sim.ADASTOP_MEANS).  Crash and replay: test_session_crash.py (scenario ``adastop``).
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import session_sim as sim

from evalstop_ros.session import (
    EvaluationSession,
    SessionState,
    offline_decisions,
    offline_letters,
    read_journal,
)
from evalstop_ros.session.plan import Plan
from evalstop_ros.session.trials import TrialBook
from evalstop_ros.stats.adastop import adastop_test
from evalstop_ros.stats.sequential import Decision

N, K = 5, 6
CONFIG = sim.make_config(**sim.ADASTOP_SESSION)


def open_session(path) -> EvaluationSession:
    return EvaluationSession.open(path, CONFIG, "ada", durable=False, plan_key=sim.TEST_KEY)


def play(session: EvaluationSession, trials: int | None = None) -> list:
    """Run and score ``trials`` trials (all, if None) with the AdaStop lab."""
    done = []
    while trials is None or len(done) < trials:
        trial = session.next_trial()
        if trial is None:
            break
        session.record_runner_result(trial.trial_id, True, 1.0)
        success, progress = sim.adastop_lab(trial.policy_id, trial.trial_id)
        assert session.submit_score(trial.trial_id, trial.token, success, progress).accepted
        done.append(trial)
    return done


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("ada") / "session.db"
    with open_session(path) as session:
        session.start()
        trials = play(session)
        assert session.state == SessionState.FINISHED
        return path, trials, session.comparisons(), session.letters(), session.status()


def interim_table(path) -> np.ndarray:
    """The journaled scores as adastop_test reads them: N rows per interim, NaN once an agent left."""
    book = TrialBook().fold(read_journal(path).events)
    interims = max(r.round for r in book.trials.values())
    table = np.full((interims * N, len(sim.AGENTS)), np.nan)
    for column, agent in enumerate(sim.AGENTS):
        for interim in range(1, interims + 1):
            scores = [r.score.progress for r in book.scored(agent) if r.round == interim]
            if scores:
                table[(interim - 1) * N:interim * N, column] = scores
    return table


def test_live_decisions_equal_adastop_test_on_the_journaled_scores(finished):
    path, _, comparisons, letters, _ = finished
    result = adastop_test(interim_table(path), n_per_interim=N, n_interims=K, alpha=0.05, n_permutations=200,
                          seed=Plan(CONFIG).adastop_seed(), agent_names=sim.AGENTS)
    mapped = {"larger": Decision.A_BETTER, "smaller": Decision.B_BETTER, "equal": Decision.BUDGET_EXHAUSTED}
    assert [c.decision for c in comparisons] == [mapped[d] for d in result.decisions]
    assert [c.n for c in comparisons] == [k * N for k in result.decided_at]
    assert [c.stopping_trial for c in comparisons] == [
        k * N if d != "equal" else None for d, k in zip(result.decisions, result.decided_at)]
    assert letters == result.letters()
    for status, (l1, l2) in zip(comparisons, result.comparisons):
        assert (status.policy_a, status.policy_b) == (sim.AGENTS[l1], sim.AGENTS[l2])


def test_live_decisions_equal_the_offline_analysis(finished):
    path, _, comparisons, letters, _ = finished
    offline = offline_decisions(CONFIG, path)
    assert [(o.result.decision, o.result.stopping_trial, o.result.n_observed) for o in offline] == [
        (c.decision, c.stopping_trial, c.n) for c in comparisons]
    assert offline_letters(CONFIG, path) == letters


def test_the_lab_is_separated_and_the_tie_ends_equal(finished):
    _, _, comparisons, letters, status = finished
    decisions = {(c.policy_a, c.policy_b): c.decision for c in comparisons}
    assert decisions["agent_2", "agent_3"] == Decision.BUDGET_EXHAUSTED  # "equal" at the last interim
    assert decisions["agent_1", "agent_5"] == Decision.B_BETTER  # agent_5 scores higher
    assert letters["agent_5"] == "a" and letters["agent_1"][-1] > letters["agent_4"][-1]
    assert (status.rounds, status.max_trials_left, status.comparisons_decided) == (K, 0, 10)


def test_rows_are_adastop_rows(finished):
    _, _, comparisons, _, _ = finished
    for status in comparisons:
        assert (status.method, status.alternative, status.alpha, status.task) == ("adastop", "two-sided", 0.05, "")
        assert math.isnan(status.pvalue) and math.isnan(status.evalue)
        assert status.n % N == 0 and 0.0 <= status.mean_a <= 1.0


def test_a_relabel_session_equals_adastop_test_and_the_offline_analysis(tmp_path):
    """The paper's relabel scheme (``permutation: relabel``, B = 2000, 4 interims of 5): the live rows and
    letters equal ``adastop_test`` on the journaled scores and the offline re-analysis; the tie ends equal."""
    design = {"n_per_interim": N, "n_interims": 4, "n_permutations": 2000, "permutation": "relabel"}
    config = sim.make_config(**{**sim.ADASTOP_SESSION, "adastop": design})
    path = tmp_path / "relabel.db"
    with EvaluationSession.open(path, config, "ada", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        play(session)
        assert session.state == SessionState.FINISHED
        comparisons, letters = session.comparisons(), session.letters()
    result = adastop_test(interim_table(path), n_per_interim=N, n_interims=4, alpha=0.05, n_permutations=2000,
                          permutation="relabel", seed=Plan(config).adastop_seed(), agent_names=sim.AGENTS)
    mapped = {"larger": Decision.A_BETTER, "smaller": Decision.B_BETTER, "equal": Decision.BUDGET_EXHAUSTED}
    assert [(c.decision, c.n) for c in comparisons] == [(mapped[d], k * N) for d, k in zip(result.decisions,
                                                                                          result.decided_at)]
    assert letters == result.letters()
    offline = offline_decisions(config, path)
    assert [(o.result.decision, o.result.stopping_trial, o.result.n_observed) for o in offline] == [
        (c.decision, c.stopping_trial, c.n) for c in comparisons]
    assert offline_letters(config, path) == letters
    assert len(comparisons) == 10 and {(c.method, c.task) for c in comparisons} == {("adastop", "")}
    decisions = {(c.policy_a, c.policy_b): c.decision for c in comparisons}
    assert decisions["agent_2", "agent_3"] == Decision.BUDGET_EXHAUSTED
    assert decisions["agent_1", "agent_5"] == Decision.B_BETTER


def test_each_interim_runs_n_trials_of_every_agent_still_needed(finished):
    path, trials, comparisons, _, _ = finished
    per_interim = collections.defaultdict(list)
    for trial in trials:
        per_interim[trial.round].append(trial.policy_id)
    assert sorted(per_interim) == list(range(1, K + 1))
    active = set(sim.AGENTS)
    for interim in sorted(per_interim):
        counts = collections.Counter(per_interim[interim])
        assert set(counts) == active and set(counts.values()) == {N}
        still = {p for c in comparisons if c.n > interim * N for p in (c.policy_a, c.policy_b)}
        active = still
    orders = [tuple(per_interim[k]) for k in (1, 2)]
    assert orders[0] != orders[1] and orders[0][:N] != (orders[0][0],) * N  # random order, not blocks
    assert Plan(CONFIG, sim.TEST_KEY).interim_order(1, sim.AGENTS, N) == orders[0]


def test_decisions_are_journaled_at_the_end_of_their_interim(finished):
    path, _, comparisons, _, _ = finished
    events = read_journal(path).events
    decisions = [e for e in events if e.kind == "decision"]
    assert len(decisions) == len(comparisons)
    book = TrialBook().fold(events)
    for event in decisions:
        interim = event.payload["interim"]
        last = max(r.trial_id for r in book.trials.values() if r.round == interim)
        assert event.payload["n"] == interim * N and event.trial_id <= last
        assert event.payload["method"] == "adastop" and event.payload["pvalue"] is None
        scored_before = [e for e in events if e.seq < event.seq and e.kind == "score_accepted"]
        assert scored_before[-1].trial_id == last  # right after the interim's last score


# -- edits ---------------------------------------------------------------------------------------------
def test_voided_trials_of_the_current_interim_are_rerun(journal_path):
    with open_session(journal_path) as session:
        session.start()
        done = play(session, trials=7)
        assert session.void_score(done[3].trial_id, "scene was not reset").applied  # a scored trial
        rerun = session.next_trial()
        assert (rerun.rerun_of, rerun.round, rerun.policy_id) == (done[3].trial_id, 1, done[3].policy_id)
        session.record_runner_result(rerun.trial_id, False, 1.0, "arm fault")
        assert session.void_score(rerun.trial_id, "arm fault").applied  # a pending one: re-run as well
        again = session.next_trial()
        assert (again.rerun_of, again.round, again.policy_id) == (rerun.trial_id, 1, done[3].policy_id)
        play(session)
        assert session.state == SessionState.FINISHED
        offline = offline_decisions(CONFIG, journal_path)
        assert [(o.result.decision, o.result.n_observed) for o in offline] == [
            (c.decision, c.n) for c in session.comparisons()]
    first = [e for e in read_journal(journal_path).events if e.kind == "trial_requested" and e.payload["round"] == 1]
    assert len(first) == 5 * N + 2


def test_correction_within_the_current_interim_is_applied(journal_path):
    with open_session(journal_path) as session:
        session.start()
        done = play(session, trials=3)
        assert session.correct_score(done[0].trial_id, True, 0.99, "typo").applied
        play(session, trials=5 * N - 3)  # the interim completes with the corrected score
        assert session.status().rounds == 1 and session.next_trial().round == 2
    table = interim_table(journal_path)
    assert 0.99 in table[:N, sim.AGENTS.index(done[0].policy_id)]


def test_edits_of_an_analysed_interim_are_refused(journal_path):
    with open_session(journal_path) as session:
        session.start()
        done = play(session, trials=5 * N + 1)  # interim 1 analysed, interim 2 begun
        outcome = session.correct_score(done[0].trial_id, True, 0.99, "late doubt")
        assert not outcome.applied
        assert outcome.reason == (f"trial {done[0].trial_id}: AdaStop already analysed interim 1; the scores of an "
                                  "analysed interim cannot change")
        assert not session.void_score(done[1].trial_id, "late doubt").applied
        assert session.void_score(done[-1].trial_id, "scene was not reset").applied  # interim 2 is open


def test_status_before_the_first_trial(journal_path):
    with open_session(journal_path) as session:
        session.start()
        status = session.status()
        assert (status.max_trials_left, status.comparisons_total, status.active_policies) == (
            len(sim.AGENTS) * N * K, 10, tuple(sim.AGENTS))
        play(session, trials=7)
        assert session.status().max_trials_left == len(sim.AGENTS) * N * K - 7
