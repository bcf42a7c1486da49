"""Weights of a ranking's directional hypotheses from a warm-up: how likely each is one the ranking needs.

A ranking of K policies is settled by its K - 1 adjacent pairs, each in its true direction.  Given
a warm-up's results, the weight of "y better than x" is the posterior probability that y stands
right ahead of x in the true order (independent Beta posteriors of the policies' mean scores), plus
a floor; the directions of the order the warm-up declares weigh 1.  Any function of the warm-up
alone may weight Holm's step-down on the later results (Holm 1979 Sec. 5; Bretz et al. 2009):
weights proportional to the probability that a hypothesis is needed minimise the expected
``sum -log w`` over the needed ones, the evidence a claim at level ``alpha w`` costs.  Design and
validity: docs/hub.md ("The family").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .families import Comparison

__all__ = ["DRAWS", "FLOOR", "SPREAD", "adjacency_weights"]

#: Posterior draws of the policies' means (drawn with a fixed seed: the weights are a function of the warm-up).
DRAWS = 4000
#: Weight of every directional hypothesis besides its probability of being needed.
FLOOR = 0.002
#: Each warm-up result counts ``1 / SPREAD`` times in the posterior (< 1: wider, > 1: narrower).
#: Chosen on the hub's planted ranking (docs/hub.md, "The family").
SPREAD = 0.5


def adjacency_weights(order: Sequence[str], totals: ArrayLike, counts: ArrayLike,
                      comparisons: Sequence[Comparison], *, floor: float = FLOOR, spread: float = SPREAD,
                      draws: int = DRAWS) -> NDArray[np.float64]:
    """Weights of the ``2 m`` directional hypotheses of ``comparisons`` (comparison-major: "B
    better", then "A better", as :data:`~.holm.HOLM_SIDES` ``["two-sided"]``), normalised to sum 1.

    ``order``: the policies as the warm-up ranks them (best first); ``totals[k]`` and ``counts[k]``:
    the total score (in ``[0, counts[k]]``) and the number of warm-up results of ``order[k]``.
    Policy ``k``'s mean score is drawn from Beta(1 + s / spread, 1 + (n - s) / spread); "y better
    than x" weighs the fraction of draws in which y ranks right ahead of x, plus ``floor`` -- and 1
    (the most a probability can be) where y is right ahead of x in ``order``.

    >>> from evalstop_ros.stats.families import comparison_pairs
    >>> w = adjacency_weights(["a", "b", "c"], [8, 5, 2], [10, 10, 10], comparison_pairs(["a", "b", "c"]))
    >>> [round(float(v), 3) for v in w]  # (a, b): a ahead; (a, c): two apart; (b, c): b ahead
    [0.014, 0.474, 0.001, 0.025, 0.012, 0.474]
    """
    s, n = np.asarray(totals, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    k = len(order)
    if s.shape != (k,) or n.shape != (k,) or not ((s >= 0) & (s <= n)).all():
        raise StatsInputError(f"`totals` and `counts` must hold one value per policy of `order` ({k}) with "
                              f"0 <= total <= count; found {s.tolist()!r} and {n.tolist()!r}")
    if not (floor > 0 and spread > 0 and draws > 0):
        raise StatsInputError(f"`floor`, `spread` and `draws` must be positive; found {floor!r}, {spread!r}, {draws!r}")
    rank = {name: i for i, name in enumerate(order)}
    missing = sorted(({c.policy_a for c in comparisons} | {c.policy_b for c in comparisons}) - set(rank))
    if missing:
        raise StatsInputError(f"`order` must rank every policy of `comparisons`; missing {missing!r}")
    means = np.random.default_rng(0).beta(1 + s / spread, 1 + (n - s) / spread, size=(draws, k))
    ranked = np.argsort(-means, axis=1, kind="stable")
    ahead = np.zeros((k, k))  # ahead[i, j]: the fraction of draws with policy i right ahead of policy j
    np.add.at(ahead, (ranked[:, :-1].ravel(), ranked[:, 1:].ravel()), 1.0 / draws)
    ahead += floor
    for i in range(k - 1):
        ahead[i, i + 1] = 1.0  # the declared order's own directions
    weights = [ahead[rank[c.policy_b], rank[c.policy_a]] if side == 0 else ahead[rank[c.policy_a], rank[c.policy_b]]
               for c in comparisons for side in (0, 1)]  # ("B better", "A better")
    out = np.asarray(weights)
    normalised: NDArray[np.float64] = out / out.sum()
    return normalised
