"""Tests of the anytime-valid pairwise A/B tests (evalstop_ros.stats.ranking_pairs).

Type-I: the family-wise error over every pair and both metrics, Monte Carlo on the worst-case
null (equal policies, no ties: the largest variance of the preference increment), with the
bound ``alpha + 3 SE``.  Power and orientation: a planted better policy is found, and swapping
the labels A/B of a comparison does not change the test of its pair.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.ranking import comparisons
from evalstop_ros.stats.ranking_pairs import pairwise_tests
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
    errors = sum(bool(pairwise_tests(campaign(rng, 300), alpha=alpha).decided()) for _ in range(reps))
    rate = errors / reps
    se = np.sqrt(alpha * (1 - alpha) / reps)
    assert rate <= alpha + 3 * se, f"FWER {rate:.3f} (SE {se:.3f}) exceeds alpha {alpha}"


def test_planted_better_policy_is_found_and_others_stay_open() -> None:
    family = pairwise_tests(campaign(np.random.default_rng(12), 1200, edge=0.3), alpha=0.05)
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
