"""Per-group win rates and progress of every policy, with anytime-valid intervals (seed 001 Fig. 9):
the task-category breakdown of :mod:`evalstop_ros.report.categories` and the hub's leaderboard."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from .errors import StatsInputError
from .intervals import mixture_confidence_sequence
from .ranking import Comparisons, FloatArray

__all__ = ["GroupRate", "group_summary"]


@dataclasses.dataclass(frozen=True)
class GroupRate:
    """One policy on one group of comparisons (e.g. a task category; seed 001 Fig. 9).

    ``win_rate`` counts a tie as half a win; ``progress`` is the mean progress of the policy's
    rollouts in the group.  The intervals are anytime-valid 95 % confidence sequences
    (:func:`~.intervals.mixture_confidence_sequence`, made tightest at the group's size), so
    they stay valid however long the campaign ran; NaN where there is no data.
    """

    group: str
    policy: str
    games: int
    win_rate: float
    win_low: float
    win_high: float
    progress_n: int
    progress: float
    progress_low: float
    progress_high: float


def group_summary(data: Comparisons, groups: Sequence[str], *, alpha: float = 0.05) -> list[GroupRate]:
    """Win rate and progress of every policy within every group of comparisons.

    ``groups`` names the group of each comparison (e.g. its task category).  Rows are ordered by
    group name, then by policy in pool order; policies without a game in a group are left out.
    """
    if len(groups) != len(data):
        raise StatsInputError(f"`groups` must name one group per comparison ({len(data)}); found {len(groups)}")
    labels = np.asarray(groups, dtype=object)
    rows = []
    for group in sorted(set(groups)):
        where = labels == group
        for p, name in enumerate(data.policies):
            as_a, as_b = where & (data.i == p), where & (data.j == p)
            wins = np.r_[data.outcome[as_a] / 2.0, 1.0 - data.outcome[as_b] / 2.0]
            if wins.size == 0:
                continue
            progress = np.r_[data.progress_a[as_a], data.progress_b[as_b]]
            progress = progress[~np.isnan(progress)]
            win = _last_band(wins, alpha)
            prog = _last_band(progress, alpha)
            rows.append(GroupRate(group, name, int(wins.size), *win, int(progress.size), *prog))
    return rows


def _last_band(values: FloatArray, alpha: float) -> tuple[float, float, float]:
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean, low, high = mixture_confidence_sequence(values, alpha=alpha, tightest_at=int(values.size))
    return float(mean[-1]), float(low[-1]), float(high[-1])
