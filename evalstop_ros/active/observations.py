"""Validation of a surrogate's training data, shared by the MLP and the shrinkage surrogate.

Both surrogates of seed 004 (App. C) and :mod:`.shrinkage` learn from the same observations:
a policy index, a task index and an outcome in [0, 1] (0/1 for the Bernoulli head).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ActiveError


def check_observations(policy: ArrayLike, task: ArrayLike, outcomes: ArrayLike, *, shape: tuple[int, int],
                       outcome: str) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """``(policy, task, outcomes)`` as arrays, or :class:`~.errors.ActiveError` naming what is wrong.

    >>> check_observations([0, 1], [2, 0], [1.0, 0.0], shape=(2, 3), outcome="binary")[1].tolist()
    [2, 0]
    >>> check_observations([0], [3], [1.0], shape=(2, 3), outcome="binary")
    Traceback (most recent call last):
    ...
    evalstop_ros.active.errors.ActiveError: policy indices must lie in [0, 2) and task indices in [0, 3)
    """
    p, t = np.asarray(policy, dtype=np.int64), np.asarray(task, dtype=np.int64)
    y = np.asarray(outcomes, dtype=np.float64)
    m, n = shape
    if not (p.shape == t.shape == y.shape and p.ndim == 1):
        raise ActiveError(f"`policy`, `task`, `outcomes` must be 1-d of one length; found {p.shape}, {t.shape}, {y.shape}")
    if p.size and not (p.min() >= 0 and p.max() < m and t.min() >= 0 and t.max() < n):
        raise ActiveError(f"policy indices must lie in [0, {m}) and task indices in [0, {n})")
    if not np.all((y >= 0) & (y <= 1)):
        raise ActiveError(f"`outcomes` must lie in [0, 1]; found {y[~((y >= 0) & (y <= 1))][:3].tolist()}")
    if outcome == "binary" and not np.all((y == 0) | (y == 1)):
        raise ActiveError("`outcomes` of a binary surrogate must be 0 or 1")
    return p, t, y


def bin_index(outcomes: ArrayLike, bins: int) -> NDArray[np.int64]:
    """Bin of each outcome in [0, 1] among ``bins`` equal bins (1.0 falls in the last).

    >>> bin_index([0.0, 0.5, 1.0], 25).tolist()
    [0, 12, 24]
    """
    values = np.asarray(outcomes, dtype=np.float64)
    return np.minimum((values * bins).astype(np.int64), bins - 1)


def average_log_likelihood(q: NDArray[np.float64], y: NDArray[np.float64], *, outcome: str, bins: int) -> float:
    """Average log-likelihood of outcomes ``y`` under predicted bin masses ``q`` (seed 004 §V, Fig. 2).

    ``q`` is ``(n, 2)`` for a binary head, ``(n, bins)`` for a binned one; a binned outcome's
    mass is read as the density ``q_b K`` on [0, 1].
    """
    index = y.astype(np.int64) if outcome == "binary" else bin_index(y, bins)
    mass = np.clip(q[np.arange(y.size), index], 1e-12, 1.0)
    density = mass if outcome == "binary" else mass * bins
    return float(np.mean(np.log(density)))
