"""The hub's comparisons as one family under sequential Holm (seed 000 §VI-B, seed 003 footnote 5).

Every pair's two directional hypotheses, analysed by the one :class:`~evalstop_ros.stats.engine.HolmEngine`
after each counted result; docs/hub_server.md and docs/hub.md ("The pairs' test").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..session.values import ComparisonSnapshot
from ..stats.engine import HolmEngine, HolmOptions
from ..stats.families import comparison_pairs
from ..stats.holm import HOLM_SIDES
from ..stats.sequential import Decision

__all__ = ["ALTERNATIVE", "METRIC", "HolmPairs"]

#: Every pair is tested in both directions (either policy may be the better one).
ALTERNATIVE = "two-sided"
#: What a pair's test compares: the two arms' scores in [0, 1] of each result.
METRIC = "score"


class HolmPairs:
    """Sequential Holm over all pairs of ``policies``, fed one result at a time.

    :param policies: The hub's policies (two or more; sorted here).
    :param method: Anytime-valid method of the one-sided processes (``mixture``, ``nscore``, ``wsr``, ``savi``).
    :param alpha: Family-wise level over all ``P (P - 1) / 2`` pairs.

    >>> family = HolmPairs(["a", "b", "c"], method="mixture", alpha=0.05)
    >>> family.m, family.hypotheses, round(family.side_alpha, 6)
    (3, 6, 0.008333)
    """

    def __init__(self, policies: Sequence[str], *, method: str, alpha: float) -> None:
        self.policies = tuple(sorted(policies))
        self.method, self.alpha = method, alpha
        self.comparisons = comparison_pairs(self.policies)
        self.index = {(c.policy_a, c.policy_b): j for j, c in enumerate(self.comparisons)}
        self.m = len(self.comparisons)
        self.sides = len(HOLM_SIDES[ALTERNATIVE])
        self.hypotheses = self.m * self.sides
        self.engine = HolmEngine(self.m, HolmOptions(method, alpha, ALTERNATIVE, n_max=None))
        self.side_alpha = self.engine.side_alpha
        self._p = np.ones((self.hypotheses, 1))
        self.n = np.zeros(self.m, dtype=np.int64)
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
        if self.engine.decision[j, 0] != Decision.CONTINUE:
            return  # nothing is read after the stop
        rows = slice(j * self.sides, (j + 1) * self.sides)
        fresh = self.engine.feed(j, np.array([score_x]), np.array([score_y]))
        fell = bool((fresh < self._p[rows]).any())
        self._p[rows] = fresh
        if not fell:
            return  # Holm on the same p-values rejects nothing new (running minima only fall)
        before = self.engine.decision[:, 0].copy()
        self.engine.analyse()
        newly = (before == Decision.CONTINUE) & (self.engine.decision[:, 0] != Decision.CONTINUE)
        self.n_at_decision[newly] = self.n[newly]
        self.decided_at_result[newly] = self.results

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

        ``metric`` is the result's ``score``, ``alpha`` the first Holm threshold (:attr:`side_alpha`),
        ``n`` and the means count every result of the pair, ``stopping_trial`` is the pair's own
        count of results at its decision, ``decided_at_result`` the hub's (the analysis time);
        the anytime-valid processes define no e-value here (NaN).
        """
        out = []
        for j, c in enumerate(self.comparisons):
            n = int(self.n[j])
            mean_a, mean_b = (self.sums[j] / n) if n else (math.nan, math.nan)
            out.append(ComparisonSnapshot(
                policy_a=c.policy_a, policy_b=c.policy_b, metric=METRIC, method=self.method, alternative=ALTERNATIVE,
                alpha=self.side_alpha, n=n, decision=self.decision(j), pvalue=self.pvalue(j),
                evalue=math.nan, mean_a=float(mean_a), mean_b=float(mean_b),
                stopping_trial=int(self.n_at_decision[j]) or None, decided_at_result=int(self.decided_at_result[j]) or None))
        return out

    def statement(self) -> dict[str, Any]:
        """What the family-wise level covers (JSON-ready)."""
        return {"procedure": "sequential Holm", "pairs": self.m, "hypotheses": self.hypotheses,
                "alpha": self.alpha, "side_alpha": self.side_alpha, "method": self.method,
                "analysis": "after every counted result, in journal order"}
