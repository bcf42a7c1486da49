"""Tests of evalstop_ros.stats.families: comparison plans, Holm, letter displays."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.families import Comparison, comparison_pairs
from evalstop_ros.stats.holm import holm
from evalstop_ros.stats.letters import compact_letter_display
from evalstop_ros.stats.levels import bonferroni


def pairs(*names: str) -> set[frozenset[str]]:
    """``pairs("T1-T7", "T2-T4")`` -> the set of unordered pairs."""
    return {frozenset(name.split("-")) for name in names}


# -- comparison_pairs ------------------------------------------------------------------------------

def test_all_pairs_in_list_order_with_earlier_policy_as_baseline():
    # seed 000 Fig. 2 procedure: every pair (a, b) in list order, a as pi_0
    got = comparison_pairs(["pi0", "diff", "vla", "pg"])
    assert got == (
        Comparison("pi0", "diff"), Comparison("pi0", "vla"), Comparison("pi0", "pg"),
        Comparison("diff", "vla"), Comparison("diff", "pg"), Comparison("vla", "pg"),
    )


def test_vs_baseline_puts_the_baseline_first():
    got = comparison_pairs(["x", "ref", "y"], design="vs-baseline", baseline="ref")
    assert got == (Comparison("ref", "x"), Comparison("ref", "y"))


def test_comparison_pair_is_unordered():
    assert Comparison("a", "b").pair == Comparison("b", "a").pair == frozenset({"a", "b"})


def test_comparison_is_frozen():
    with pytest.raises(AttributeError):
        Comparison("a", "b").policy_a = "c"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("policies", "kwargs", "match"),
    [
        (["a"], {}, r"at least two policies; found \('a',\)"),
        (["a", "a"], {}, "must be distinct; found 'a' twice"),
        (["a", ""], {}, "non-empty strings; found ''"),
        (["a", 3], {}, "non-empty strings; found 3"),
        (["a", "b"], {"design": "star"}, r"`design` should be one of \('all-pairs', 'vs-baseline'\); found 'star'"),
        (["a", "b"], {"design": "vs-baseline"}, r"`baseline` must be one of `policies` .*; found None"),
        (["a", "b"], {"design": "vs-baseline", "baseline": "c"}, "found 'c'"),
        # a baseline with all-pairs is almost certainly a forgotten design=
        (["a", "b"], {"baseline": "a"}, "applies only to design 'vs-baseline'; found 'a'"),
    ],
)
def test_comparison_pairs_validation(policies, kwargs, match):
    with pytest.raises(StatsInputError, match=match):
        comparison_pairs(policies, **kwargs)


# -- holm --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("pvalues", "expected"),
    [
        # sorted 0.005 <= .05/4, 0.01 <= .05/3, 0.03 > .05/2: stop; ranks 1-2 rejected
        ([0.01, 0.04, 0.03, 0.005], [True, False, False, True]),
        # 0.011 <= .05/3, 0.02 <= .05/2, 0.04 <= .05/1: all rejected
        ([0.02, 0.011, 0.04], [True, True, True]),
        # step-down: 0.03 > .05/3 stops everything, although 0.045 <= .05/1
        ([0.03, 0.04, 0.045], [False, False, False]),
        # ties: both 0.025 <= .05/2 and then <= .05/1
        ([0.025, 0.025], [True, True]),
        # a p-value exactly on its threshold is rejected (<=)
        ([0.0125, 0.9, 0.9, 0.9], [True, False, False, False]),
        ([1.0], [False]),
        ([0.05], [True]),
    ],
)
def test_holm_hand_computed(pvalues, expected):
    assert holm(pvalues, 0.05).tolist() == expected


def test_holm_rejects_a_superset_of_bonferroni():
    rng = np.random.default_rng(7)
    for _ in range(200):
        p = rng.uniform(0, 0.1, size=6)
        assert (holm(p, 0.05) >= (p <= bonferroni(0.05, 6))).all()


@pytest.mark.parametrize(
    ("pvalues", "match"),
    [
        ([0.1, float("nan")], r"`pvalues` must lie in \[0, 1\]; found nan at index 1"),
        ([1.2], r"found 1.2 at index 0"),
        ([-0.1, 0.2], r"found -0.1 at index 0"),
        ([], r"non-empty one-dimensional sequence; found shape \(0,\)"),
        ([[0.1, 0.2]], r"found shape \(1, 2\)"),
    ],
)
def test_holm_validation(pvalues, match):
    with pytest.raises(StatsInputError, match=match):
        holm(pvalues, 0.05)


# -- weighted Holm (Holm 1979 Sec. 5) and the weights of a declared order ----------------------------


@pytest.mark.parametrize(
    ("pvalues", "weights", "expected"),
    [
        # by p / w: 0.004 / 0.2 first, <= .05 * .2; then 0.02 <= .05 * .6 / .8; 0.3 > .05 * .2 / .2
        ([0.02, 0.004, 0.3], [0.6, 0.2, 0.2], [True, True, False]),
        # on its threshold: 0.04 <= .05 * .8, then 0.011 <= .05 * .2 / .2
        ([0.04, 0.011], [0.8, 0.2], [True, True]),
        # first by p / w, 0.05 / .9 > .05 * .9 / 1 stops everything (Holm would reject both)
        ([0.05, 0.009], [0.9, 0.1], [False, False]),
        # unnormalised weights mean the same
        ([0.02, 0.004, 0.3], [6, 2, 2], [True, True, False]),
    ],
)
def test_weighted_holm_hand_computed(pvalues, weights, expected):
    assert holm(pvalues, 0.05, weights=weights).tolist() == expected


def test_weighted_holm_with_equal_weights_is_holm():
    rng = np.random.default_rng(3)
    for _ in range(300):
        p = rng.uniform(0, 0.08, size=7)
        assert (holm(p, 0.05, weights=np.full(7, 1 / 7)) == holm(p, 0.05)).all()


def test_weighted_holm_is_the_closed_test_of_weighted_bonferroni():
    """Brute force over every intersection (Bretz et al. 2009, Sec. 2): H_i is rejected iff every
    intersection containing it is, by the weighted Bonferroni test with weights w_j / W_I."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        h = int(rng.integers(2, 6))
        p, w = rng.uniform(0, 0.1, size=h), rng.uniform(0.05, 1.0, size=h)
        w = w / w.sum()
        closed = []
        for i in range(h):
            subsets = [s for r in range(1, h + 1) for s in itertools.combinations(range(h), r) if i in s]
            closed.append(all(any(p[j] <= 0.05 * w[j] / w[list(s)].sum() for j in s) for s in subsets))
        assert holm(p, 0.05, weights=w).tolist() == closed, (p, w)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([0.5, 0.5, 0.0], r"`weights` must be positive and finite; found 0.0 at index 2"),
        ([0.5, float("inf"), 1.0], r"found inf at index 1"),
        ([0.5, 0.5], r"one weight per hypothesis \(3\); found shape \(2,\)"),
    ],
)
def test_weighted_holm_validation(weights, match):
    with pytest.raises(StatsInputError, match=match):
        holm([0.01, 0.02, 0.03], 0.05, weights=weights)


