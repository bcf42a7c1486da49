"""Tests of evalstop_ros.stats.savi (θ-SAVI, Turner & Grünwald 2023 §2; nscore.md §5.2, step.md §5).

Reference value: /work/shared/spec/nscore.md §8, period-6 pattern, [ref-code] ``SaviTest``
(one-sided mu_0 < mu_1, alpha = 0.05): stop at 38 with p 0.0397.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from stats_support import assert_fpr

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.savi import SaviProcess, savi_test
from evalstop_ros.stats.sequential import Decision, run_batch

ALPHA = 0.05
PERIOD_A = [0, 0, 1, 0, 0, 1]
PERIOD_B = [1, 1, 0, 1, 0, 1]


def test_period_six_reference() -> None:
    """nscore.md §8: SaviTest on the period-6 pattern stops at 38 with p = 0.0397."""
    res = savi_test(PERIOD_A * 10, PERIOD_B * 10, alternative="greater")
    assert res.decision == Decision.B_BETTER
    assert res.stopping_trial == 38
    assert res.pvalue == pytest.approx(0.0397, abs=5e-5)


def naive_log_e(x0: np.ndarray, x1: np.ndarray) -> list[float]:
    """Turner & Grünwald §2 as written in nscore.md §5.2, with scipy's Bernoulli log-pmf."""
    log_e, out, s0, s1 = 0.0, [], 0, 0
    for n, (a, b) in enumerate(zip(x0, x1)):
        p0, p1 = (s0 + 1) / (n + 3), (s1 + 2) / (n + 3)  # Beta(1,2), Beta(2,1) posterior means
        if p0 < p1:  # else the plug-in lies in H0 and the increment is 0
            q = (p0 + p1) / 2  # KL projection onto p0 = p1
            log_e += (stats.bernoulli.logpmf(a, p0) + stats.bernoulli.logpmf(b, p1)
                      - stats.bernoulli.logpmf(a, q) - stats.bernoulli.logpmf(b, q))
        out.append(log_e)
        s0, s1 = s0 + a, s1 + b
    return out


def test_e_process_matches_definition() -> None:
    """Log e-values equal a direct transcription of the θ-SAVI increment (never deciding: alpha tiny)."""
    rng = np.random.default_rng(4)
    x0, x1 = rng.integers(0, 2, 80), rng.integers(0, 2, 80)
    proc = SaviProcess(alternative="greater", alpha=1e-12)
    got = []
    for a, b in zip(x0, x1):
        proc.update(np.array([float(a)]), np.array([float(b)]))
        got.append(float(proc.log_evalues()[0, 0]))
    np.testing.assert_allclose(got, naive_log_e(x0, x1), rtol=1e-12, atol=1e-12)


def test_less_child_swaps_policies_and_priors() -> None:
    """'less' on (A, B) = 'greater' on (B, A): the Beta priors swap with the roles."""
    greater = savi_test(PERIOD_A * 10, PERIOD_B * 10, alternative="greater")
    less = savi_test(PERIOD_B * 10, PERIOD_A * 10, alternative="less")
    assert less.decision == Decision.A_BETTER and less.stopping_trial == greater.stopping_trial
    np.testing.assert_allclose(less.pvalues, greater.pvalues, rtol=1e-12)


def test_two_sided_at_half_alpha() -> None:
    """Two-sided: each child at alpha/2, p = min(1, 2 min(p>, p<))."""
    two = savi_test(PERIOD_A * 20, PERIOD_B * 20)
    one = savi_test(PERIOD_A * 20, PERIOD_B * 20, alternative="greater", alpha=ALPHA / 2)
    assert two.stopping_trial == one.stopping_trial == 44
    np.testing.assert_allclose(two.pvalues, np.minimum(1, 2 * one.pvalues), rtol=1e-12)


def test_frozen_after_decision() -> None:
    proc = SaviProcess(alternative="greater")
    for _ in range(10):
        proc.update(np.array([0.0]), np.array([1.0]))
    stop, p = int(proc.stopping_trial[0]), proc.pvalue()
    for _ in range(10):
        proc.update(np.array([1.0]), np.array([0.0]))
    assert stop == 4 and proc.stopping_trial[0] == 4 and proc.decision[0] == Decision.B_BETTER
    np.testing.assert_array_equal(proc.pvalue(), p)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: savi_test([0, 1, 0.5], [1, 1, 1]),
         r"`scores_a` must be 0 or 1 \(success/failure\) for θ-SAVI; found 0.5 at trial 3"),
        (lambda: savi_test([0, 1], [1, 0.25]),
         r"`scores_b` must be 0 or 1 \(success/failure\) for θ-SAVI; found 0.25 at trial 2"),
        (lambda: savi_test([0, np.nan], [1, 1]), r"`scores_a` must be finite; found nan at trial 2"),
        (lambda: savi_test([0, 1], [1]), r"paired trial by trial; found 2 and 1 trials"),
        (lambda: savi_test([0], [1], alpha=2), r"`alpha` must lie in \(0, 1\); found 2"),
        (lambda: savi_test([0], [1], alternative="two_sided"), r"`alternative` should be one of .*; found 'two_sided'"),
    ],
)
def test_validation(call, message: str) -> None:  # type: ignore[no-untyped-def]
    """Bernoulli data only: the message names the argument, the value and the trial."""
    with pytest.raises(StatsInputError, match=message):
        call()


def test_process_refuses_non_bernoulli_in_batch() -> None:
    proc = SaviProcess(3)
    with pytest.raises(StatsInputError, match=r"found 0.7 at trial 1 \(sequence 2\)"):
        proc.update(np.array([0.0, 1.0, 0.7]), np.array([1.0, 1.0, 1.0]))


@pytest.mark.parametrize("alternative", ["greater", "two-sided"])
def test_type_one_error_worst_case_nulls(alternative: str) -> None:
    """Ties p0 = p1 in {0.05, 0.5, 0.95} plus p0 = 0.6 > p1 = 0.4: 4 x 5000 sequences, N = 500.

    Counted as false: every claim at a tie, and 'B better' at (0.6, 0.4).
    """
    rng = np.random.default_rng(31 if alternative == "greater" else 32)
    reps, n = 5000, 500
    false_claims = total = 0
    for p0, p1 in ((0.05, 0.05), (0.5, 0.5), (0.95, 0.95), (0.6, 0.4)):
        a = (rng.random((reps, n)) < p0).astype(float)
        b = (rng.random((reps, n)) < p1).astype(float)
        outcome = run_batch(SaviProcess(reps, alternative=alternative, alpha=ALPHA), a, b)
        wrong = (Decision.B_BETTER,) if p0 > p1 else (Decision.B_BETTER, Decision.A_BETTER)
        false_claims += int(np.isin(outcome.decision, wrong).sum())
        total += reps
    assert_fpr(false_claims, total, ALPHA)
