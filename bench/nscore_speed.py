#!/usr/bin/env python3
"""N-SCORE speed: per-update time (goal <= 100 us for K in {2, 5, 21}) and Monte Carlo
throughput (goal >= 1e6 paired trials/s for the binary test, K = 2).

Baselines measured in the same run:

* per update -- a plain scalar implementation of the same Alg. 1 update written the obvious
  way (Python loops over the K x K bins, ``scipy.optimize.brentq`` for the bet);
* throughput -- the same :class:`NScoreProcess` run one sequence at a time (R = 1) instead of
  vectorised over R = 10 000 sequences.

Run: ``.venv/bin/python bench/nscore_speed.py``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.optimize

from evalstop_ros.stats.nscore import NScoreProcess
from evalstop_ros.stats.sequential import run_batch


class ScalarNScore:
    """Textbook one-sided N-SCORE (seed 000 Alg. 1, App. A-C), one sequence, no vectorisation."""

    def __init__(self, bins: int, alpha: float = 0.05, xi_max: float = 0.995) -> None:
        self.levels = [k / (bins - 1) for k in range(bins)]
        self.counts = [[0] * bins, [0] * bins]
        self.n, self.xi, self.log_x, self.threshold, self.xi_max = 0, 0.0, 0.0, math.log(1 / alpha), xi_max

    def update(self, r0: np.ndarray, r1: np.ndarray) -> bool:
        r0, r1 = float(r0[0]), float(r1[0])
        self.log_x += math.log1p(self.xi * (r1 - r0))
        k = len(self.levels)
        for side, r in enumerate((r0, r1)):
            self.counts[side][min(int((k - 1) * (r + 1e-9)), k - 1)] += 1
        self.n += 1
        p0 = [(c + 2 / k) / (self.n + 2) for c in self.counts[0]]
        p1 = [(c + 2 / k) / (self.n + 2) for c in self.counts[1]]
        terms = [(p0[i] * p1[j], self.levels[j] - self.levels[i]) for i in range(k) for j in range(k)]
        def slope(xi: float) -> float:
            return sum(w * d / (1 + xi * d) for w, d in terms)
        if slope(0.0) <= 0:
            self.xi = 0.0
        elif slope(self.xi_max) >= 0:
            self.xi = self.xi_max
        else:
            self.xi = scipy.optimize.brentq(slope, 0.0, self.xi_max)
        return self.log_x >= self.threshold


def per_update_us(make, updates: int, rng: np.random.Generator) -> float:
    a, b = rng.random((updates, 1)), rng.random((updates, 1))
    best = math.inf
    for _ in range(5):
        update = make().update
        start = time.perf_counter()
        for i in range(updates):
            update(a[i], b[i])
        best = min(best, (time.perf_counter() - start) / updates * 1e6)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    print("per-update time, one sequence, one-sided (best of 5 x 400 updates)")
    print(f"{'K':>3} {'ours [us]':>10} {'scalar baseline [us]':>21} {'speed-up':>9} {'goal <= 100 us':>15}")
    for bins in (2, 5, 21):
        ours = per_update_us(lambda: NScoreProcess(1, alpha=0.05, alternative="greater", bins=bins), 400, rng)
        base = per_update_us(lambda: ScalarNScore(bins), 400, rng)
        print(f"{bins:>3} {ours:10.1f} {base:21.1f} {base / ours:8.1f}x {'met' if ours <= 100 else 'NOT met':>15}")

    reps, n = 10_000, 300
    a = (rng.random((reps, n)) < 0.5).astype(float)
    b = (rng.random((reps, n)) < 0.5).astype(float)
    start = time.perf_counter()
    run_batch(NScoreProcess(reps, alpha=0.05, alternative="two-sided", bins=2), a, b)
    vectorised = reps * n / (time.perf_counter() - start)
    few = 50
    start = time.perf_counter()
    for r in range(few):
        run_batch(NScoreProcess(1, alpha=0.05, alternative="two-sided", bins=2), a[r : r + 1], b[r : r + 1])
    looped = few * n / (time.perf_counter() - start)
    print("\nMonte Carlo throughput, K = 2, null p0 = p1 = 0.5 (no early stops), N = 300")
    print(f"vectorised R={reps}: {vectorised:,.0f} paired trials/s; one at a time: {looped:,.0f}/s; "
          f"speed-up {vectorised / looped:.0f}x; goal >= 1e6/s {'met' if vectorised >= 1e6 else 'NOT met'}")


if __name__ == "__main__":
    main()
