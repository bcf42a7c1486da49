"""Tests of evalstop_ros.stats.mixture (the mixture e-process of the hub's pairs; docs/hub.md).

The e-value is checked against the beta-binomial mixture computed independently from the
discordant counts; Type-I is exact on success/failure scores (a walk over the discordant
pairs' signs) and Monte Carlo on bounded scores.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from stats_support import assert_fpr

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.families import FamilyProcess
from evalstop_ros.stats.mixture import MixtureProcess, mixture_bets, mixture_test
from evalstop_ros.stats.nscore import NScoreProcess
from evalstop_ros.stats.sequential import Decision, run_batch

ALPHA = 0.05


def log_mixture(wins: int, losses: int) -> float:
    """log sum_k w_k (1 + lambda_k)^wins (1 - lambda_k)^losses: the mixture from the counts alone."""
    return float(log_mixtures(np.array([wins]), np.array([losses]))[0])


def log_mixtures(wins: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """:func:`log_mixture` of many count pairs at once."""
    bets, weights = mixture_bets()
    terms = np.log(weights) + np.outer(wins, np.log1p(bets)) + np.outer(losses, np.log1p(-bets))
    result: np.ndarray = logsumexp(terms, axis=1)
    return result


def test_prior_is_the_truncated_beta_of_the_win_probability():
    bets, weights = mixture_bets(64, 4.0)
    q = (1 + bets) / 2
    expected = (q * (1 - q)) ** 3
    assert weights == pytest.approx(expected / expected.sum(), rel=1e-12)
    assert weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert bets.min() > 0 and bets.max() < 1  # every factor 1 + lambda d stays positive on [-1, 1]


def test_evalue_is_the_mixture_of_the_discordant_counts():
    # Binary pairs: the process's e-value after each pair equals the mixture of its (wins, losses),
    # whatever the order and however many concordant pairs lie between (they change nothing).
    rng = np.random.default_rng(5)
    a, b = (rng.random(300) < 0.5).astype(float), (rng.random(300) < 0.6).astype(float)
    proc = MixtureProcess(alpha=1e-12, alternative="greater")  # never stops within 300 pairs here
    wins = losses = 0
    for x, y in zip(a, b):
        proc.update(np.array([x]), np.array([y]))
        wins += int(y > x)
        losses += int(y < x)
        assert math.log(float(proc.evalue()[0])) == pytest.approx(log_mixture(wins, losses), abs=1e-9)


def test_less_child_is_the_greater_child_on_swapped_pairs():
    rng = np.random.default_rng(6)
    a, b = rng.random(80), rng.random(80)
    less = mixture_test(a, b, alpha=ALPHA, alternative="less")
    greater = mixture_test(b, a, alpha=ALPHA, alternative="greater")
    np.testing.assert_allclose(less.evalues, greater.evalues, rtol=1e-13)
    assert less.stopping_trial == greater.stopping_trial


def _crossing_bound(alpha: float, horizon: int) -> tuple[float, float]:
    """Exact P(the fair-coin walk of discordant signs crosses 1/alpha within ``horizon`` discordant
    pairs), and that plus Ville's bound on a later crossing, E[min(1, alpha X_K); not crossed]."""
    threshold = -math.log(alpha)
    alive = np.array([1.0])  # alive[j]: probability of j wins after k discordant pairs, not crossed
    crossed = 0.0
    for k in range(1, horizon + 1):
        step = np.zeros(k + 1)
        step[1:] += 0.5 * alive  # a win
        step[:-1] += 0.5 * alive  # a loss
        wins = np.arange(k + 1)
        log_e = log_mixtures(wins, k - wins)
        hit = log_e >= threshold
        crossed += float(step[hit].sum())
        alive = np.where(hit, 0.0, step)
    wins = np.arange(horizon + 1)
    log_e = log_mixtures(wins, horizon - wins)
    later = float((alive * np.exp(np.minimum(0.0, log_e - threshold))).sum())
    return crossed, crossed + later


@pytest.mark.parametrize("alpha", [0.05, 0.05 / 30])
def test_type_one_error_exact_on_success_scores(alpha):
    # Under H0: E[d | past] <= 0 a discordant pair is won with probability <= 1/2 given the past,
    # so the walk of the signs is dominated by a fair coin and concordant pairs do not move it:
    # the fair-coin crossing probability bounds the Type-I error at any p_A >= p_B and any number
    # of pairs (docs/hub.md).  Computed exactly over 1000 discordant pairs, plus Ville's bound on
    # a crossing after them.
    by_horizon, ever = _crossing_bound(alpha, 1000)
    assert ever <= alpha, f"P(cross) <= {ever:.6f} exceeds alpha {alpha}"
    assert by_horizon > alpha / 4  # the boundary is reached: the check is not vacuous


