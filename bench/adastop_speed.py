#!/usr/bin/env python3
"""AdaStop speed per interim: 5 agents, N = 5, K = 6, B = 10^4, all pairs; goal <= 0.3 s per interim (closed).

This tree's schemes are timed against the default ``closed`` scheme of a baseline revision
(``--baseline``, default ``main``; exported with ``git archive``, run in a subprocess on the same
scores in the same run), so the ratio holds on a busy machine.  The data are N(0, 1) scores for
every agent, so no comparison is decided early and all six interims run (the slowest case).
Each interim's time is the best over ``--repeat`` runs; the table gives the mean and the slowest
interim, and the whole comparison (construction included).

Run: ``PYTHONPATH=. .venv/bin/python bench/adastop_speed.py [--repeat 3] [--baseline main]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from _common import goal_verdicts
from adastop_study import baseline_tree

from evalstop_ros.stats.adastop import AdaStop

N, K, L, B = 5, 6, 5, 10_000
GOAL_S = 0.3


def time_interims(scores: np.ndarray, repeat: int, permutation: str) -> tuple[list[float], float, float]:
    """Best wall time of each interim's ``update`` over ``repeat`` runs, the best whole run, and
    the least CPU time (all threads) of one interim on average: on a busy machine the CPU time is
    what an idle one would take on one core."""
    best, whole, cpu = [float("inf")] * K, float("inf"), float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        test = AdaStop(L, n_per_interim=N, n_interims=K, alpha=0.05, n_permutations=B, permutation=permutation)
        used = 0.0
        for k in range(K):
            tick, cpu_tick = time.perf_counter(), time.process_time()
            test.update(scores[k * N : (k + 1) * N].T)
            best[k] = min(best[k], time.perf_counter() - tick)
            used += time.process_time() - cpu_tick
        whole = min(whole, time.perf_counter() - start)
        cpu = min(cpu, used / K)
    return best, whole, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing, best kept (default %(default)s)")
    parser.add_argument("--baseline", default="main", help="git revision timed as 'today' (default %(default)s)")
    parser.add_argument("--as-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    scores = np.random.default_rng(0).normal(size=(N * K, L))
    if args.as_baseline:  # the subprocess: the baseline's closed scheme, as JSON
        print(json.dumps(time_interims(scores, args.repeat, "closed")))
        return 0
    print(f"AdaStop, {L} agents, N = {N}, K = {K}, B = {B}, all pairs, null data (all interims run); "
          f"best of {args.repeat} per interim")
    load_before = os.getloadavg()[0]
    ours = {p: time_interims(scores, args.repeat, p) for p in ("closed", "relabel", "split")}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": baseline_tree(args.baseline, tmp)}
        done = subprocess.run([sys.executable, __file__, "--as-baseline", "--repeat", str(args.repeat)],
                              capture_output=True, text=True, env=env, check=True)
    today_interims, today_whole, today_cpu = json.loads(done.stdout)
    print(f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs")
    print(f"{'implementation':<28} {'mean/interim [s]':>17} {'slowest [s]':>12} {'whole run [s]':>14} "
          f"{'CPU/interim [s]':>16} {'vs today':>9}")
    rows = {f"{p} (this tree)": v for p, v in ours.items()} | {
        f"closed ({args.baseline})": (today_interims, today_whole, today_cpu)}
    for name, (interims, whole, cpu) in rows.items():
        print(f"{name:<28} {np.mean(interims):17.3f} {max(interims):12.3f} {whole:14.3f} {cpu:16.3f} "
              f"{np.mean(interims) / np.mean(today_interims):8.2f}x")
    closed = ours["closed"][0]
    return goal_verdicts({f"closed <= {GOAL_S} s per interim ({max(closed):.3f} s slowest)": max(closed) <= GOAL_S,
                          "closed no slower than today's closed": np.mean(closed) <= np.mean(today_interims)})


if __name__ == "__main__":
    raise SystemExit(main())
