#!/usr/bin/env python3
"""AdaStop speed: one comparison of 5 agents, N = 5, K = 6, B = 10^4 (goal < 1 s), against the
public ``adastop`` package (PyPI 0.1.3) measured in the same run (issue 5: "about 2 s").

The data are N(0, 1) scores for every agent, so no comparison is decided early and all six
interims run (the slowest case).  Times are the best of ``--repeat`` runs.

The public package is *not* a project dependency.  It is timed when importable here, or when
``EVALSTOP_ADASTOP_PYTHON`` names the interpreter of a scratch virtualenv that has it, e.g.::

    python3 -m venv /tmp/adastop-venv && /tmp/adastop-venv/bin/pip install adastop==0.1.3
    EVALSTOP_ADASTOP_PYTHON=/tmp/adastop-venv/bin/python .venv/bin/python bench/adastop_speed.py

otherwise its column is skipped with a message.

Run: ``.venv/bin/python bench/adastop_speed.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from evalstop_ros.stats.adastop import adastop_test

N, K, L, B = 5, 6, 5, 10_000
GOAL_S = 1.0

#: Runs the public package on the scores in argv[1] (.npy, (K N, L)) and prints the best time.
PACKAGE_SNIPPET = """
import sys, time
import numpy as np
from adastop import MultipleAgentsComparator
scores = np.load(sys.argv[1]); n, k, b, repeat = (int(x) for x in sys.argv[2:6])
best = float("inf")
for _ in range(repeat):
    start = time.perf_counter()
    comparator = MultipleAgentsComparator(n=n, K=k, B=b, alpha=0.05, seed=0)
    for interim in range(k):
        comparator.partial_compare({f"a{j}": scores[: (interim + 1) * n, j] for j in range(scores.shape[1])}, verbose=False)
        if comparator.is_finished:
            break
    best = min(best, time.perf_counter() - start)
print(best)
"""


def time_ours(scores: np.ndarray, repeat: int, permutation: str) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        adastop_test(scores, n_per_interim=N, n_interims=K, alpha=0.05, n_permutations=B, permutation=permutation)
        best = min(best, time.perf_counter() - start)
    return best


def time_package(scores: np.ndarray, repeat: int) -> tuple[float | None, str]:
    python = os.environ.get("EVALSTOP_ADASTOP_PYTHON")
    if python is None and importlib.util.find_spec("adastop") is None:
        return None, "public package not installed here and EVALSTOP_ADASTOP_PYTHON not set (see the module docstring)"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scores.npy")
        np.save(path, scores)
        done = subprocess.run(
            [python or sys.executable, "-c", PACKAGE_SNIPPET, path, str(N), str(K), str(B), str(repeat)],
            capture_output=True, text=True, check=False,
        )
    if done.returncode != 0:
        return None, f"public package failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}"
    return float(done.stdout.strip().splitlines()[-1]), "adastop (PyPI) in " + (python or sys.executable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing, best kept (default %(default)s)")
    args = parser.parse_args()
    scores = np.random.default_rng(0).normal(size=(N * K, L))
    print(f"AdaStop, {L} agents, N = {N}, K = {K}, B = {B}, all pairs, null data (all interims run); best of {args.repeat}")
    load_before = os.getloadavg()[0]
    ours = {p: time_ours(scores, args.repeat, p) for p in ("closed", "relabel", "split")}
    print(f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs; "
          f"closed / relabel = {ours['closed'] / ours['relabel']:.1f}, closed / split = {ours['closed'] / ours['split']:.1f}")
    package, source = time_package(scores, args.repeat)
    print(f"{'implementation':<34} {'time [s]':>9} {'goal < 1 s':>11} {'speed-up vs package':>20}")
    for permutation, seconds in ours.items():
        ratio = f"{package / seconds:19.1f}x" if package else f"{'-':>20}"
        print(f"{'evalstop (' + permutation + ')':<34} {seconds:9.3f} {'met' if seconds < GOAL_S else 'NOT met':>11} {ratio}")
    if package is None:
        print(f"{'public adastop package':<34} {'skipped':>9}  ({source})")
    else:
        print(f"{'public adastop package':<34} {package:9.3f} {'':>11} {'1.0x':>20}   [{source}]")


if __name__ == "__main__":
    main()
