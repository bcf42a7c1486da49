"""Anytime-valid stopping for A/B campaigns: one N-SCORE test per pair of policies and metric (seeds 000, 001).

Bonferroni over the pairs; the run-order assumption (``run_order``) is in docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
from scipy.stats import binomtest

from .errors import StatsInputError
from .levels import split_alpha
from .ranking import Comparisons
from .registry import run_test
from .sequential import Decision, SequentialResult
from .validation import check_alpha

__all__ = ["PAIR_METRICS", "RUN_ORDERS", "PairFamily", "PairTest", "RunOrderWarning", "pairwise_tests"]

#: Metric -> N-SCORE levels K (preference: {0, 1/2, 1}; progress: seed 000's N-SCORE_inf).
PAIR_METRICS = {"preference": 3, "progress": 21}
#: What :func:`pairwise_tests` assumes of the order within a pair (module docstring).
RUN_ORDERS = ("check", "stratified", "randomised")
#: Level of the balance check of ``run_order="check"``, and the fewest comparisons of a pair whose
#: order, all one way, counts as fixed.
_ORDER_CHECK_LEVEL = 0.01
_ORDER_CHECK_MIN = 5


class RunOrderWarning(UserWarning):
    """The comparisons' run order (label A first) looks fixed: the pairwise tests assume it random."""


def _order_check(data: Comparisons, pairs: list[tuple[int, int]]) -> str | None:
    """One line naming the pairs whose A/B order is fixed or unbalanced, or ``None``."""
    flagged = []
    for p, q in pairs:
        first_p = int(np.count_nonzero((data.i == p) & (data.j == q)))
        first_q = int(np.count_nonzero((data.i == q) & (data.j == p)))
        n = first_p + first_q
        fixed = n >= _ORDER_CHECK_MIN and min(first_p, first_q) == 0
        if fixed or (n and binomtest(first_p, n).pvalue < _ORDER_CHECK_LEVEL):
            flagged.append(f"{data.policies[p]} first in {first_p} of {n} vs {data.policies[q]}")
    if not flagged:
        return None
    shown = "; ".join(flagged[:3]) + (f"; +{len(flagged) - 3} more" if len(flagged) > 3 else "")
    return (f"pairwise_tests: run order (label A first) looks fixed for {len(flagged)} pair(s) ({shown}); "
            "the tests assume it randomised and a first-run advantage biases them: pass run_order='stratified'")


def _stratify(first_p: np.ndarray, *values: np.ndarray) -> list[np.ndarray]:
    """Mean of the k-th p-first and k-th q-first value of each series, ordered by the later one."""
    ones, twos = np.flatnonzero(first_p), np.flatnonzero(~first_p)
    m = min(ones.size, twos.size)
    ones, twos = ones[:m], twos[:m]
    order = np.argsort(np.maximum(ones, twos), kind="stable")
    return [((v[ones] + v[twos]) / 2.0)[order] for v in values]


@dataclasses.dataclass(frozen=True)
class PairTest:
    """One pair x metric test; ``policy_a`` plays the baseline, ``policy_b`` the candidate."""

    policy_a: str
    policy_b: str
    metric: str
    n: int
    result: SequentialResult

    @property
    def winner(self) -> str | None:
        """The policy the test declared better, or ``None`` while undecided."""
        if self.result.decision == Decision.B_BETTER:
            return self.policy_b
        if self.result.decision == Decision.A_BETTER:
            return self.policy_a
        return None