def test_process_crosses_where_the_mixture_does():
    # Decisions use the same boundary the exact computation uses: 10 straight wins at 0.05 one-sided.
    first = next(k for k in range(1, 50) if log_mixture(k, 0) >= -math.log(ALPHA))
    res = mixture_test([0] * 50, [1] * 50, alpha=ALPHA, alternative="greater")
    assert res.stopping_trial == first == 10
    assert res.decision == Decision.B_BETTER


def test_type_one_error_bounded_scores_monte_carlo():
    """Bounded scores with equal means (Beta(2, 2) vs uniform; skewed Beta(0.5, 3) vs Beta(1, 6)),
    and A better (Beta(3, 2) vs Beta(2, 3)): 3 x 4000 sequences, N = 400, two-sided at 0.05."""
    rng = np.random.default_rng(41)
    reps, n = 4000, 400
    false_claims = total = 0
    worlds = [((2, 2), (1, 1), False), ((0.5, 3), (1, 6), False), ((3, 2), (2, 3), True)]
    for (a0, b0), (a1, b1), a_better in worlds:
        outcome = run_batch(MixtureProcess(reps, alpha=ALPHA, alternative="two-sided"),
                            rng.beta(a0, b0, (reps, n)), rng.beta(a1, b1, (reps, n)))
        wrong = (Decision.B_BETTER,) if a_better else (Decision.B_BETTER, Decision.A_BETTER)
        false_claims += int(np.isin(outcome.decision, wrong).sum())
        total += reps
    assert_fpr(false_claims, total, ALPHA)


def test_stops_sooner_than_nscore_on_a_hub_gap():
    # The hub's middle gap (0.55 vs 0.40) at its first Holm level alpha / 30, one-sided, on the
    # same 600 sequences: the mixture needs fewer pairs on average (docs/hub_study.md).
    rng = np.random.default_rng(42)
    reps, n = 600, 2500
    a, b = (rng.random((reps, n)) < 0.40).astype(float), (rng.random((reps, n)) < 0.55).astype(float)
    stops = {}
    for name, proc in (("mixture", MixtureProcess(reps, alpha=ALPHA / 30, alternative="greater")),
                       ("nscore", NScoreProcess(reps, alpha=ALPHA / 30, alternative="greater"))):
        outcome = run_batch(proc, a, b)
        assert (outcome.decision == Decision.B_BETTER).mean() > 0.99
        stops[name] = np.where(outcome.stopping_trial > 0, outcome.stopping_trial, n).astype(float)
    ratio = stops["mixture"].mean() / stops["nscore"].mean()
    se = (stops["mixture"] - stops["nscore"]).std(ddof=1) / math.sqrt(reps) / stops["nscore"].mean()
    assert ratio < 0.95, f"mean stopping time ratio {ratio:.3f} (SE {se:.3f})"


@pytest.mark.parametrize(("a", "b", "match"), [
    ([0.2, 1.2], [0.5, 0.5], r"`scores_a` must lie in \[0, 1\]; found 1.2 at trial 2"),
    ([0.2, 0.3], [0.5, float("nan")], r"`scores_b` must be finite; found nan at trial 2"),
])
def test_bad_scores_name_the_argument_and_trial(a, b, match):
    proc = MixtureProcess(alternative="greater")
    with pytest.raises(StatsInputError, match=match):
        for x, y in zip(a, b):
            proc.update(np.array([x]), np.array([y]))


def test_familywise_error_of_the_hubs_family_monte_carlo():
    """The hub's family with this test: six equal policies (fair-coin scores, the worst case for
    0/1 data), all 15 pairs two-sided under sequential Holm, analysed after every round, 300
    rounds; 1000 families at alpha = 0.2 (a level at which a wrong split shows within 2 SE)."""
    rng = np.random.default_rng(43)
    reps, alpha = 1000, 0.2
    family = FamilyProcess([f"p{k}" for k in range(6)], method="mixture", alpha=alpha, correction="holm",
                           n_sequences=reps)
    for _ in range(300):
        family.update((rng.random((6, reps)) < 0.5).astype(float))
    claims = np.isin(family.decision, (Decision.A_BETTER, Decision.B_BETTER)).any(axis=0)
    assert_fpr(int(claims.sum()), reps, alpha)
