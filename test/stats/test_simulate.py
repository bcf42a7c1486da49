"""Tests of evalstop_ros.stats.simulate: score models and the Monte Carlo engine.

The engine is checked against a sequential rule simple enough to analyse exactly: a walk on the
success-count difference that stops at +-h (:class:`WalkRule`).  Its exact decision
probabilities and E[min(stop, N)] come from a small Markov chain (and, in the one-sided case,
from scipy's binomial law); Monte Carlo estimates must agree within 4 SE.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.sequential import Decision
from evalstop_ros.stats.simulate import (
    ScoreModel,
    SimulationSummary,
    bernoulli,
    continuous_beta,
    monte_carlo,
    partial_credit,
)

K_SE = 4.0


class WalkRule:
    """A legitimate PairedProcess: stop when S_B - S_A first reaches +h (B better) or -h (A better)."""

    name = "walk"
    alpha = 0.05

    def __init__(self, n_sequences: int, h: int) -> None:
        self.h = h
        self.n = 0
        self.walk = np.zeros(n_sequences, dtype=np.int64)
        self.decision = np.zeros(n_sequences, dtype=np.int8)
        self.stopping_trial = np.zeros(n_sequences, dtype=np.int64)

    def update(self, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> None:
        self.n += 1
        live = self.decision == Decision.CONTINUE
        self.walk[live] += (scores_b[live] > 0.5).astype(np.int64) - (scores_a[live] > 0.5)
        up, down = live & (self.walk >= self.h), live & (self.walk <= -self.h)
        self.decision[up] = Decision.B_BETTER
        self.decision[down] = Decision.A_BETTER
        self.stopping_trial[up | down] = self.n

    def pvalue(self) -> NDArray[np.float64]:
        return np.full(self.decision.size, np.nan)

    def evalue(self) -> NDArray[np.float64]:
        return np.full(self.decision.size, np.nan)


def walk_exact(p0: float, p1: float, h: int, n_max: int) -> tuple[float, float, float]:
    """Exact (P(B better), P(A better), E[min(stop, n_max)]) of WalkRule by a Markov chain."""
    up, down = p1 * (1 - p0), p0 * (1 - p1)
    mass = np.zeros(2 * h - 1)  # positions -h+1 .. h-1
    mass[h - 1] = 1.0
    p_up = p_down = expected = 0.0
    for _ in range(n_max):
        expected += mass.sum()  # P(stop >= n) summed over n = E[min(stop, n_max)]
        p_up += up * mass[-1]
        p_down += down * mass[0]
        moved = (1 - up - down) * mass
        moved[1:] += up * mass[:-1]
        moved[:-1] += down * mass[1:]
        mass = moved
    return p_up, p_down, expected


def assert_close(estimate: float, se: float, exact: float, what: str) -> None:
    bound = K_SE * max(se, 1e-3)
    assert abs(estimate - exact) <= bound, f"{what}: estimate {estimate:.4f} (SE {se:.4f}) vs exact {exact:.4f}, bound {bound:.4f}"


# -- engine vs exact ------------------------------------------------------------------------------

def test_one_sided_walk_matches_the_binomial_law():
    # p0 = 0: S_B - S_A = S_B, so P(B better by N) = P(Bin(N, p1) >= h) and
    # E[min(stop, N)] = sum_{n < N} P(Bin(n, p1) < h).
    p1, h, n_max = 0.3, 4, 20
    summary = monte_carlo(lambda r, seed: WalkRule(r, h), bernoulli(0.0, p1), reps=4000, n_max=n_max,
                          rng=np.random.default_rng(12345))
    power = stats.binom.sf(h - 1, n_max, p1)
    expected_stop = sum(stats.binom.cdf(h - 1, n, p1) for n in range(n_max))
    assert_close(summary.power, summary.power_se, power, "power")
    assert_close(summary.mean_ttd, summary.ttd_se, expected_stop, "E[stop]")
    assert summary.fpr == 0.0 and summary.p_a_better == 0.0


@pytest.mark.parametrize(("p0", "p1"), [(0.5, 0.7), (0.6, 0.4)])
def test_two_sided_walk_matches_markov_chain(p0, p1):
    h, n_max = 3, 25
    summary = monte_carlo(lambda r, seed: WalkRule(r, h), bernoulli(p0, p1), reps=4000, n_max=n_max,
                          rng=np.random.default_rng(99), chunk=700)
    b_better, a_better, expected_stop = walk_exact(p0, p1, h, n_max)
    correct, wrong = (b_better, a_better) if p1 > p0 else (a_better, b_better)
    assert_close(summary.power, summary.power_se, correct, "power")
    assert_close(summary.fpr, summary.fpr_se, wrong, "false claims")
    assert_close(summary.mean_ttd, summary.ttd_se, expected_stop, "E[stop]")


def test_null_reports_any_claim_as_false_and_no_power():
    h, n_max = 3, 25
    summary = monte_carlo(lambda r, seed: WalkRule(r, h), bernoulli(0.4, 0.4), reps=4000, n_max=n_max,
                          rng=np.random.default_rng(5))
    b_better, a_better, _ = walk_exact(0.4, 0.4, h, n_max)
    assert math.isnan(summary.power) and math.isnan(summary.power_se)
    assert summary.fpr == summary.p_a_better + summary.p_b_better
    assert_close(summary.fpr, summary.fpr_se, b_better + a_better, "false claims")
    assert summary.to_dict()["power"] is None


def test_undecided_sequences_count_as_n_max():
    # h = 100 is unreachable in 10 trials
    summary = monte_carlo(lambda r, seed: WalkRule(r, 100), bernoulli(0.1, 0.9), reps=50, n_max=10,
                          rng=np.random.default_rng(0))
    assert (summary.power, summary.fpr, summary.mean_ttd, summary.ttd_se) == (0.0, 0.0, 10.0, 0.0)


# -- seeding and chunking ---------------------------------------------------------------------------

def test_same_seed_same_summary():
    def run(seed: int) -> SimulationSummary:
        return monte_carlo(lambda r, s: WalkRule(r, 3), bernoulli(0.4, 0.6), reps=300, n_max=30,
                           rng=np.random.default_rng(seed), chunk=64)

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_each_chunk_gets_a_fresh_process_and_seed():
    calls: list[tuple[int, int]] = []

    def factory(n_sequences: int, seed: int) -> WalkRule:
        calls.append((n_sequences, seed))
        return WalkRule(n_sequences, 2)

    monte_carlo(factory, bernoulli(0.5, 0.5), reps=10, n_max=5, rng=np.random.default_rng(1), chunk=3)
    assert [size for size, _ in calls] == [3, 3, 3, 1]
    assert len({seed for _, seed in calls}) == 4  # STEP must not reuse its uniforms (step.md pitfall 5)


def test_progress_bar_goes_to_stderr(capsys):
    monte_carlo(lambda r, s: WalkRule(r, 2), bernoulli(0.5, 0.5), reps=20, n_max=5,
                rng=np.random.default_rng(1), progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""


def test_summary_to_dict_is_json_ready():
    summary = monte_carlo(lambda r, s: WalkRule(r, 2), bernoulli(0.2, 0.8), reps=20, n_max=5,
                          rng=np.random.default_rng(1))
    as_dict = summary.to_dict()
    assert set(as_dict) == {
        "reps", "n_max", "mean_a", "mean_b", "power", "power_se", "fpr", "fpr_se",
        "p_b_better", "p_a_better", "mean_ttd", "ttd_se",
    }
    assert as_dict["reps"] == 20 and as_dict["mean_b"] == 0.8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reps": 0}, "`reps` must be a positive integer; found 0"),
        ({"n_max": 2.5}, "`n_max` must be a positive integer; found 2.5"),
        ({"chunk": -1}, "`chunk` must be a positive integer; found -1"),
        ({"rng": 42}, "`rng` must be a numpy.random.Generator; found int"),
        ({"model": (0.1, 0.2)}, "`model` must be a ScoreModel; found tuple"),
    ],
)
def test_monte_carlo_validation(kwargs, match):
    arguments = {"model": bernoulli(0.1, 0.2), "reps": 10, "n_max": 5, "rng": np.random.default_rng(0), **kwargs}
    model = arguments.pop("model")
    with pytest.raises(StatsInputError, match=match):
        monte_carlo(lambda r, s: WalkRule(r, 2), model, **arguments)


# -- score models -----------------------------------------------------------------------------------

def sample_means(model: ScoreModel, reps: int = 200, n: int = 100) -> tuple[float, float, float]:
    a, b = model.sample(np.random.default_rng(2024), reps, n)
    assert a.shape == b.shape == (reps, n)
    assert ((a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)).all()
    # SE of a mean of reps*n iid scores in [0, 1] is at most 0.5 / sqrt(reps*n)
    return float(a.mean()), float(b.mean()), 0.5 / math.sqrt(reps * n)


def test_bernoulli_model_means_and_support():
    model = bernoulli(0.2, 0.7)
    mean_a, mean_b, se = sample_means(model)
    assert abs(mean_a - 0.2) < K_SE * se and abs(mean_b - 0.7) < K_SE * se
    assert (model.mean_a, model.mean_b, model.is_null) == (0.2, 0.7, False)


def test_partial_credit_model_levels_and_means():
    model = partial_credit([0.0, 0.25, 1.0], [0.5, 0.5, 0.0], [0.1, 0.2, 0.7])
    a, b = model.sample(np.random.default_rng(3), 100, 100)
    assert set(np.unique(a)) == {0.0, 0.25} and set(np.unique(b)) == {0.0, 0.25, 1.0}
    mean_a, mean_b, se = sample_means(model)
    assert model.mean_a == pytest.approx(0.125) and model.mean_b == pytest.approx(0.75)
    assert abs(mean_a - 0.125) < K_SE * se and abs(mean_b - 0.75) < K_SE * se


def test_partial_credit_equal_means_is_a_null():
    # different laws, same mean 0.5: power is undefined there
    assert partial_credit([0, 0.5, 1], [0.5, 0, 0.5], [0, 1, 0]).is_null


def test_beta_model_means():
    mean_a, mean_b, se = sample_means(continuous_beta(0.3, 0.45, 4.0))
    assert abs(mean_a - 0.3) < K_SE * se and abs(mean_b - 0.45) < K_SE * se


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: bernoulli(1.5, 0.2), r"`p0` must lie in \[0, 1\]; found 1.5"),
        (lambda: bernoulli(0.2, "x"), r"`p1` must be a number in \[0, 1\]; found 'x'"),
        (lambda: partial_credit([0.5], [1.0], [1.0]), "at least two score levels"),
        (lambda: partial_credit([0, 1, 0.5], [0.2, 0.3, 0.5], [0.2, 0.3, 0.5]), r"increase strictly within \[0, 1\]"),
        (lambda: partial_credit([0, 1.2], [0.5, 0.5], [0.5, 0.5]), r"increase strictly within \[0, 1\]"),
        (lambda: partial_credit([0, 1], [0.5, 0.6], [0.5, 0.5]), "`probs_a` must sum to 1; found 1.1"),
        (lambda: partial_credit([0, 1], [0.5, 0.5], [1.0]), r"`probs_b` must hold one probability per level \(2\)"),
        (lambda: partial_credit([0, 1], [0.5, 0.5], [1.5, -0.5]), r"`probs_b` must lie in \[0, 1\]; found 1.5 at level 0"),
        (lambda: continuous_beta(0.0, 0.5, 2.0), r"`mean_a` must lie strictly inside \(0, 1\)"),
        (lambda: continuous_beta(0.5, 0.5, 0.0), "`concentration` must be a positive number; found 0.0"),
        (lambda: continuous_beta(0.5, 0.5, math.inf), "`concentration` must be a positive number; found inf"),
    ],
)
def test_model_validation(build, match):
    with pytest.raises(StatsInputError, match=match):
        build()
