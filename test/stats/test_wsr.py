"""Tests of evalstop_ros.stats.wsr (seed 000 App. B, Alg. 2, in the fast form of nscore.md §5.1).

Reference values: /work/shared/spec/nscore.md §8 ("Deterministic unit vectors", [ref-code]
``WsrComparisonTest`` at alpha = 0.05).  That reference builds the two-sided confidence sequence
at level alpha, i.e. each side crosses at 2/alpha: it is ``alternative="two-sided", alpha=0.05``
here, and equally ``alternative="greater", alpha=0.025`` (same bet, same threshold).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from stats_support import assert_fpr, found, low_discrepancy, ones_vs_zeros, period_six

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.sequential import Decision, run_batch
from evalstop_ros.stats.wsr import WsrProcess, wsr_test

ALPHA = 0.05


@pytest.mark.parametrize(
    ("pair", "stop"),
    [
        (ones_vs_zeros, 6),  # §8 "(0,1) on every trial": WSR 6 (LB 0.0560)
        (period_six, 80),  # §8 period-6 pattern: WSR 80
        (low_discrepancy, 26),  # §8 low-discrepancy pair: WSR t = 26, CS [0.0159, 0.3723]
    ],
)
@pytest.mark.parametrize(("alternative", "alpha"), [("two-sided", 0.05), ("greater", 0.025)])
def test_reference_stopping_times(pair, stop: int, alternative: str, alpha: float) -> None:  # type: ignore[no-untyped-def]
    """nscore.md §8 WSR stops; the reference's alpha = 0.05 is 0.025 per side (threshold 40)."""
    res = wsr_test(*pair(), alternative=alternative, alpha=alpha)
    assert res.decision == Decision.B_BETTER
    assert res.stopping_trial == stop


def test_bets_follow_algorithm_2() -> None:
    """Alg. 2 lines 9-11 (with the division) and nscore.md §5.1: xi^W_t = min(lambda_t / 2, c)."""
    rng = np.random.default_rng(1)
    a, b = rng.random(40), rng.random(40)
    proc = WsrProcess(alternative="two-sided", alpha=ALPHA, c=0.95)
    sum_y, sum_sq, variance = 0.0, 0.0, 0.25  # sigma^2_0 = 1/4
    for t in range(1, 41):
        lam = math.sqrt(2 * math.log(2 / ALPHA) / (t * math.log(1 + t) * variance))
        np.testing.assert_allclose(proc.xi[:, 0], min(lam / 2, 0.95), rtol=1e-13)
        proc.update(a[t - 1 : t], b[t - 1 : t])
        y = (b[t - 1] - a[t - 1] + 1) / 2
        sum_y += y
        mean = (0.5 + sum_y) / (t + 1)
        sum_sq += (y - mean) ** 2
        variance = (0.25 + sum_sq) / (t + 1)


def test_capital_processes() -> None:
    """K+ = prod(1 + xi^W d) and K- = prod(1 - xi^W d) at m = 1/2 (nscore.md §5.1)."""
    rng = np.random.default_rng(2)
    a, b = rng.random(30), rng.random(30)
    proc = WsrProcess(alternative="two-sided", alpha=1e-9)
    log_plus = log_minus = 0.0
    for t in range(30):
        xi = float(proc.xi[0, 0])
        d = b[t] - a[t]
        log_plus, log_minus = log_plus + math.log1p(xi * d), log_minus + math.log1p(-xi * d)
        proc.update(a[t : t + 1], b[t : t + 1])
    np.testing.assert_allclose(proc.log_evalues()[:, 0], [log_plus, log_minus], rtol=1e-12)


def test_no_decision_before_trial_three() -> None:
    """The reference returns [-1, 1] for t <= 2: a crossing at t = 1 is only acted on at t = 3."""
    proc = WsrProcess(alternative="greater", alpha=0.6)  # threshold 1/0.6 < 1.95 = K+_1
    xi = []
    for _ in range(2):
        xi.append(float(proc.xi[0, 0]))
        proc.update(np.array([0.0]), np.array([1.0]))
        assert proc.decision[0] == Decision.CONTINUE and proc.pvalue()[0] == 1.0
    assert xi[0] == 0.95  # lambda_1 / 2 = 1.21 > c
    proc.update(np.array([1.0]), np.array([0.0]))  # K+ falls, but its running max had crossed
    assert proc.decision[0] == Decision.B_BETTER and proc.stopping_trial[0] == 3
    assert proc.pvalue()[0] == pytest.approx(1 / ((1 + xi[0]) * (1 + xi[1])), rel=1e-12)


