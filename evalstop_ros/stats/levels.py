"""How a family-wise level is shared among a family's tests: the one alpha split, :func:`split_alpha`.

Which splits are valid under which dependence: docs/statistics.md (``stats/families.py``).
"""

from __future__ import annotations

import math

from .errors import StatsInputError
from .validation import check_alpha, check_positive_int

__all__ = ["SPLITS", "bonferroni", "split_alpha"]

#: Ways to share a level among ``m`` tests.
SPLITS = ("bonferroni", "sidak")


def bonferroni(alpha: float, m: int) -> float:
    """Per-comparison level ``alpha / m`` (always valid; see the module notes).

    Examples
    --------
    >>> round(bonferroni(0.05, 6), 6)  # 4 policies, all pairs (seed 000 Fig. 2: 0.0083)
    0.008333
    """
    return check_alpha(alpha) / check_positive_int(m, "m")


def split_alpha(alpha: float, m: int, method: str = "bonferroni") -> float:
    """Per-comparison level that keeps the family-wise error of ``m`` tests at ``alpha``.

    Parameters
    ----------
    alpha : float
        Family-wise level in (0, 1).
    m : int
        Number of comparisons.
    method : {"bonferroni", "sidak"}, optional
        ``"bonferroni"``: ``alpha / m``, valid under any dependence.  ``"sidak"``:
        ``1 - (1 - alpha)^(1 / m)``, slightly larger and valid only for *independent*
        comparisons (disjoint trials, e.g. one test per task); not for pairs sharing a policy.

    Returns
    -------
    float

    Examples
    --------
    >>> round(split_alpha(0.03, 3, "sidak"), 6)  # three tasks on disjoint trials (seed 003: 0.01 each)
    0.010102
    """
    if method == "bonferroni":
        return bonferroni(alpha, m)
    if method == "sidak":
        return -math.expm1(math.log1p(-check_alpha(alpha)) / check_positive_int(m, "m"))
    raise StatsInputError(f"`method` should be one of {SPLITS}; found {method!r}")
