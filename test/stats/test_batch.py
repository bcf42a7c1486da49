"""Tests of evalstop_ros.stats.batch (fixed-N Barnard, Boschloo, Fisher) and stats.methods.

Reference values are the examples of scipy's documentation (scipy.stats.barnard_exact,
boschloo_exact, fisher_exact), re-expressed as our (scores_a, scores_b) with the table
``[[S_A, S_B], [F_A, F_B]]``; "greater" (B better) is scipy's "less" on that table.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
from scipy import stats

from evalstop_ros.stats.batch import (
    BatchTestResult,
    barnard_test,
    boschloo_test,
    fisher_test,
    success_table,
)
from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.methods import BATCH_METHODS, SEQUENTIAL_METHODS, VALIDITY
from evalstop_ros.stats.sequential import Decision


def outcomes(successes: int, failures: int) -> list[int]:
    return [1] * successes + [0] * failures


@pytest.mark.parametrize(
    ("test", "table", "alternative", "statistic", "pvalue"),
    [
        # scipy barnard_exact docs: [[7, 12], [8, 3]], alternative="less" -> 0.03407 (Wald -1.894)
        (barnard_test, ((7, 12), (8, 3)), "greater", -1.894338076, 0.034076716),
        # scipy boschloo_exact docs: [[74, 31], [43, 32]], alternative="greater" -> 0.0355
        (boschloo_test, ((74, 31), (43, 32)), "less", 0.048312210, 0.035564064),
        # scipy fisher_exact docs: [[6, 2], [1, 4]] two-sided -> odds ratio 12, p 0.1026
        (fisher_test, ((6, 2), (1, 4)), "two-sided", 12.0, 0.102564103),
    ],
)
def test_scipy_documentation_examples(test, table, alternative, statistic, pvalue) -> None:  # type: ignore[no-untyped-def]
    (s_a, s_b), (f_a, f_b) = table
    res = test(outcomes(s_a, f_a), outcomes(s_b, f_b), alternative=alternative)
    assert res.table == table
    assert res.statistic == pytest.approx(statistic, rel=1e-8)
    assert res.pvalue == pytest.approx(pvalue, rel=1e-7)


@pytest.mark.parametrize("test", [barnard_test, boschloo_test, fisher_test])
def test_direction_mapping(test) -> None:  # type: ignore[no-untyped-def]
    """B clearly better (9/10 vs 2/10): small p for 'greater', ~1 for 'less'; decision follows."""
    a, b = outcomes(2, 8), outcomes(9, 1)
    greater, less, both = (test(a, b, alternative=alt) for alt in ("greater", "less", "two-sided"))
    assert greater.pvalue < 0.01 < 0.99 < less.pvalue
    assert greater.decision(0.05) == Decision.B_BETTER
    assert both.decision(0.05) == Decision.B_BETTER
    assert test(b, a).decision(0.05) == Decision.A_BETTER
    assert less.decision(0.05) == Decision.BUDGET_EXHAUSTED


def test_result_is_frozen_and_flags_sequential_invalidity() -> None:
    """seed 003 §V: batch tests are not valid when re-run after every trial."""
    res = fisher_test(outcomes(3, 2), outcomes(1, 4))
    assert res.sequential_valid is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.pvalue = 0.0  # type: ignore[misc]
    assert res.to_dict()["sequential_valid"] is False
    assert isinstance(res, BatchTestResult)


def test_degenerate_tables_have_defined_answers() -> None:
    """All successes on both sides: nothing to test, p = 1 (scipy's defined answer)."""
    for test in (barnard_test, boschloo_test, fisher_test):
        res = test([1] * 5, [1] * 5)
        assert res.pvalue == 1.0 and res.decision() == Decision.BUDGET_EXHAUSTED
    assert fisher_test([1] * 5, [1] * 5).to_dict()["statistic"] is None  # NaN odds ratio


def test_unequal_sample_sizes() -> None:
    assert success_table([1, 0, 1], [0] * 5 + [1] * 4) == ((2, 4), (1, 5))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fisher_test([1, 0.5], [1, 0]),
         r"`scores_a` must be 0 or 1 \(success/failure\) for a 2x2 test; found 0.5 at trial 2"),
        (lambda: barnard_test([1, 0], [1, np.nan]), r"`scores_b` must be finite; found nan at trial 2"),
        (lambda: barnard_test([1, 3], [1, 0]), r"`scores_a` must lie in \[0, 1\]; found 3\.0 at trial 2"),
        (lambda: boschloo_test([], [1, 0]), r"`scores_a` must be a non-empty one-dimensional sequence"),
        (lambda: fisher_test([1], [0], alternative="larger"), r"`alternative` should be one of .*; found 'larger'"),
        (lambda: barnard_test([1], [0], n=0), r"`n` must be a positive integer; found 0"),
        (lambda: fisher_test([1], [0]).decision(alpha=1.2), r"`alpha` must lie in \(0, 1\); found 1.2"),
    ],
)
def test_validation(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StatsInputError, match=message):
        call()


def test_rerunning_a_batch_test_after_every_trial_inflates_type_one() -> None:
    """seed 003 §V, Figs. 3 and 6: a batch test "run in sequence" violates Type-I control.

    Fisher (two-sided, alpha = 0.05) re-run after each of N = 100 pairs at p0 = p1 = 0.5: the
    chance of *ever* seeing p <= 0.05 is well above 0.05 (200 sequences; the bound is 0.05 + 3 SE),
    while one look at N = 100 stays below 0.05.
    """

    @functools.cache
    def fisher(s_a: int, s_b: int, n: int) -> float:
        return float(stats.fisher_exact([[s_a, s_b], [n - s_a, n - s_b]]).pvalue)

    def pvalue(s_a: int, s_b: int, n: int) -> float:
        # the two-sided p-value is the same with the columns or the rows swapped: one of the four
        # equivalent tables is computed (5,912 tables instead of 11,174 here)
        return fisher(*min((s_a, s_b), (s_b, s_a), (n - s_a, n - s_b), (n - s_b, n - s_a)), n)

    rng = np.random.default_rng(3)
    reps, n = 200, 100
    s_a = np.cumsum(rng.random((reps, n)) < 0.5, axis=1)
    s_b = np.cumsum(rng.random((reps, n)) < 0.5, axis=1)
    ever = final = 0
    for r in range(reps):
        p = [pvalue(int(s_a[r, t]), int(s_b[r, t]), t + 1) for t in range(n)]
        ever += min(p) <= 0.05
        final += p[-1] <= 0.05
    se = math.sqrt(0.05 * 0.95 / reps)
    assert ever / reps > 0.05 + 3 * se, f"re-run FPR {ever / reps:.3f} not above {0.05 + 3 * se:.3f}"
    assert final / reps <= 0.05 + 2 * se


def test_validity_registry() -> None:
    """methods.VALIDITY names the guarantee of every method (brief; seed 000, seed 003)."""
    assert VALIDITY["step"] == "valid within pre-declared N_max"
    for name in ("nscore", "wsr", "savi"):
        assert VALIDITY[name] == "anytime-valid"
    assert VALIDITY["lai"] == "approximately valid within N_max (calibrated)"
    for name in ("barnard", "boschloo", "fisher"):
        assert VALIDITY[name] == "batch only"
    assert SEQUENTIAL_METHODS | BATCH_METHODS == set(VALIDITY)
    assert not SEQUENTIAL_METHODS & BATCH_METHODS
