"""Anytime-valid confidence sequences for a mean in [0, 1]: the report's success-rate bands.

Robbins' normal mixture (Howard et al. 2021, §3); the derivation is in docs/statistics.md.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError

__all__ = ["mixture_confidence_sequence"]

#: Variance proxy of a [0, 1]-valued observation.
SIGMA2 = 0.25


def _rho(alpha: float, m: int) -> float:
    log_inv = math.log(1.0 / alpha)
    x = 2.0 * log_inv
    for _ in range(50):  # x = 2 log(1/alpha) + log(1 + x): a contraction, converges fast
        x = 2.0 * log_inv + math.log1p(x)
    return SIGMA2 * m / x


def mixture_confidence_sequence(values: ArrayLike, *, alpha: float = 0.05, tightest_at: int = 100
                                ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Running mean and its anytime-valid ``1 - alpha`` band after each observation.

    Parameters
    ----------
    values : array_like
        Observations in [0, 1] in collection order (e.g. one policy's successes).
    alpha : float, optional
        Miscoverage in (0, 1); the band covers the mean at all times with probability
        ``>= 1 - alpha``.
    tightest_at : int, optional
        Trial count where the band is made tightest (the report uses the session's n_max).

    Returns
    -------
    mean, low, high : ndarray
        Each of the length of ``values``; the band is clipped to [0, 1].

    Raises
    ------
    StatsInputError
        If a value lies outside [0, 1], or ``alpha`` or ``tightest_at`` is out of range.

    Examples
    --------
    >>> mean, low, high = mixture_confidence_sequence([1, 0, 1, 1] * 25, alpha=0.05)
    >>> round(float(mean[-1]), 3), round(float(low[-1]), 3), round(float(high[-1]), 3)
    (0.75, 0.598, 0.902)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise StatsInputError(f"`values` must be one-dimensional; found shape {x.shape}")
    bad = ~((x >= 0.0) & (x <= 1.0))
    if bad.any():
        index = int(np.argmax(bad))
        raise StatsInputError(f"`values` must lie in [0, 1]; found {float(x[index])!r} at index {index}")
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"`alpha` must lie in (0, 1); found {alpha!r}")
    if tightest_at < 1:
        raise StatsInputError(f"`tightest_at` must be a positive integer; found {tightest_at!r}")
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mean = np.cumsum(x) / t
    rho = _rho(alpha, tightest_at)
    v = SIGMA2 * t
    radius = np.sqrt(2.0 * (v + rho) * (math.log(1.0 / alpha) + 0.5 * np.log1p(v / rho))) / t
    return mean, np.clip(mean - radius, 0.0, 1.0), np.clip(mean + radius, 0.0, 1.0)