# -- compact_letter_display --------------------------------------------------------------------------

PIEPHO_EXAMPLE_3 = [f"T{i}" for i in range(1, 9)]
PIEPHO_DIFFERS = pairs("T1-T7", "T1-T8", "T2-T4", "T2-T5", "T3-T5")
DESCENDING = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]  # T1 best ... T8 worst


def test_piepho_example_3_insert_and_absorb():
    # Piepho (2004) Example 3: 8 treatments, significant T1-T7, T1-T8, T2-T4, T2-T5, T3-T5.
    # Insert-and-absorb yields every maximal set of mutually non-different treatments. T6 differs
    # from no one, so it is in all of them; {T1 | T7,T8} and the path T4-T2-T5-T3 split the rest:
    # {T1} or {T7,T8}, times {T2,T3}, {T3,T4} or {T4,T5}. Lettered by best member (means descend):
    #   a {T1,T2,T3,T6}  b {T1,T3,T4,T6}  c {T1,T4,T5,T6}
    #   d {T2,T3,T6,T7,T8}  e {T3,T4,T6,T7,T8}  f {T4,T5,T6,T7,T8}
    got = compact_letter_display(PIEPHO_EXAMPLE_3, DESCENDING, PIEPHO_DIFFERS, sweep=False)
    assert got == {
        "T1": "abc", "T2": "ad", "T3": "abde", "T4": "bcef",
        "T5": "cf", "T6": "abcdef", "T7": "def", "T8": "def",
    }