def test_two_sided_pvalue_and_mirror() -> None:
    """Two-sided p = min(1, 2 / max_s max(K+, K-)); 'less' on (A, B) = 'greater' on (B, A)."""
    a, b = period_six()
    two = wsr_test(a, b)
    one = wsr_test(a, b, alternative="greater", alpha=ALPHA / 2)
    np.testing.assert_allclose(two.pvalues, np.minimum(1, 2 * one.pvalues), rtol=1e-12)
    less = wsr_test(b, a, alternative="less", alpha=ALPHA / 2)
    assert less.decision == Decision.A_BETTER and less.stopping_trial == one.stopping_trial


def test_frozen_after_decision() -> None:
    """Stop at the first crossing; later pairs change neither decision nor p-value."""
    proc = WsrProcess()
    for _ in range(6):
        proc.update(np.array([0.0]), np.array([1.0]))
    assert proc.decision[0] == Decision.B_BETTER
    p, e = proc.pvalue(), proc.evalue()
    for _ in range(10):
        proc.update(np.array([1.0]), np.array([0.0]))
    assert proc.stopping_trial[0] == 6
    np.testing.assert_array_equal(proc.pvalue(), p)
    np.testing.assert_array_equal(proc.evalue(), e)


def test_batch_matches_single_sequences() -> None:
    """Vectorised run over R sequences = R separate runs."""
    rng = np.random.default_rng(3)
    a, b = rng.random((10, 150)), np.clip(rng.random((10, 150)) + 0.2, 0, 1)
    proc = WsrProcess(10)
    run_batch(proc, a, b)
    for r in range(10):
        single = wsr_test(a[r], b[r])
        assert proc.stopping_trial[r] == (single.stopping_trial or 0)
        assert proc.pvalue()[r] == pytest.approx(single.pvalue, rel=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wsr_test([0.1, np.inf], [0.2, 0.3]), rf"`scores_a` must be finite; {found('inf')} at trial 2"),
        (lambda: wsr_test([0.1, 0.2], [0.2, 1.5]), rf"`scores_b` must lie in \[0, 1\]; {found('1.5')} at trial 2"),
        (lambda: wsr_test([0.1], [0.2, 0.3]), r"paired trial by trial; found 1 and 2 trials"),
        (lambda: wsr_test([0.1], [0.2], alpha=-0.1), r"`alpha` must lie in \(0, 1\); found -0.1"),
        (lambda: wsr_test([0.1], [0.2], alternative="up"), r"`alternative` should be one of .*; found 'up'"),
        (lambda: wsr_test([0.1], [0.2], c=1.0), r"`c` must lie in \(0, 1\); found 1.0"),
        (lambda: wsr_test([0.1], [0.2], c=None), r"`c` must be a number in \(0, 1\); found None"),
    ],
)
def test_validation(call, message: str) -> None:  # type: ignore[no-untyped-def]
    """Every input check names the argument and the bad value."""
    with pytest.raises(StatsInputError, match=message):
        call()


def test_type_one_error_worst_case_nulls() -> None:
    """Ties: Bernoulli p0 = p1 in {0.05, 0.5, 0.95} and equal-mean Beta(2,5)/Beta(1,2.5).

    4 x 5000 sequences, N = 400, two-sided at alpha = 0.05: any claim is a false claim.
    """
    rng = np.random.default_rng(99)
    reps, n = 5000, 400
    false_claims = total = 0
    samples = [((rng.random((reps, n)) < p).astype(float), (rng.random((reps, n)) < p).astype(float))
               for p in (0.05, 0.5, 0.95)]
    samples.append((rng.beta(2, 5, (reps, n)), rng.beta(1, 2.5, (reps, n))))
    for a, b in samples:
        outcome = run_batch(WsrProcess(reps, alpha=ALPHA), a, b)
        false_claims += int((outcome.decision != Decision.CONTINUE).sum())
        total += reps
    assert_fpr(false_claims, total, ALPHA)
