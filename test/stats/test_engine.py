"""Tests of evalstop_ros.stats.engine: the one sequential Holm driver and its option set."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.stats.engine import HolmEngine, HolmOptions, run_holm
from evalstop_ros.stats.levels import split_alpha
from evalstop_ros.stats.sequential import Decision

OPTIONS = HolmOptions("nscore", 0.05, "two-sided", n_max=None)


def _data(seed: int, n: int = 120) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    rates = [(0.2, 0.9), (0.5, 0.5), (0.6, 0.3)]
    return [((rng.random(n) < a).astype(float), (rng.random(n) < b).astype(float)) for a, b in rates]


def test_every_direction_runs_at_the_family_level_split_over_its_hypotheses():
    engine = HolmEngine(3, HolmOptions("mixture", 0.05, "two-sided", n_max=None))
    assert engine.side_alpha == split_alpha(0.05, 6)
    assert all(p.alpha == engine.side_alpha for tests in engine.tests for p in tests.processes)


@pytest.mark.parametrize("method", ["nscore", "mixture"])
def test_lock_step_rounds_and_trajectories_decide_alike(method):
    # Balanced pairs: analysing the current p-values after each round (the Monte Carlo family, the
    # hub) and analysing the recorded trajectories step by step (the session, offline) agree.
    options = HolmOptions(method, 0.05, "two-sided", n_max=None)
    pairs = _data(3)
    rounds = HolmEngine(3, options)
    for n in range(120):
        for j, (a, b) in enumerate(pairs):
            if rounds.decision[j, 0] == Decision.CONTINUE:
                rounds.feed(j, a[n:n + 1], b[n:n + 1])
        rounds.analyse()
    recorded = run_holm(pairs, options)
    assert [rounds.outcome(j) for j in range(3)] == [recorded.outcome(j) for j in range(3)]
    assert recorded.outcome(0)[0] == Decision.B_BETTER and recorded.outcome(2)[0] == Decision.A_BETTER


def test_budget_ends_the_open_comparisons():
    engine = run_holm(_data(4, 30), HolmOptions("nscore", 0.05, "two-sided", n_max=30))
    decisions = engine.decisions()
    assert decisions[1] == (Decision.BUDGET_EXHAUSTED, None, 30)
    assert all(len(t.sides) <= 30 for t in engine.trajectories)


def test_reset_forgets_a_comparisons_pairs():
    engine = HolmEngine(2, OPTIONS)
    engine.feed_all(0, np.zeros(5), np.ones(5))
    engine.reset(0)
    assert engine.trajectories[0].sides == [] and float(engine.tests[0].pvalue()[0]) == 1.0


def test_replayed_forgets_the_decisions_made():
    engine = HolmEngine(1, OPTIONS)
    engine.feed_all(0, np.zeros(12), np.ones(12))
    engine.run()
    assert engine.outcome(0)[0] == Decision.B_BETTER
    engine.reset(0)  # the pairs changed: nothing decides now, but the decision made is kept
    engine.feed_all(0, np.zeros(3), np.ones(3))
    engine.restart()
    engine.run()
    assert engine.outcome(0)[0] == Decision.B_BETTER
    assert engine.replayed() == [(Decision.CONTINUE, None, 3)]
