#!/usr/bin/env python3
"""AdaStop permutation schemes: family-wise error under partial and global nulls, and power (issue 20).

Every data set is analysed by the three schemes of :class:`evalstop_ros.stats.adastop.AdaStop`
(``closed``, the default; ``relabel``; ``split``, the paper's Eq. 8), so the columns are paired.

* **FWE** rows: the fraction of data sets in which some truly equal pair is declared different,
  with its Monte Carlo SE; the goal is FWE <= alpha + 2 SE (SE of a rate equal to alpha).
  Partial nulls with unequal spreads (the issue's: a1 = a2 ~ N(0, 0.1^2), a3 = a4 ~ N(0, 1); one
  low-spread agent among three equal ones) and global nulls with 3-5 agents, heavy tails included.
* **Power** rows: the mean fraction of truly different pairs declared different (all pairs
  differ in these worlds) and the mean number of scores used per agent.

alpha = 0.05 throughout.  The docs table (docs/adastop.md) is this script's output with the
arguments printed in its first line.

Run: ``.venv/bin/python bench/adastop_study.py [--reps 1000] [--permutations 1000] [--only fwe|power]``
(the defaults are the docs table's; 6-25 minutes on one core depending on load, less with ``--only`` twice).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from evalstop_ros.stats.adastop import adastop_test

ALPHA = 0.05
SCHEMES = ("closed", "relabel", "split")
Draw = Callable[[np.random.Generator, int], np.ndarray]


def normals(*laws: tuple[float, float]) -> Draw:
    return lambda rng, rows: np.column_stack([rng.normal(m, s, rows) for m, s in laws])


def heavy(agents: int, law: str) -> Draw:
    if law == "cauchy":
        return lambda rng, rows: rng.standard_cauchy((rows, agents))
    return lambda rng, rows: rng.standard_t(2, (rows, agents))


#: (name, draw, N, K, truly equal pairs or None for "all pairs differ")
FWE_ROWS: list[tuple[str, Draw, int, int, list[tuple[int, int]]]] = [
    ("a1=a2~N(0,.1²), a3=a4~N(0,1); N=4 K=5", normals((0, .1), (0, .1), (0, 1), (0, 1)), 4, 5, [(0, 1), (2, 3)]),
    ("a1=a2~N(0,.1²), a3=a4~N(0,1); N=5 K=6", normals((0, .1), (0, .1), (0, 1), (0, 1)), 5, 6, [(0, 1), (2, 3)]),
    ("a1~N(0,.1²), a2=a3=a4~N(0,1); N=4 K=5", normals((0, .1), (0, 1), (0, 1), (0, 1)), 4, 5,
     [(1, 2), (1, 3), (2, 3)]),
    ("global null, 3 agents Cauchy; N=5 K=6", heavy(3, "cauchy"), 5, 6, [(0, 1), (0, 2), (1, 2)]),
    ("global null, 4 agents t(2); N=5 K=6", heavy(4, "t2"), 5, 6, [(i, j) for i in range(4) for j in range(i + 1, 4)]),
    ("global null, 5 agents N(0,1); N=5 K=6", normals(*[(0, 1)] * 5), 5, 6,
     [(i, j) for i in range(5) for j in range(i + 1, 5)]),
]
#: Worlds where every pair differs: (name, draw, N, K)
POWER_ROWS: list[tuple[str, Draw, int, int]] = [
    ("shifts 0, .5, 1, 1.5 (sd 1); N=5 K=6", normals((0, 1), (.5, 1), (1, 1), (1.5, 1)), 5, 6),
    ("Hopper-like (seed 002 Fig. 5); N=5 K=6", normals((2703, 980), (2566, 1173), (805, 546), (1285, 1011)), 5, 6),
    ("spreads: N(0,.1²) N(.3,.1²) N(0,1) N(1,1); N=5 K=6", normals((0, .1), (.3, .1), (0, 1), (1, 1)), 5, 6),
]


def run(draw: Draw, n: int, k: int, reps: int, b: int, seed: int) -> dict[str, list[tuple[tuple[str, ...], tuple[int, ...]]]]:
    """Decisions and scores used of every scheme on the same ``reps`` data sets."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[tuple[str, ...], tuple[int, ...]]]] = {s: [] for s in SCHEMES}
    for _ in range(reps):
        data, path_seed = draw(rng, n * k), int(rng.integers(2**31))
        for scheme in SCHEMES:
            res = adastop_test(data, n_per_interim=n, n_interims=k, alpha=ALPHA, n_permutations=b, seed=path_seed,
                               permutation=scheme)
            out[scheme].append((res.decisions, res.n_scores))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="data sets per row (default %(default)s)")
    parser.add_argument("--permutations", type=int, default=1000, metavar="B",
                        help="permutation paths per interim (default %(default)s; the paper's 10^4 is slower)")
    parser.add_argument("--only", choices=("fwe", "power"), default=None,
                        help="print only one of the two tables (to run them in two processes)")
    args = parser.parse_args()
    reps, b = args.reps, args.permutations
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    print(f"AdaStop schemes, alpha = {ALPHA}, {reps} data sets per row, B = {b} paths; "
          f"goal FWE <= alpha + 2 SE = {bound:.4f}")
    start = time.perf_counter()
    if args.only != "power":
        print()
        fwe_table(reps, b, bound)
    if args.only != "fwe":
        print()
        power_table(reps, b)
    print()
    print(f"({time.perf_counter() - start:.0f} s)")


def fwe_table(reps: int, b: int, bound: float) -> None:
    print("| family-wise error | " + " | ".join(SCHEMES) + " |")
    print("|---|" + "---|" * len(SCHEMES))
    for row, (name, draw, n, k, nulls) in enumerate(FWE_ROWS):
        out = run(draw, n, k, reps, b, seed=100 + row)
        cells = []
        for scheme in SCHEMES:
            errors = 0
            for decisions, _ in out[scheme]:
                agents = int(round((1 + math.sqrt(1 + 8 * len(decisions))) / 2))
                comparisons = [(i, j) for i in range(agents) for j in range(i + 1, agents)]
                by_pair = dict(zip(comparisons, decisions))
                errors += any(by_pair[p] in ("larger", "smaller") for p in nulls)
            fwe = errors / reps
            se = math.sqrt(fwe * (1 - fwe) / reps)
            cells.append(f"{fwe:.3f} ± {se:.3f}{'' if fwe <= bound else ' (over)'}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def power_table(reps: int, b: int) -> None:
    print("| power (pairs separated; scores/agent) | " + " | ".join(SCHEMES) + " |")
    print("|---|" + "---|" * len(SCHEMES))
    for row, (name, draw, n, k) in enumerate(POWER_ROWS):
        out = run(draw, n, k, reps, b, seed=200 + row)
        cells = []
        for scheme in SCHEMES:
            separated = np.array([np.mean([d in ("larger", "smaller") for d in dec]) for dec, _ in out[scheme]])
            used = np.array([np.mean(sc) for _, sc in out[scheme]])
            cells.append(f"{separated.mean():.3f} ± {separated.std(ddof=1) / math.sqrt(reps):.3f}; "
                         f"{used.mean():.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
