"""The bootstrap test's skewness correction (Hall 1992, Johnson 1978) in evalstop_ros.stats.adastop_welch.

Monte Carlo checks follow STYLE.md: a seeded ``np.random.default_rng``, the bound ``alpha + 2 SE``
(SE of a rate equal to ``alpha``) printed with the estimate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from stats_support import assert_fpr

from evalstop_ros.stats.adastop import adastop_test
from evalstop_ros.stats.adastop_welch import HALL_SLOPE_MAX, difference_skewness, hall_transform, shared_skewness


def test_hall_transform_is_the_identity_without_skew_and_monotone_with_it():
    z = np.linspace(-12.0, 12.0, 2001)[None, :].repeat(3, axis=0)
    out = hall_transform(z, np.array([0.0, 0.2, -5.0]))
    assert np.array_equal(out[0], z[0])
    assert (np.diff(out[1:], axis=1) >= 0).all()  # monotone, also with a coefficient beyond the cap
    # the coefficient is capped: a skewness of -5 acts as a = -HALL_SLOPE_MAX
    a = -HALL_SLOPE_MAX
    assert out[2, 1500] == pytest.approx(((1 + a * z[2, 1500]) ** 3 - 1) / (3 * a) + a / 2)
    # Johnson's quadratic part: z + a z^2 + a/2 near 0, a = skew / 3
    assert out[1, 1000 + 10] == pytest.approx(0.12 + 0.2 / 3 * 0.12**2 + 0.1 / 3, abs=1e-4)
    assert hall_transform(np.array([[math.inf, -math.inf]]), np.array([0.3])).tolist() == [[math.inf, -math.inf]]


@pytest.mark.parametrize("n", [30, 60])
def test_hall_transform_removes_the_skewness_of_a_studentized_skewed_mean(n):
    # Exponential scores (skewness 2): the one-sample t is left-skewed, its lower 1 % tail too heavy;
    # with the true skewness of the mean (2 / sqrt(n)) the transformed statistic is nearer normal.
    x = np.random.default_rng(3).exponential(1.0, size=(40000, n))
    t = (x.mean(axis=1) - 1.0) / (x.std(axis=1, ddof=1) / math.sqrt(n))
    g = hall_transform(t[None, :], np.array([2.0 / math.sqrt(n)]))[0]
    assert abs(stats.skew(g)) < 0.4 * abs(stats.skew(t))
    low = stats.norm.ppf(0.01)
    assert abs(np.mean(g < low) - 0.01) < 0.5 * abs(np.mean(t < low) - 0.01)


def test_shared_skewness_is_the_most_skewed_agents_adjusted_g1():
    rng = np.random.default_rng(4)
    history = np.vstack([rng.normal(size=12), rng.exponential(size=12), np.full(12, 2.0), -rng.exponential(size=12)])
    g1 = stats.skew(history[[0, 1, 3]], axis=1, bias=False)
    assert shared_skewness(history) == pytest.approx(g1[np.argmax(np.abs(g1))])  # constant row left out
    assert shared_skewness(np.full((2, 5), 1.0)) == 0.0
    assert shared_skewness(rng.normal(size=(3, 2))) == 0.0  # fewer than three scores


def test_difference_skewness_follows_the_third_cumulant_of_the_mean_difference():
    history = np.vstack([np.linspace(0.0, 0.1, 10), np.linspace(0.0, 1.0, 10), np.full(10, 3.0), np.full(10, 3.0)])
    v = history.var(axis=1, ddof=1)
    got = difference_skewness(history, np.array([0, 1, 2]), np.array([1, 0, 3]), 2.0)
    want = 2.0 * (v[0] ** 1.5 - v[1] ** 1.5) / (math.sqrt(10) * (v[0] + v[1]) ** 1.5)
    assert got[0] == pytest.approx(want) and want < 0  # the wide, right-skewed agent second: D left-skewed
    assert got[1] == pytest.approx(-want)
    assert got[2] == 0.0  # both agents constant


def _gamma(rng, rows, sds):  # mean 1, the given sds: shape (1/sd)^2, right-skewed (skewness 2 sd)
    return np.column_stack([rng.gamma(1 / s**2, s**2, rows) for s in sds])


@pytest.mark.slow
def test_closed_fwe_with_exponential_like_scores_beside_a_steady_agent():
    # Equal means 1, gamma scores with sd 0.1, 1, 1 (skewness 0.2, 2, 2), N = 5, K = 4: without the
    # skewness correction 0.083 of 1000 data sets (docs/adastop.md).  400 data sets, B = 200,
    # bound alpha + 2 SE = 0.0718.
    reps, rng, errors = 400, np.random.default_rng(45), 0
    for _ in range(reps):
        res = adastop_test(_gamma(rng, 20, (0.1, 1.0, 1.0)), n_per_interim=5, n_interims=4, n_permutations=200,
                           seed=int(rng.integers(2**31)))
        errors += any(d in ("larger", "smaller") for d in res.decisions)
    assert_fpr(errors, reps, 0.05)
