"""Tests of evalstop_ros.stats.levels: the alpha split and its callers."""

from __future__ import annotations

import pytest

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.holm import side_alpha
from evalstop_ros.stats.levels import bonferroni, split_alpha
from evalstop_ros.stats.multitask import task_alpha
from evalstop_ros.stats.nscore import NScoreProcess


def test_bonferroni_matches_the_paper_threshold():
    # seed 000 §VI-B: 0.05 / 6 = 0.0083 for four policies
    assert bonferroni(0.05, 6) == pytest.approx(0.05 / 6, rel=1e-15)


def test_sidak_is_exact_and_larger_than_bonferroni():
    level = split_alpha(0.05, 4, "sidak")
    assert (1 - level) ** 4 == pytest.approx(0.95, rel=1e-14)
    assert level > split_alpha(0.05, 4, "bonferroni") == bonferroni(0.05, 4)


@pytest.mark.parametrize(
    ("alpha", "m", "method", "match"),
    [
        (1.5, 3, "bonferroni", r"`alpha` must lie in \(0, 1\); found 1.5"),
        (0.05, 0, "bonferroni", "`m` must be a positive integer; found 0"),
        (0.05, 2.0, "sidak", "`m` must be a positive integer; found 2.0"),
        (0.05, 3, "holm", r"`method` should be one of \('bonferroni', 'sidak'\); found 'holm'"),
    ],
)
def test_split_alpha_validation(alpha, m, method, match):
    with pytest.raises(StatsInputError, match=match):
        split_alpha(alpha, m, method)


def test_every_split_in_the_core_is_split_alpha():
    # A Holm family's directions, a two-sided test's children and a claim's tasks share one rule.
    assert side_alpha(0.05, 3, "two-sided") == split_alpha(0.05, 6)
    assert NScoreProcess(alpha=0.05, alternative="two-sided").alpha_side == split_alpha(0.05, 2)
    assert task_alpha(0.05, 4, claim="per-task", correction="bonferroni") == split_alpha(0.05, 4)
