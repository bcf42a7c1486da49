"""Shared inputs and checks of the statistics tests: nscore.md §8 reference vectors, MC bounds."""

from __future__ import annotations

import math
import re

import numpy as np


def ones_vs_zeros(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """(r0, r1) = (0, 1) on every trial (nscore.md §8)."""
    return np.zeros(n), np.ones(n)


def period_six(repeats: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """r0 = 0,0,1,0,0,1 and r1 = 1,1,0,1,0,1, repeated (nscore.md §8)."""
    return np.tile([0.0, 0, 1, 0, 0, 1], repeats), np.tile([1.0, 1, 0, 1, 0, 1], repeats)


def low_discrepancy(n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """r0 = 0.8 frac(0.618.. n), r1 = 0.2 + 0.8 frac(0.414.. n), rounded to 6 decimals (§8)."""
    t = np.arange(1, n + 1)
    r0 = np.round(0.8 * np.mod(0.6180339887 * t, 1.0), 6)
    r1 = np.round(0.2 + 0.8 * np.mod(0.4142135624 * t, 1.0), 6)
    return r0, r1


def found(value: str) -> str:
    """Regex for the bad value repeated in a message."""
    return f"found {re.escape(value)}"


def assert_fpr(false_claims: int, total: int, alpha: float) -> None:
    """Monte Carlo Type-I check: estimate <= alpha + 2 SE, with the SE of a rate equal to alpha."""
    estimate = false_claims / total
    se = math.sqrt(alpha * (1 - alpha) / total)
    bound = alpha + 2 * se
    assert estimate <= bound, f"FPR {estimate:.4f} (SE {se:.4f}) exceeds bound {bound:.4f}"
