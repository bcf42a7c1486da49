"""The hub's comparisons as one family under sequential Holm (seed 000 §VI-B, seed 003 footnote 5).

Two families (:data:`FAMILIES`): ``declared`` (the default) spends a warm-up of
:data:`DECLARE_AFTER` results per pair on ordering the policies only, then tests every pair's
directions on the later results under *weighted* Holm with weights declared from the warm-up;
``all-pairs`` tests every direction on every result at equal weights.  Both are analysed by the one
:class:`~evalstop_ros.stats.engine.HolmEngine` after each counted result; docs/hub.md ("The family").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..session.values import ComparisonSnapshot
from ..stats.adjacency import adjacency_weights
from ..stats.engine import HolmEngine, HolmOptions
from ..stats.families import comparison_pairs
from ..stats.holm import HOLM_SIDES
from ..stats.sequential import Decision
from .designs import DECLARE_AFTER, FAMILIES
from .errors import HubError

__all__ = ["ALTERNATIVE", "DECLARE_AFTER", "FAMILIES", "METRIC", "HolmPairs"]

#: Every pair is tested in both directions (either policy may be the better one).
ALTERNATIVE = "two-sided"
#: What a pair's test compares: the two arms' scores in [0, 1] of each result.
METRIC = "score"


class HolmPairs:
    """Sequential Holm over all pairs of ``policies``, fed one result at a time.

    :param policies: The hub's policies (two or more; sorted here).
    :param method: Anytime-valid method of the one-sided processes (``mixture``, ``nscore``, ``wsr``, ``savi``).
    :param alpha: Family-wise level over all ``P (P - 1) / 2`` pairs.
    :param family: ``declared`` (weights from a warm-up) or ``all-pairs`` (equal weights).
    :param warm_up: ``declared``: results of every pair before the declaration (:data:`DECLARE_AFTER`);
        the weights: :func:`~evalstop_ros.stats.adjacency.adjacency_weights` of its counts.

    >>> family = HolmPairs(["a", "b", "c"], method="mixture", alpha=0.05, family="all-pairs")
    >>> family.m, family.hypotheses, round(family.side_alpha, 6)
    (3, 6, 0.008333)
    >>> family = HolmPairs(["a", "b", "c"], method="mixture", alpha=0.05, warm_up=1)
    >>> for x, y, sx, sy in [("a", "b", 1, 0), ("a", "c", 1, 0), ("b", "c", 1, 0)]:
    ...     family.add(x, y, sx, sy)
    >>> family.declared_order, family.declared_at, family.n_tested.tolist()
    (('a', 'b', 'c'), 3, [0, 0, 0])
    """

    def __init__(self, policies: Sequence[str], *, method: str, alpha: float, family: str = FAMILIES[0],
                 warm_up: int = DECLARE_AFTER) -> None:
        if family not in FAMILIES:
            raise HubError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        if warm_up < 1:
            raise HubError(f"the warm-up is a number of results per pair >= 1; found {warm_up!r}")
        self.policies = tuple(sorted(policies))
        self.method, self.alpha, self.family = method, alpha, family
        self.warm_up = warm_up if family == "declared" else 0
        self.comparisons = comparison_pairs(self.policies)
        self.index = {(c.policy_a, c.policy_b): j for j, c in enumerate(self.comparisons)}
        self.m = len(self.comparisons)
        self.sides = len(HOLM_SIDES[ALTERNATIVE])
        self.hypotheses = self.m * self.sides
        self.engine = HolmEngine(self.m, HolmOptions(method, alpha, ALTERNATIVE, n_max=None))
        self.side_alpha = self.engine.side_alpha
        #: ``declared``: the order the warm-up declared (best first) and the hub's count of results
        #: then (``None`` during the warm-up); ``all-pairs``: no order, declared at 0.
        self.declared_order: tuple[str, ...] | None = None
        self.declared_at: int | None = None if family == "declared" else 0
        self._warm = np.zeros((len(self.policies), 2))  # per policy: total score, results in the warm-up
        self._p = np.ones((self.hypotheses, 1))
        self.n = np.zeros(self.m, dtype=np.int64)
        #: Per comparison: its results fed to the tests (after the declaration).
        self.n_tested = np.zeros(self.m, dtype=np.int64)
        self.sums = np.zeros((self.m, 2))
        #: Per comparison: its own count of results when Holm decided it (0 while open).
        self.n_at_decision = np.zeros(self.m, dtype=np.int64)
        #: Per comparison: the hub's count of results (the analysis time) when Holm decided it (0 while open).
        self.decided_at_result = np.zeros(self.m, dtype=np.int64)
        self.results = 0

    def add(self, x: str, y: str, score_x: float, score_y: float) -> None:
        """Count one result of the pair ``(x, y)`` (``x < y``), then analyse the family."""
        j = self.index[(x, y)]
        self.results += 1
        self.n[j] += 1
        self.sums[j] += (score_x, score_y)
        if self.declared_at is None:
            self._warm[self.policies.index(x)] += (score_x, 1)
            self._warm[self.policies.index(y)] += (score_y, 1)
            if int(self.n.min()) >= self.warm_up:
                self._declare()
            return  # a warm-up result orders the policies, and is no test's data
        if self.engine.decision[j, 0] != Decision.CONTINUE:
            return  # nothing is read after the stop
        self.n_tested[j] += 1
        rows = slice(j * self.sides, (j + 1) * self.sides)
        fresh = self.engine.feed(j, np.array([score_x]), np.array([score_y]))
        fell = bool((fresh < self._p[rows]).any())
        self._p[rows] = fresh
        if not fell:
            return  # Holm on the same p-values rejects nothing new (running minima only fall)
        before = self.engine.decision[:, 0].copy()
        self.engine.analyse(self._p)
        newly = (before == Decision.CONTINUE) & (self.engine.decision[:, 0] != Decision.CONTINUE)
        self.n_at_decision[newly] = self.n[newly]
        self.decided_at_result[newly] = self.results

    def _declare(self) -> None:
        """End the warm-up: the policies by their warm-up mean score (best first, ties by name)
        are the declared order, and the warm-up's counts declare the weight of every direction
        (:func:`~evalstop_ros.stats.adjacency.adjacency_weights`)."""
        means = self._warm[:, 0] / np.maximum(self._warm[:, 1], 1)
        rank = sorted(range(len(self.policies)), key=lambda k: (-means[k], self.policies[k]))
        self.declared_order = tuple(self.policies[k] for k in rank)
        weights = adjacency_weights(self.declared_order, self._warm[rank, 0], self._warm[rank, 1], self.comparisons)
        self.engine = HolmEngine(self.m, HolmOptions(self.method, self.alpha, ALTERNATIVE, n_max=None,
                                                     weights=tuple(float(w) for w in weights)))
        self.side_alpha = self.engine.side_alpha
        self.declared_at = self.results

    def first_level(self, j: int) -> float:
        """Comparison ``j``'s smallest Holm threshold in its leading direction (``alpha w``)."""
        return float(self.engine.levels[j * self.sides:(j + 1) * self.sides].max())

    def decision(self, j: int) -> Decision:
        return Decision(int(self.engine.decision[j, 0]))

    def decided(self) -> set[tuple[str, str]]:
        """The pairs with a claim (they leave the schedule)."""
        return {(c.policy_a, c.policy_b) for j, c in enumerate(self.comparisons) if self.decision(j) != Decision.CONTINUE}

    def pvalue(self, j: int) -> float:
        """``min(1, 2 min_s p_s)``: the comparison's two-sided anytime-valid p-value (at its stop once decided)."""
        return float(min(1.0, self.sides * self._p[j * self.sides:(j + 1) * self.sides, 0].min()))

    def rows(self) -> list[ComparisonSnapshot]:
        """One row per pair, in the family's order (pairs without results included): the session's
        row type, published as JSON by :meth:`ComparisonSnapshot.to_dict`.

        ``metric`` is the result's ``score``, ``alpha`` the pair's first Holm threshold (its leading
        direction's :meth:`first_level`), ``n`` and the means count every result of the pair (the
        warm-up's too), ``stopping_trial`` is the pair's own count of results at its decision,
        ``decided_at_result`` the hub's (the analysis time); the anytime-valid processes define no
        e-value here (NaN).
        """
        out = []
        for j, c in enumerate(self.comparisons):
            n = int(self.n[j])
            mean_a, mean_b = (self.sums[j] / n) if n else (math.nan, math.nan)
            out.append(ComparisonSnapshot(
                policy_a=c.policy_a, policy_b=c.policy_b, metric=METRIC, method=self.method, alternative=ALTERNATIVE,
                alpha=self.first_level(j), n=n, decision=self.decision(j), pvalue=self.pvalue(j),
                evalue=math.nan, mean_a=float(mean_a), mean_b=float(mean_b),
                stopping_trial=int(self.n_at_decision[j]) or None, decided_at_result=int(self.decided_at_result[j]) or None))
        return out

    def statement(self) -> dict[str, Any]:
        """What the family-wise level covers (JSON-ready)."""
        return {"procedure": "sequential Holm" if self.family == "all-pairs" else "sequential weighted Holm",
                "design": self.family, "pairs": self.m, "hypotheses": self.hypotheses,
                "alpha": self.alpha, "side_alpha": self.side_alpha, "method": self.method,
                "warm_up": self.warm_up, "declared_at": self.declared_at,
                "declared_order": list(self.declared_order) if self.declared_order is not None else None,
                "analysis": "after every counted result, in journal order"}