@dataclasses.dataclass(frozen=True)
class PairFamily:
    """Every pair x metric test of a campaign at family-wise level ``alpha``."""

    alpha: float
    alpha_each: float
    tests: tuple[PairTest, ...]
    run_order: str = "check"

    def decided(self) -> set[frozenset[str]]:
        """Pairs with a decision on at least one metric (a campaign may stop assigning them)."""
        return {frozenset((t.policy_a, t.policy_b)) for t in self.tests if t.winner is not None}

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary (one row per test, no trajectories)."""
        return {
            "alpha": self.alpha,
            "alpha_each": self.alpha_each,
            "run_order": self.run_order,
            "tests": [
                {"policy_a": t.policy_a, "policy_b": t.policy_b, "metric": t.metric, "n": t.n,
                 "decision": t.result.decision.value, "stopping_trial": t.result.stopping_trial,
                 "pvalue": None if np.isnan(t.result.pvalue) else t.result.pvalue, "winner": t.winner}
                for t in self.tests
            ],
        }


def pairwise_tests(
    data: Comparisons, *, alpha: float = 0.05, metrics: tuple[str, ...] = tuple(PAIR_METRICS),
    run_order: str = "check",
) -> PairFamily:
    """Run the anytime-valid test of every pair x metric over ``data`` (module docstring).

    Pairs are taken in pool order (``p`` before ``q``); a pair never compared gets a test over
    no data (``CONTINUE``).  Returns the family with ``alpha_each = alpha / m``.  ``run_order``
    (one of :data:`RUN_ORDERS`; module docstring, "Run order"): ``"check"`` warns
    (:class:`RunOrderWarning`) when the order within a pair looks fixed, ``"stratified"`` cancels
    an order effect by pairing opposite orders (its ``n`` counts such couples), ``"randomised"``
    trusts the coin.

    Examples
    --------
    >>> from evalstop_ros.stats.ranking import comparisons
    >>> data = comparisons(["a", "b"] * 20, ["b", "a"] * 20, ["B", "A"] * 20)  # b preferred, both orders
    >>> family = pairwise_tests(data, alpha=0.05, metrics=("preference",))
    >>> family.tests[0].winner, family.tests[0].result.stopping_trial
    ('b', 7)
    """
    alpha = check_alpha(alpha)
    if run_order not in RUN_ORDERS:
        raise StatsInputError(f"`run_order` must be one of {RUN_ORDERS}; found {run_order!r}")
    for metric in metrics:
        if metric not in PAIR_METRICS:
            raise StatsInputError(f"`metrics` must be among {tuple(PAIR_METRICS)}; found {metric!r}")
    pairs = list(itertools.combinations(range(data.n_policies), 2))
    if not pairs or not metrics:
        raise StatsInputError("pairwise tests need at least two policies and one metric")
    alpha_each = split_alpha(alpha, len(pairs) * len(metrics))
    if run_order == "check":
        message = _order_check(data, pairs)
        if message is not None:
            warnings.warn(message, RunOrderWarning, stacklevel=2)
    tests = []
    for p, q in pairs:
        forward = (data.i == p) & (data.j == q)
        rows = np.flatnonzero(forward | ((data.i == q) & (data.j == p)))
        flip = ~forward[rows]  # True where q played label A
        # progress and preference oriented to (p, q), in collection order
        prog_p = np.where(flip, data.progress_b[rows], data.progress_a[rows])
        prog_q = np.where(flip, data.progress_a[rows], data.progress_b[rows])
        x_q = np.where(flip, data.outcome[rows], 2 - data.outcome[rows]) / 2.0
        for metric in metrics:
            bins = PAIR_METRICS[metric]
            if metric == "preference":
                pref = x_q
                if run_order == "stratified":  # means of two levels of {0, 1/2, 1}: 5 levels
                    (pref,), bins = _stratify(~flip, x_q), 5
                a, b = 1.0 - pref, pref
            else:
                both = ~(np.isnan(prog_p) | np.isnan(prog_q))
                a, b = prog_p[both], prog_q[both]
                if run_order == "stratified":
                    a, b = _stratify(~flip[both], a, b)
            result = run_test("nscore", a, b, alpha=alpha_each, bins=bins)
            tests.append(PairTest(data.policies[p], data.policies[q], metric, int(a.size), result))
    return PairFamily(alpha, alpha_each, tuple(tests), run_order)