def test_piepho_example_3_sweep():
    # Sweeping the display above, column by column, member by member (rank order):
    #   a: T1 keeps it (T2 shares nothing else with T1); T2 keeps it (T1); T3 shares b with T1,
    #      d with T2, b with T6 -> drop; T6 shares b with T1, d with T2 -> drop.   a = {T1,T2}
    #   b: T1 keeps (T3 only here with T1); T3 keeps; T4 shares c with T1, e with T3 -> drop;
    #      T6 shares c with T1, d with T3 -> drop.                                 b = {T1,T3}
    #   c: T1 keeps (T4, T5 only here with T1); T4, T5 keep (T1); T6 keeps (T1 only here).
    #   d: T2 keeps (T3 now only here); T3 keeps; T6 keeps (T2); T7, T8 keep (T2).
    #   e: T3 keeps (T4 only here); T4 keeps; T6 shares c with T4, d with T3 -> drop;
    #      T7 shares d with T3, f with T4 -> drop; T8 likewise -> drop.            e = {T3,T4}
    #   f: T4 keeps (T7 only here); T5 keeps (T7); T6 shares c with T4, T5 and d with T7, T8
    #      -> drop; T7, T8 keep (T4).                                              f = {T4,T5,T7,T8}
    # Still six letters, but 19 letter marks instead of 27; the columns keep their letter order.
    got = compact_letter_display(PIEPHO_EXAMPLE_3, DESCENDING, PIEPHO_DIFFERS)
    assert got == {
        "T1": "abc", "T2": "ad", "T3": "bde", "T4": "cef",
        "T5": "cf", "T6": "cd", "T7": "df", "T8": "df",
    }


def test_gramm_et_al_figure_2():
    # Gramm et al. (2007, CSDA 52:725) Fig. 2: n = 5, significant {1,5},{2,3},{2,5},{3,5}.
    # 5 differs from 1, 2, 3 -> {4,5}; without 5, 2-3 splits {1,2,3,4} -> {1,2,4}, {1,3,4}.
    got = compact_letter_display(list("12345"), [5, 4, 3, 2, 1], pairs("1-5", "2-3", "2-5", "3-5"))
    assert got == {"1": "ab", "2": "a", "3": "b", "4": "abc", "5": "c"}


def test_all_different_gets_one_letter_each_by_mean():
    names = ["w", "x", "y", "z"]
    differs = {frozenset(p) for p in itertools.combinations(names, 2)}
    got = compact_letter_display(names, [0.2, 0.9, 0.5, 0.7], differs)
    assert got == {"x": "a", "z": "b", "y": "c", "w": "d"}
    assert list(got) == ["x", "z", "y", "w"]  # decreasing mean


def test_all_same_share_one_letter():
    got = compact_letter_display(["p", "q", "r"], [0.1, 0.3, 0.2], set())
    assert got == {"q": "a", "r": "a", "p": "a"}


def test_letters_follow_means_not_input_order():
    # chain: best ~ mid ~ worst, best differs from worst
    got = compact_letter_display(["worst", "mid", "best"], [0.1, 0.5, 0.9], pairs("worst-best"))
    assert got == {"best": "a", "mid": "ab", "worst": "b"}


def test_tied_means_keep_input_order():
    got = compact_letter_display(["b", "a"], [0.5, 0.5], pairs("a-b"))
    assert got == {"b": "a", "a": "b"}


@pytest.mark.parametrize("sweep", [False, True])
def test_sharing_a_letter_means_not_different(sweep):
    # The defining property on random families: share a letter <=> not found different.
    rng = np.random.default_rng(2004)
    for _ in range(150):
        k = int(rng.integers(2, 8))
        names = [f"p{i}" for i in range(k)]
        differs = {frozenset(p) for p in itertools.combinations(names, 2) if rng.random() < 0.5}
        got = compact_letter_display(names, rng.random(k), differs, sweep=sweep)
        for x, y in itertools.combinations(names, 2):
            assert bool(set(got[x]) & set(got[y])) == (frozenset((x, y)) not in differs), (got, differs)
        assert all(got.values())  # every policy has at least one letter


def test_sweep_never_uses_more_letters():
    rng = np.random.default_rng(11)
    for _ in range(100):
        names = [f"p{i}" for i in range(6)]
        differs = {frozenset(p) for p in itertools.combinations(names, 2) if rng.random() < 0.4}
        means = rng.random(6)
        full = compact_letter_display(names, means, differs, sweep=False)
        swept = compact_letter_display(names, means, differs)
        assert sum(map(len, swept.values())) <= sum(map(len, full.values()))


@pytest.mark.parametrize(
    ("policies", "means", "differs", "match"),
    [
        (["a", "b"], [0.1], set(), r"`means` must hold one value per policy \(2\); found shape \(1,\)"),
        (["a", "b"], [0.1, math.nan], set(), "`means` must be finite; found nan for policy 'b'"),
        (["a", "b"], [0.1, 0.2], pairs("a-c"), "two distinct known policies; found frozenset"),
        (["a", "b"], [0.1, 0.2], [("a", "a")], r"two distinct known policies; found \('a', 'a'\)"),
        (["a", "b"], [0.1, 0.2], ["ab"], "two distinct known policies; found 'ab'"),
        (["a", "a"], [0.1, 0.2], set(), "must be distinct; found 'a' twice"),
    ],
)
def test_cld_validation(policies, means, differs, match):
    with pytest.raises(StatsInputError, match=match):
        compact_letter_display(policies, means, differs)
