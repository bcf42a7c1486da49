"""Tests of the anytime-valid pairwise A/B tests (evalstop_ros.stats.ranking_pairs).

Type-I: the family-wise error over every pair and both metrics, Monte Carlo on the worst-case
null (equal policies, no ties: the largest variance of the preference increment), with the
bound ``alpha + 3 SE``.  Power and orientation: a planted better policy is found, and swapping
the labels A/B of a comparison does not change the test of its pair.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.ranking import comparisons
from evalstop_ros.stats.ranking_pairs import RunOrderWarning, pairwise_tests
from evalstop_ros.stats.sequential import Decision

POOL = ["p0", "p1", "p2", "p3"]


def campaign(rng: np.random.Generator, m: int, edge: float = 0.0):
    """Random pairs of POOL; p3 is preferred with probability 1/2 + edge against anyone."""
    a = rng.integers(0, 4, m)
    b = (a + rng.integers(1, 4, m)) % 4
    p_a = np.full(m, 0.5) + edge * (a == 3) - edge * (b == 3)
    prefer_a = rng.random(m) < p_a
    progress = rng.random((2, m))
    progress[0] = np.where(a == 3, np.minimum(1, progress[0] + edge), progress[0])
    progress[1] = np.where(b == 3, np.minimum(1, progress[1] + edge), progress[1])
    return comparisons(
        [POOL[k] for k in a], [POOL[k] for k in b], ["A" if x else "B" for x in prefer_a],
        progress_a=progress[0], progress_b=progress[1], policies=POOL,
    )


def test_familywise_error_on_the_worst_case_null() -> None:
    rng = np.random.default_rng(11)
    reps, alpha = 300, 0.2
    errors = sum(bool(pairwise_tests(campaign(rng, 300), alpha=alpha, run_order="randomised").decided())
                 for _ in range(reps))
    rate = errors / reps
    se = np.sqrt(alpha * (1 - alpha) / reps)
    assert rate <= alpha + 3 * se, f"FWER {rate:.3f} (SE {se:.3f}) exceeds alpha {alpha}"


def test_planted_better_policy_is_found_and_others_stay_open() -> None:
    family = pairwise_tests(campaign(np.random.default_rng(12), 1200, edge=0.3), alpha=0.05, run_order="randomised")
    assert family.alpha_each == pytest.approx(0.05 / 12)
    for test in family.tests:
        if "p3" in (test.policy_a, test.policy_b):
            assert test.winner == "p3", test
        else:
            assert test.winner is None and test.result.decision == Decision.CONTINUE
    assert family.decided() == {frozenset((f"p{k}", "p3")) for k in range(3)}
    rows = family.to_dict()["tests"]
    assert len(rows) == 12 and {row["metric"] for row in rows} == {"preference", "progress"}


def test_label_order_does_not_matter() -> None:
    data = comparisons(["x", "y", "x", "y"] * 10, ["y", "x", "y", "x"] * 10, ["A", "B", "A", "B"] * 10,
                       progress_a=[1.0, 0.0, 1.0, 0.0] * 10, progress_b=[0.0, 1.0, 0.0, 1.0] * 10)
    swapped = comparisons(["y", "x", "y", "x"] * 10, ["x", "y", "x", "y"] * 10, ["B", "A", "B", "A"] * 10,
                          progress_a=[0.0, 1.0, 0.0, 1.0] * 10, progress_b=[1.0, 0.0, 1.0, 0.0] * 10)
    for one, two in zip(pairwise_tests(data).tests, pairwise_tests(swapped).tests):
        assert one.winner == two.winner == "x"
        np.testing.assert_array_equal(one.result.pvalues, two.result.pvalues)


def test_progress_test_skips_comparisons_without_both_scores() -> None:
    data = comparisons(["x"] * 3, ["y"] * 3, ["A"] * 3, progress_a=[1.0, np.nan, 0.5], progress_b=[0.0, 0.2, np.nan])
    progress = [t for t in pairwise_tests(data).tests if t.metric == "progress"][0]
    assert progress.n == 1


def test_bad_arguments() -> None:
    data = comparisons(["x"], ["y"], ["A"])
    with pytest.raises(StatsInputError, match="`metrics` must be among"):
        pairwise_tests(data, metrics=("speed",))
    with pytest.raises(StatsInputError, match="`alpha` must lie in"):
        pairwise_tests(data, alpha=1.5)


# -- run order (issue 20): label A ran first; a first-run advantage needs a random order ----------

def ordered_campaign(rng: np.random.Generator, m: int, advantage: float, low_first: float, edge: float = 0.0):
    """Random pairs of POOL; the lower-indexed policy runs first (label A) with probability
    ``low_first``; the first run is preferred with probability 1/2 + advantage (and p3 by ``edge``)."""
    a = rng.integers(0, 4, m)
    b = (a + rng.integers(1, 4, m)) % 4
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    first_lo = rng.random(m) < low_first
    first, second = np.where(first_lo, lo, hi), np.where(first_lo, hi, lo)
    p_first = 0.5 + advantage + edge * (first == 3) - edge * (second == 3)
    prefer_first = rng.random(m) < p_first
    progress = np.clip(rng.random((2, m)) + np.array([[advantage], [0.0]]), 0.0, 1.0)
    return comparisons([POOL[k] for k in first], [POOL[k] for k in second], ["A" if x else "B" for x in prefer_first],
                       progress_a=progress[0], progress_b=progress[1], policies=POOL)


def test_fixed_run_order_is_flagged_in_one_line() -> None:
    data = ordered_campaign(np.random.default_rng(3), 120, 0.0, low_first=1.0)
    with pytest.warns(RunOrderWarning, match=r"run order \(label A first\) looks fixed for 6 pair\(s\) "
                                             r"\(p0 first in \d+ of \d+ vs p1; .*; \+3 more\).*run_order='stratified'") as caught:
        pairwise_tests(data)
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pairwise_tests(data, run_order="randomised")  # the caller vouches for the coin: silent
        pairwise_tests(ordered_campaign(np.random.default_rng(3), 120, 0.0, low_first=0.5))  # balanced: silent


@pytest.mark.slow
def test_stratified_run_order_holds_under_a_first_run_advantage() -> None:
    # First run preferred with probability 0.65 (and +0.15 progress), the lower-indexed policy
    # first 3 times in 4, all policies equal: trusting the order lifts the family-wise error far
    # above alpha = 0.2 (0.4 measured); stratifying keeps it <= alpha + 2 SE (150 campaigns).
    rng = np.random.default_rng(20)
    reps, alpha = 150, 0.2
    bound = alpha + 2 * np.sqrt(alpha * (1 - alpha) / reps)
    naive = stratified = 0
    for _ in range(reps):
        data = ordered_campaign(rng, 600, 0.15, low_first=0.75)
        naive += bool(pairwise_tests(data, alpha=alpha, run_order="randomised").decided())
        stratified += bool(pairwise_tests(data, alpha=alpha, run_order="stratified").decided())
    assert stratified / reps <= bound, f"stratified FWER {stratified / reps:.3f} > {bound:.3f}"
    assert naive / reps > bound, f"the order effect should show when trusted: {naive / reps:.3f}"


def test_stratified_run_order_still_finds_a_better_policy() -> None:
    data = ordered_campaign(np.random.default_rng(4), 1200, 0.1, low_first=0.5, edge=0.3)
    family = pairwise_tests(data, alpha=0.05, run_order="stratified")
    assert family.run_order == "stratified" and family.to_dict()["run_order"] == "stratified"
    winners = {t.winner for t in family.tests if t.metric == "preference" and "p3" in (t.policy_a, t.policy_b)}
    assert winners == {"p3"}
    with pytest.raises(StatsInputError, match=r"`run_order` must be one of \('check', 'stratified', 'randomised'\)"):
        pairwise_tests(data, run_order="fixed")
