"""Tests of evalstop_ros.stats.lai (Lai 1988; step.md §5 "Lai").

Lai's test is only *approximately* valid (Monte Carlo calibrated) within a pre-declared n_max.
Its Type-I error at p0 = p1 = 1/2 is nevertheless computable exactly for a given boundary (a
walk on the discordant pairs, mixed over Binomial(n_max, 1/2) discordant counts); the tests use
that exact computation to check the calibration, and Monte Carlo at the skewed nulls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.lai import (
    LaiProcess,
    calibrate_lai_c,
    lai_boundary,
    lai_g,
    lai_h0,
    lai_test,
)
from evalstop_ros.stats.sequential import Decision, run_batch

ALPHA = 0.05


def exact_null_rejection(boundary: np.ndarray, n_max: int, two_sided: bool, p: float = 0.5) -> float:
    """P(false claim by n_max) for independent pairs with p0 = p1 = p (exact dynamic programme)."""
    alive = np.zeros(n_max + 2)
    alive[0] = 1.0  # law of u (B's wins) among unstopped walks after m discordant pairs
    stopped_by = np.zeros(n_max + 1)
    u = np.arange(n_max + 2)
    for m in range(1, n_max + 1):
        alive = 0.5 * alive + 0.5 * np.concatenate(([0.0], alive[:-1]))
        hit = (u <= m) & (u >= boundary[m])
        if two_sided:
            hit |= (u <= m) & (m - u >= boundary[m])
        stopped_by[m] = stopped_by[m - 1] + alive[hit].sum()
        alive[hit] = 0.0
    discordant = stats.binom.pmf(np.arange(n_max + 1), n_max, 2 * p * (1 - p))
    return float(discordant @ stopped_by)


def test_h0_approximation_regimes_join() -> None:
    """Lai (1988) Eq. (2.12): the four regimes of h0* nearly meet at t = 0.01, 0.1 and 0.8."""
    for t in (0.01, 0.1, 0.8):
        left, right = lai_h0(np.array([t * (1 - 1e-9), t]))
        assert left == pytest.approx(right, rel=0.02), (t, left, right)
    # Large-t term: (1/4) sqrt(2/pi) (t^-1/2 - 5/(48 pi) t^-5/2).
    assert lai_h0(np.array([4.0]))[0] == pytest.approx(0.25 * math.sqrt(2 / math.pi) * (0.5 - 5 / (48 * math.pi) / 32))


def test_g_decreases_and_boundary_is_sane() -> None:
    """g*(t) = h0*(t)^2 / (2t) decreases in t; the boundary u_m is > m/2, <= m + 1, nondecreasing."""
    t = np.geomspace(1e-8, 10, 2000)
    assert np.all(np.diff(lai_g(t)) < 0.02 * lai_g(t[1:]))  # decreasing up to the regime seams
    bound = lai_boundary(4.3321e-05, 500)
    m = np.arange(501)
    assert np.all(2 * bound[1:] > m[1:]) and np.all(bound <= m + 1)
    assert np.all(np.diff(bound) >= 0)
    # Definition: smallest u > m/2 with m KL(u/m || 1/2) >= g*(c m).
    kl = lambda th: stats.entropy([th, 1 - th], [0.5, 0.5])  # noqa: E731
    for mm in (10, 57, 200, 499):
        u = bound[mm]
        g = lai_g(np.array([4.3321e-05 * mm]))[0]
        assert mm * kl(u / mm) >= g and (2 * (u - 1) <= mm or mm * kl((u - 1) / mm) < g)


def test_reference_example() -> None:
    """(0, 1) on every trial with the [ref-code] default c = 4.3321e-05: boundary[m] = m + 1 for m < 10."""
    res = lai_test([0] * 30, [1] * 30, alternative="greater", n_max=100, c=4.3321e-05)
    assert res.decision == Decision.B_BETTER and res.stopping_trial == 10
    assert np.isnan(res.pvalue)


@pytest.mark.parametrize(("alternative", "n_max"), [("greater", 100), ("greater", 500),
                                                    ("two-sided", 100), ("two-sided", 500)])
def test_calibrated_c_controls_type_one_exactly_at_half(alternative: str, n_max: int) -> None:
    """Calibration (MC, 10 000 sequences, 2-SE margin) gives exact null rejection <= alpha at p = 1/2."""
    c = calibrate_lai_c(ALPHA, n_max, alternative)
    fpr = exact_null_rejection(lai_boundary(c, n_max), n_max, alternative == "two-sided")
    assert 0.03 < fpr <= ALPHA, f"exact FPR {fpr:.4f} at c = {c:.4g}"


def test_calibration_is_cached_and_seeded() -> None:
    first = calibrate_lai_c(0.1, 60, "greater")
    assert calibrate_lai_c(0.1, 60, "greater") == first
    assert calibrate_lai_c.cache_info().hits >= 1
    calibrate_lai_c.cache_clear()
    assert calibrate_lai_c(0.1, 60, "greater") == first  # same seed, same answer


def test_budget_exhausted_at_n_max_and_frozen() -> None:
    """Undecided sequences become BUDGET_EXHAUSTED at trial n_max; later data change nothing."""
    proc = LaiProcess(2, alternative="greater", n_max=20, c=1e-3)
    for _ in range(20):
        proc.update(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    assert proc.decision[0] == Decision.B_BETTER and proc.decision[1] == Decision.BUDGET_EXHAUSTED
    stop = proc.stopping_trial.copy()
    proc.update(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    np.testing.assert_array_equal(proc.stopping_trial, stop)
    assert proc.discordant[1] == 0
    res = lai_test([1] * 40, [1] * 40, n_max=25, c=1e-3)
    assert res.decision == Decision.BUDGET_EXHAUSTED and res.n_observed == 25


def test_one_sided_ignores_the_other_direction() -> None:
    """'greater' continues when theta_hat < 1/2 crosses (reference behaviour); two-sided stops for A."""
    a, b = [1] * 12 + [0] * 40, [0] * 12 + [1] * 40
    assert lai_test(a, b, alternative="two-sided", n_max=100, c=4.3321e-05).decision == Decision.A_BETTER
    greater = lai_test(a, b, alternative="greater", n_max=100, c=4.3321e-05)
    assert greater.decision == Decision.B_BETTER and greater.stopping_trial > 12


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: lai_test([0, 1, 0.5], [1, 1, 1], n_max=10, c=1e-4),
         r"`scores_a` must be 0 or 1 \(success/failure\) for Lai's test; found 0.5 at trial 3"),
        (lambda: lai_test([0, 1], [1, 2], n_max=10, c=1e-4), r"`scores_b` must lie in \[0, 1\]"),
        (lambda: lai_test([0, 1], [1], n_max=10, c=1e-4), r"paired trial by trial; found 2 and 1 trials"),
        (lambda: lai_test([0], [1], n_max=0, c=1e-4), r"`n_max` must be a positive integer; found 0"),
        (lambda: lai_test([0], [1], n_max=10, c=-1.0), r"`c` must be a positive number; found -1.0"),
        (lambda: lai_test([0], [1], n_max=10, alpha=1.0), r"`alpha` must lie in \(0, 1\); found 1.0"),
        (lambda: lai_test([0], [1], n_max=10, alternative="more"), r"`alternative` should be one of"),
    ],
)
def test_validation(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StatsInputError, match=message):
        call()


def test_type_one_error_monte_carlo() -> None:
    """Ties p0 = p1 in {0.05, 0.5, 0.95}: 3 x 7000 sequences, n_max = 300, two-sided (calibrated c).

    Conservative away from p = 1/2 (fewer discordant pairs), as seed 003 Figs. 3 and 6 report.
    """
    rng = np.random.default_rng(1988)
    reps, n_max = 7000, 300
    false_claims = total = 0
    for p in (0.05, 0.5, 0.95):
        a = (rng.random((reps, n_max)) < p).astype(float)
        b = (rng.random((reps, n_max)) < p).astype(float)
        outcome = run_batch(LaiProcess(reps, alpha=ALPHA, n_max=n_max), a, b)
        false_claims += int(np.isin(outcome.decision, (Decision.A_BETTER, Decision.B_BETTER)).sum())
        total += reps
    estimate, se = false_claims / total, math.sqrt(ALPHA * (1 - ALPHA) / total)
    assert estimate <= ALPHA + 2 * se, f"FPR {estimate:.4f} (SE {se:.4f}) exceeds {ALPHA + 2 * se:.4f}"
