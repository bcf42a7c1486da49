"""Hall's (1992) skewness-removing cubic of a studentized mean and its inverse.

Hall, "On the removal of skewness by transformation", JRSS B 54:221: with ``a = gamma / 3`` (``gamma``
the skewness of the mean), ``g(z) = ((1 + a z)^3 - 1) / (3 a) + a / 2`` removes the ``n^-1/2``
skewness term of the Edgeworth expansion of ``z``; it is monotone for every ``a``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["hall_cubic", "hall_cubic_inverse"]

_FLAT = 1e-12


def hall_cubic(z: ArrayLike, a: ArrayLike) -> NDArray[np.float64]:
    """``g(z)`` (broadcast over ``z`` and ``a``; ``z`` itself where ``|a|`` is below 1e-12).

    >>> [round(float(x), 6) for x in hall_cubic([0.0, 1.0], 0.1)]
    [0.05, 1.153333]
    """
    z, a = np.broadcast_arrays(np.asarray(z, dtype=np.float64), np.asarray(a, dtype=np.float64))
    flat = np.abs(a) < _FLAT
    safe = np.where(flat, 1.0, a)
    with np.errstate(invalid="ignore", over="ignore"):
        cubic = (np.power(1.0 + safe * z, 3) - 1.0) / (3.0 * safe) + safe / 2.0
    return np.asarray(np.where(flat, z, cubic), dtype=np.float64)


def hall_cubic_inverse(u: ArrayLike, a: ArrayLike) -> NDArray[np.float64]:
    """``g^-1(u) = (cbrt(1 + 3 a (u - a / 2)) - 1) / a`` (``u - a / 2`` where ``|a|`` is below 1e-12).

    >>> round(float(hall_cubic_inverse(hall_cubic(1.0, 0.1), 0.1)[()]), 12)
    1.0
    """
    u, a = np.broadcast_arrays(np.asarray(u, dtype=np.float64), np.asarray(a, dtype=np.float64))
    flat = np.abs(a) < _FLAT
    safe = np.where(flat, 1.0, a)
    return np.asarray(np.where(flat, u - a / 2.0, (np.cbrt(1.0 + 3.0 * safe * (u - safe / 2.0)) - 1.0) / safe),
                      dtype=np.float64)
