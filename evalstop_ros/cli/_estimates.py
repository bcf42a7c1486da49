"""Up-front run-time estimates of the long verbs (``step check``, ``step synthesize``, ``simulate``), printed on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["ANNOUNCE_SECONDS", "ProgressLines", "announce", "simulate_seconds", "step_check_seconds",
           "step_synthesis_seconds"]

#: Estimates below this many seconds are not announced.
ANNOUNCE_SECONDS = 10.0
#: s per n_max^2 of the exact Type-I check's one propagation at p = 1/2 (n_max up to
#: :data:`~evalstop_ros.stats.step_oc.REWEIGHT_MAX_N`; 500: 0.25 s) ...
_PROPAGATE = 1.0e-6
#: ... and per (null grid point x n_max^2) of its reweighting to the grid (n_max 500: 2.5 s at grid 20 000).
_REWEIGHT = 5.0e-10
#: s per (null grid point x n_max^2) of the per-point check above that ``N_max`` (n_max 500: 30 s at grid 1000).
_CHECK = 1.3e-7
#: s per n_max^3 of a STEP table synthesis (n_max 120: 3.4 s; 500: about 4 min).
_SYNTHESIS = 2.0e-6
#: s per simulated score, per method (N-SCORE: per score and bin).
_PER_SCORE = {"step": 1.0e-6, "wsr": 0.8e-6, "savi": 1.4e-6, "lai": 4.5e-6}
_NSCORE_PER_BIN = 0.25e-6


def step_check_seconds(n_max: int, grid_size: int) -> float:
    """Seconds of ``step check`` (the exact check; the table itself not included)."""
    from ..stats.step_oc import REWEIGHT_MAX_N

    if n_max <= REWEIGHT_MAX_N:
        return (_PROPAGATE + _REWEIGHT * grid_size) * n_max ** 2
    return _CHECK * grid_size * n_max ** 2


def step_synthesis_seconds(n_max: int) -> float:
    """Seconds of a STEP table synthesis at ``n_max``."""
    return _SYNTHESIS * n_max ** 3


def simulate_seconds(method: str, n_max: int, reps: int, bins: int) -> float:
    """Seconds of ``simulate`` (``reps`` sequences of ``n_max`` pairs)."""
    per = _NSCORE_PER_BIN * max(bins, 2) if method == "nscore" else _PER_SCORE.get(method, 1.0e-6)
    return per * n_max * reps


def _span(seconds: float) -> str:
    low, high = seconds, 2 * seconds
    if high < 120:
        return f"{low:.0f}-{high:.0f} s"
    return f"{low / 60:.0f}-{high / 60:.0f} min" if low >= 60 else f"{low:.0f} s-{high / 60:.0f} min"


def announce(prog: str, seconds: float, what: str) -> None:
    """Say on stderr, before the work, how long it will take (only when at least ANNOUNCE_SECONDS)."""
    if seconds >= ANNOUNCE_SECONDS:
        print(f"{prog}: this will take about {_span(seconds)} ({what})", file=sys.stderr, flush=True)


class ProgressLines:
    """Progress of a long job as lines, for a stderr that is not a terminal (a log, a pipe): one
    line each time another ``every`` of the work is done, with the time so far and the time left
    at that pace, e.g. ``evalstop simulate: 40 % (4,000,000 of 10,000,000 pairs), 6 s, about 9 s left``.
    """

    def __init__(self, prog: str, unit: str, *, every: float = 0.1, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._prog, self._unit, self._every, self._out, self._clock = prog, unit, every, out, clock
        self._start = clock()
        self._next = every

    def __call__(self, done: int, total: int) -> None:
        """Report ``done`` of ``total`` (prints only when the next step is reached)."""
        share = done / total if total else 1.0
        if share + 1e-12 < self._next or share >= 1.0:
            return
        while self._next <= share + 1e-12:
            self._next += self._every
        elapsed = self._clock() - self._start
        left = elapsed * (1 - share) / share
        print(f"{self._prog}: {share:.0%} ({done:,} of {total:,} {self._unit}), {elapsed:.0f} s, about {left:.0f} s "
              "left", file=self._out or sys.stderr, flush=True)
