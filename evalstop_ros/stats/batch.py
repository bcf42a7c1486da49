"""Fixed-N exact tests of two success rates (Barnard, Boschloo, Fisher): valid once, never in sequence.

Re-running them after every trial violates Type-I control (seed 003 §V, Figs. 3 and 6), so every
result carries ``sequential_valid=False``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from .errors import StatsInputError
from .sequential import Decision
from .validation import check_alpha, check_alternative, check_binary, check_positive_int, check_scores

__all__ = ["BatchTestResult", "success_table", "barnard_test", "boschloo_test", "fisher_test"]

#: Our alternatives in scipy's terms for the table ``[[S_A, S_B], [F_A, F_B]]``: "greater"
#: (B's rate higher) is scipy's "less" (first column's rate lower), and vice versa.
_SCIPY_ALTERNATIVE = {"greater": "less", "less": "greater", "two-sided": "two-sided"}
#: ``((S_A, S_B), (F_A, F_B))``.
Table = tuple[tuple[int, int], tuple[int, int]]


@dataclasses.dataclass(frozen=True)
class BatchTestResult:
    """Result of a fixed-N test of two success rates.

    Attributes
    ----------
    method : str
        ``"barnard"``, ``"boschloo"`` or ``"fisher"``.
    alternative : str
        ``"greater"`` (B's success rate is higher), ``"less"`` or ``"two-sided"``.
    statistic : float
        Barnard: the Wald statistic; Boschloo: Fisher's one-sided p-value used as statistic;
        Fisher: the sample odds ratio ``S_A F_B / (F_A S_B)`` (all as returned by scipy).
    pvalue : float
        The batch p-value, valid for this single look only.
    table : tuple
        ``((S_A, S_B), (F_A, F_B))``.
    sequential_valid : bool
        Always ``False``: not valid when re-run after every trial (seed 003 §V).
    """

    method: str
    alternative: str
    statistic: float
    pvalue: float
    table: Table
    sequential_valid: bool = False

    def decision(self, alpha: float = 0.05) -> Decision:
        """Decision of this single look at level ``alpha``.

        ``B_BETTER``/``A_BETTER`` when ``pvalue <= alpha`` (two-sided: in the direction of the
        observed rates), else ``BUDGET_EXHAUSTED`` (the fixed N passed without a decision).
        """
        alpha = check_alpha(alpha)
        if not self.pvalue <= alpha:
            return Decision.BUDGET_EXHAUSTED
        if self.alternative == "greater":
            return Decision.B_BETTER
        if self.alternative == "less":
            return Decision.A_BETTER
        (s_a, s_b), (f_a, f_b) = self.table
        rate_a, rate_b = s_a / (s_a + f_a), s_b / (s_b + f_b)
        if rate_b > rate_a:
            return Decision.B_BETTER
        if rate_a > rate_b:
            return Decision.A_BETTER
        return Decision.BUDGET_EXHAUSTED

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation (NaN becomes ``None``)."""
        return {
            "method": self.method,
            "alternative": self.alternative,
            "statistic": None if np.isnan(self.statistic) else self.statistic,
            "pvalue": None if np.isnan(self.pvalue) else self.pvalue,
            "table": [list(row) for row in self.table],
            "sequential_valid": self.sequential_valid,
        }


def _successes(scores: ArrayLike, name: str) -> tuple[int, int]:
    array = check_scores(scores, name)
    if array.ndim != 1 or array.size == 0:
        raise StatsInputError(
            f"`{name}` must be a non-empty one-dimensional sequence of 0/1 outcomes; "
            f"found shape {array.shape}"
        )
    check_binary(array, name, method="a 2x2 test")
    successes = int(array.sum())
    return successes, array.size - successes


def success_table(scores_a: ArrayLike, scores_b: ArrayLike) -> Table:
    """The 2x2 table ``((S_A, S_B), (F_A, F_B))`` of two 0/1 outcome sequences.

    Examples
    --------
    >>> from evalstop_ros.stats.batch import success_table
    >>> success_table([1, 0, 0, 1], [1, 1, 1, 0, 1])
    ((2, 4), (2, 1))
    """
    s_a, f_a = _successes(scores_a, "scores_a")
    s_b, f_b = _successes(scores_b, "scores_b")
    return (s_a, s_b), (f_a, f_b)


def _run(method: str, scores_a: ArrayLike, scores_b: ArrayLike, alternative: str,
         **options: object) -> BatchTestResult:
    alternative = check_alternative(alternative)
    table = success_table(scores_a, scores_b)
    scipy_test: Any = {"barnard": stats.barnard_exact, "boschloo": stats.boschloo_exact,
                  "fisher": stats.fisher_exact}[method]
    res = scipy_test([list(row) for row in table], alternative=_SCIPY_ALTERNATIVE[alternative],
                     **options)
    return BatchTestResult(method=method, alternative=alternative, statistic=float(res.statistic),
                           pvalue=float(res.pvalue), table=table)


def barnard_test(scores_a: ArrayLike, scores_b: ArrayLike, *, alternative: str = "two-sided",
                 pooled: bool = True, n: int = 32) -> BatchTestResult:
    r"""Barnard's unconditional exact test of two success rates (batch, fixed N only).

    Parameters
    ----------
    scores_a, scores_b : array_like
        0/1 outcomes of policy A and policy B (lengths may differ).
    alternative : {'two-sided', 'greater', 'less'}, optional
        ``'greater'``: :math:`H_1: p_A < p_B` (B better).
    pooled : bool, optional
        Pooled-variance Wald statistic (scipy default).
    n : int, optional
        Points of the nuisance-parameter grid (scipy default 32).

    Returns
    -------
    BatchTestResult
        With ``sequential_valid=False``.

    Notes
    -----
    The p-value is :math:`\sup_{\pi \in [0,1]} P_\pi(T \ge T_{obs})` over the common success
    rate :math:`\pi`, :math:`T` the Wald statistic (seed 003 §V-A; scipy ``barnard_exact``).
    **Not valid when re-run after every trial** (seed 003 §V, Figs. 3 and 6).

    References
    ----------
    .. [1] Barnard, G. A. "Significance Tests for 2x2 Tables", Biometrika 34, 1947.

    Examples
    --------
    >>> from evalstop_ros.stats.batch import barnard_test
    >>> res = barnard_test([1] * 2 + [0] * 8, [1] * 9 + [0], alternative="greater")
    >>> round(res.pvalue, 5), res.sequential_valid, res.decision(0.05).name
    (0.00129, False, 'B_BETTER')
    """
    return _run("barnard", scores_a, scores_b, alternative, pooled=bool(pooled),
                n=check_positive_int(n, "n"))


def boschloo_test(scores_a: ArrayLike, scores_b: ArrayLike, *, alternative: str = "two-sided",
                  n: int = 32) -> BatchTestResult:
    """Boschloo's unconditional exact test (Fisher's p-value as statistic); batch, fixed N only.

    Parameters and result as in :func:`barnard_test`.  **Not valid when re-run after every
    trial** (seed 003 §V).

    References
    ----------
    .. [1] Boschloo, R. D. "Raised conditional level of significance for the 2x2-table when
           testing the equality of two probabilities", Statistica Neerlandica 24, 1970.
    """
    return _run("boschloo", scores_a, scores_b, alternative, n=check_positive_int(n, "n"))


def fisher_test(scores_a: ArrayLike, scores_b: ArrayLike, *,
                alternative: str = "two-sided") -> BatchTestResult:
    """Fisher's conditional (hypergeometric) exact test; batch, fixed N only.

    Parameters and result as in :func:`barnard_test`; the statistic is the sample odds ratio.
    **Not valid when re-run after every trial** (seed 003 §V).

    References
    ----------
    .. [1] Fisher, R. A. "The Design of Experiments", 1935.
    """
    return _run("fisher", scores_a, scores_b, alternative)
