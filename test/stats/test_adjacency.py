"""The declared family's weights from a warm-up (stats/adjacency.py; Holm 1979 Sec. 5, docs/hub.md "The family")."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from evalstop_ros.stats.adjacency import DRAWS, FLOOR, SPREAD, adjacency_weights
from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.families import comparison_pairs


def _by_pair(weights: np.ndarray, names: list[str]) -> dict[tuple[str, str], tuple[float, float]]:
    """(x, y) -> (weight of "y better", weight of "x better")."""
    return {(c.policy_a, c.policy_b): (float(weights[2 * j]), float(weights[2 * j + 1]))
            for j, c in enumerate(comparison_pairs(names))}


def test_two_policies_weigh_the_reverse_by_its_posterior_probability() -> None:
    """Two policies: the declared direction weighs 1, the reverse P(the other mean is higher) +
    floor under the Beta posteriors, here integrated numerically (the weights draw DRAWS samples:
    within 4 SE of that)."""
    s, n = np.array([7.0, 5.0]), np.array([10.0, 10.0])  # "a" ahead in the warm-up
    w = adjacency_weights(["a", "b"], s, n, comparison_pairs(["a", "b"]))
    ahead, behind = (stats.beta(1 + s[k] / SPREAD, 1 + (n[k] - s[k]) / SPREAD) for k in (0, 1))
    swap = integrate.quad(lambda x: behind.pdf(x) * ahead.cdf(x), 0.0, 1.0)[0]
    b_better, a_better = w
    assert a_better + b_better == pytest.approx(1.0, rel=1e-12)
    assert b_better / a_better == pytest.approx(swap + FLOOR, abs=4 * np.sqrt(swap * (1 - swap) / DRAWS))
    assert 0.1 < swap < 0.4


def test_a_clear_order_keeps_the_level_on_its_adjacent_pairs_and_an_ambiguous_one_hedges() -> None:
    names = ["a", "b", "c", "d"]
    order = ["c", "a", "d", "b"]  # declared: c > a > d > b
    clear = adjacency_weights(order, [180, 120, 60, 20], [200] * 4, comparison_pairs(names))
    by = _by_pair(clear, names)
    assert clear.sum() == pytest.approx(1.0)
    top = clear.max()
    assert by[("a", "c")][0] == by[("a", "d")][1] == by[("b", "d")][0] == top  # the order's directions
    assert sum(by[p][k] for p, k in ((("a", "c"), 0), (("a", "d"), 1), (("b", "d"), 0)))\
        > 1 - 30 * FLOOR * top  # everything else at the floor
    # a and d tied in the warm-up: the reverse of (a, d) and the pairs adjacent after a swap gain
    tied = _by_pair(adjacency_weights(order, [180, 100, 100, 20], [200] * 4, comparison_pairs(names)), names)
    assert tied[("a", "d")][1] > tied[("a", "d")][0] > 0.3 * tied[("a", "d")][1]  # d better: ~ P(swap)
    assert tied[("c", "d")][1] > 10 * by[("c", "d")][1]  # c right ahead of d after the swap
    assert tied[("a", "b")][1] > 10 * by[("a", "b")][1]  # a right ahead of b after the swap
    # a function of the warm-up alone: the same counts give the same weights
    assert (adjacency_weights(order, [180, 100, 100, 20], [200] * 4, comparison_pairs(names)) ==
            adjacency_weights(order, [180, 100, 100, 20], [200] * 4, comparison_pairs(names))).all()


@pytest.mark.parametrize(("order", "totals", "counts", "options", "match"), [
    (["a", "b"], [1, 2], [2, 1], {}, r"0 <= total <= count"),
    (["a", "b"], [1], [2], {}, r"one value per policy of `order` \(2\)"),
    (["a", "b"], [1, 1], [2, 2], {"floor": 0.0}, r"must be positive"),
    (["a", "c"], [1, 1], [2, 2], {}, r"missing \['b'\]"),
])
def test_adjacency_weights_refuse_bad_input(order, totals, counts, options, match) -> None:
    with pytest.raises(StatsInputError, match=match):
        adjacency_weights(order, totals, counts, comparison_pairs(["a", "b"]), **options)
