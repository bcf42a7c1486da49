#!/usr/bin/env python3
"""AdaStop where users are: family-wise error and power of the ``closed`` scheme against today's and the paper's.

Every data set is analysed by three tests, so the columns are paired (same data, same path seed):

* ``closed`` -- this tree's default: Welch's statistic inside closed testing, each intersection's
  permutation test together with its normal-theory test (``docs/adastop.md``);
* ``today`` -- the default ``closed`` scheme of the baseline revision (``--baseline``, default
  ``main``), exported with ``git archive`` and run in a subprocess on the same data sets;
* ``split`` -- the paper's scheme (seed 002 Eq. 8; for two agents its exact enumeration).

**FWE** rows: the fraction of data sets in which some pair of agents with *equal means* is
declared ``larger``/``smaller``, with its Monte Carlo SE; the goal is FWE <= alpha + 2 SE (SE of a
rate equal to alpha).  Global and partial nulls, spread ratios up to 10, one tight agent among
wide ones, skewed (gamma) and bounded scores (success rates, progress in [0, 1]), N 3-10 scores
per interim, 2-6 agents.  **Power** rows (every pair differs): the mean fraction of pairs declared
different and the mean scores used per agent; ``closed / today`` is their ratio.

alpha = 0.05.  docs/adastop.md's tables are this script's output with the arguments it prints.

Run: ``PYTHONPATH=. .venv/bin/python bench/adastop_study.py [--reps 1000] [--power-reps 500]
[--permutations 500] [--only fwe|power]`` (``--only`` twice runs the two tables in two processes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalstop_ros.stats.adastop import adastop_test

ALPHA = 0.05
COLUMNS = ("closed", "today", "split")
#: One agent's law: (kind, mean, spread); kinds: normal (sd), gamma (sd; skewed), beta (sd; in [0, 1]),
#: bernoulli (success rate = mean), t2 / cauchy (scale; centred at ``mean``).
Law = tuple[str, float, float]


def draw(laws: Sequence[Law], rng: np.random.Generator, rows: int) -> np.ndarray:
    """``(rows, L)`` scores, one column per agent."""
    columns = []
    for kind, mean, spread in laws:
        if kind == "normal":
            columns.append(rng.normal(mean, spread, rows))
        elif kind == "gamma":  # mean, sd -> shape (mean/sd)^2, scale sd^2/mean: right-skewed
            columns.append(rng.gamma((mean / spread) ** 2, spread**2 / mean, rows))
        elif kind == "beta":  # mean, sd -> concentration mean (1 - mean) / sd^2 - 1
            c = mean * (1 - mean) / spread**2 - 1
            columns.append(rng.beta(mean * c, (1 - mean) * c, rows))
        elif kind == "bernoulli":
            columns.append((rng.random(rows) < mean).astype(float))
        elif kind == "t2":
            columns.append(mean + spread * rng.standard_t(2, rows))
        else:
            columns.append(mean + spread * rng.standard_cauchy(rows))
    return np.column_stack(columns)


def normal(*pairs: tuple[float, float]) -> list[Law]:
    return [("normal", m, s) for m, s in pairs]


TIGHT4 = normal((0, .15), (0, 1), (0, 1), (0, 1))
#: (name, laws, N, K): nulls are the pairs with equal means
FWE_ROWS: list[tuple[str, list[Law], int, int]] = [
    ("2 agents, sd .1 / 1 (ratio 10); N=5 K=4", normal((0, .1), (0, 1)), 5, 4),
    ("2 agents, sd .1 / 1 (ratio 10); N=3 K=6", normal((0, .1), (0, 1)), 3, 6),
    ("one tight (sd .15) among three sd 1; N=5 K=4", TIGHT4, 5, 4),
    ("one tight (sd .15) among three sd 1; N=3 K=6", TIGHT4, 3, 6),
    ("one tight (sd .15) among three sd 1; N=10 K=3", TIGHT4, 10, 3),
    ("one tight (sd .1) among two sd 1; N=5 K=4", normal((0, .1), (0, 1), (0, 1)), 5, 4),
    ("one tight (sd .1) among five sd 1; N=5 K=3", normal((0, .1), *[(0, 1)] * 5), 5, 3),
    ("a1=a2~N(0,.1²), a3=a4~N(0,1); N=4 K=5", normal((0, .1), (0, .1), (0, 1), (0, 1)), 4, 5),
    ("partial: means 0,0,1,1 with sd .1,1,.1,1; N=5 K=4", normal((0, .1), (0, 1), (1, .1), (1, 1)), 5, 4),
    ("skewed: gamma mean 1, sd .1 / 1 / 1; N=5 K=4", [("gamma", 1, .1), ("gamma", 1, 1), ("gamma", 1, 1)], 5, 4),
    ("progress in [0,1]: beta mean .6, sd .05 / .35 x3; N=5 K=4",
     [("beta", .6, .05), ("beta", .6, .35), ("beta", .6, .35), ("beta", .6, .35)], 5, 4),
    ("success rates: 4 agents p = .7; N=5 K=4", [("bernoulli", .7, 0)] * 4, 5, 4),
    ("global null, 3 agents Cauchy; N=5 K=6", [("cauchy", 0, 1)] * 3, 5, 6),
    ("global null, 4 agents t(2); N=5 K=6", [("t2", 0, 1)] * 4, 5, 6),
    ("global null, 5 agents N(0,1); N=5 K=6", normal(*[(0, 1)] * 5), 5, 6),
    ("skewed: gamma mean 1, sd .1 / .5 / .5; N=5 K=4", [("gamma", 1, .1), ("gamma", 1, .5), ("gamma", 1, .5)], 5, 4),
    ("skewed: gamma mean 1, sd .1 / 1 / 1; N=10 K=3", [("gamma", 1, .1), ("gamma", 1, 1), ("gamma", 1, 1)], 10, 3),
]
POWER_ROWS: list[tuple[str, list[Law], int, int]] = [
    ("shifts 0, .5, 1, 1.5 (sd 1); N=5 K=6", normal((0, 1), (.5, 1), (1, 1), (1.5, 1)), 5, 6),
    ("Hopper-like (seed 002 Fig. 5); N=5 K=6", normal((2703, 980), (2566, 1173), (805, 546), (1285, 1011)), 5, 6),
    ("spreads: N(0,.1²) N(.3,.1²) N(0,1) N(1,1); N=5 K=6", normal((0, .1), (.3, .1), (0, 1), (1, 1)), 5, 6),
    ("2 agents, shift 1 (sd 1); N=5 K=6", normal((0, 1), (1, 1)), 5, 6),
    ("success rates .3, .5, .7, .9; N=10 K=3",
     [("bernoulli", .3, 0), ("bernoulli", .5, 0), ("bernoulli", .7, 0), ("bernoulli", .9, 0)], 10, 3),
    ("progress: beta means .4, .55, .7 (sd .2); N=5 K=6", [("beta", .4, .2), ("beta", .55, .2), ("beta", .7, .2)], 5, 6),
]


def run(laws: Sequence[Law], n: int, k: int, reps: int, b: int, seed: int, permutation: str) -> list[tuple[list[str], list[int]]]:
    """Decisions and scores used per data set (the data and path seeds depend on ``seed`` only)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        data, path_seed = draw(laws, rng, n * k), int(rng.integers(2**31))
        res = adastop_test(data, n_per_interim=n, n_interims=k, alpha=ALPHA, n_permutations=b, seed=path_seed,
                           permutation=permutation)
        out.append((list(res.decisions), list(res.n_scores)))
    return out


def baseline_tree(revision: str, into: str) -> str:
    """Export ``evalstop_ros`` of ``revision`` into ``into`` (``git archive``); return the directory."""
    archive = subprocess.run(["git", "archive", revision, "evalstop_ros"], capture_output=True, check=True,
                             cwd=Path(__file__).resolve().parent.parent).stdout
    path = os.path.join(into, "baseline.tar")
    Path(path).write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into


def start_today(tree: str, table: str, row: int, reps: int, b: int) -> subprocess.Popen[str]:
    """The baseline's default scheme on row ``row`` of ``table``, in a subprocess importing ``tree``."""
    env = {**os.environ, "PYTHONPATH": tree}
    return subprocess.Popen([sys.executable, __file__, "--as-baseline", table, str(row), str(reps), str(b)],
                            stdout=subprocess.PIPE, text=True, env=env)


def columns_of(table: str, row: int, reps: int, b: int, tree: str) -> dict[str, list[tuple[list[str], list[int]]]]:
    rows = FWE_ROWS if table == "fwe" else POWER_ROWS
    _, laws, n, k = rows[row]
    seed = (100 if table == "fwe" else 200) + row
    today = start_today(tree, table, row, reps, b)
    out = {"closed": run(laws, n, k, reps, b, seed, "closed"), "split": run(laws, n, k, reps, b, seed, "split")}
    stdout, _ = today.communicate()
    if today.returncode != 0:
        raise SystemExit(f"baseline run failed on {table} row {row}")
    out["today"] = [tuple(x) for x in json.loads(stdout)]  # type: ignore[misc]
    return out


def pairs_of(agents: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(agents) for j in range(i + 1, agents)]


def fwe_table(reps: int, b: int, tree: str, rows: Sequence[int] | None = None) -> None:
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    print(f"family-wise error over pairs with equal means, {reps} data sets per row; goal <= alpha + 2 SE = {bound:.4f}")
    print()
    print("| world | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for row, (name, laws, _, _) in enumerate(FWE_ROWS):
        if rows is not None and row not in rows:
            continue
        out = columns_of("fwe", row, reps, b, tree)
        nulls = [j for j, (a, c) in enumerate(pairs_of(len(laws))) if laws[a][1] == laws[c][1]]
        cells = []
        for column in COLUMNS:
            errors = sum(any(decisions[j] in ("larger", "smaller") for j in nulls) for decisions, _ in out[column])
            fwe = errors / reps
            se = math.sqrt(fwe * (1 - fwe) / reps)
            cells.append(f"{fwe:.3f} ± {se:.3f}{'' if fwe <= bound else ' (over)'}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def power_table(reps: int, b: int, tree: str) -> None:
    print(f"power: mean fraction of pairs declared different ± SE; mean scores per agent; {reps} data sets per row")
    print()
    print("| world | " + " | ".join(COLUMNS) + " | closed / today |")
    print("|---|" + "---|" * (len(COLUMNS) + 1))
    for row, (name, _, _, _) in enumerate(POWER_ROWS):
        out = columns_of("power", row, reps, b, tree)
        cells, power = [], {}
        for column in COLUMNS:
            separated = np.array([np.mean([d in ("larger", "smaller") for d in dec]) for dec, _ in out[column]])
            used = np.array([np.mean(sc) for _, sc in out[column]])
            power[column] = separated.mean()
            cells.append(f"{separated.mean():.3f} ± {separated.std(ddof=1) / math.sqrt(reps):.3f}; {used.mean():.1f}")
        ratio = power["closed"] / power["today"] if power["today"] > 0 else math.nan
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="data sets per FWE row (default %(default)s)")
    parser.add_argument("--power-reps", type=int, default=500, help="data sets per power row (default %(default)s)")
    parser.add_argument("--permutations", type=int, default=500, metavar="B",
                        help="permutation (and reference) paths (default %(default)s; every test stays exact)")
    parser.add_argument("--baseline", default="main", help="git revision of 'today' (default %(default)s)")
    parser.add_argument("--only", choices=("fwe", "power"), default=None, help="print only one of the two tables")
    parser.add_argument("--rows", type=int, nargs="+", default=None, metavar="I",
                        help="only these FWE rows (0-based; each row has its own seed: rows run apart print the same)")
    parser.add_argument("--as-baseline", nargs=4, metavar=("TABLE", "ROW", "REPS", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_baseline:  # the subprocess of start_today: the baseline's default scheme, as JSON
        table, row, reps, b = args.as_baseline[0], *(int(x) for x in args.as_baseline[1:])
        _, laws, n, k = (FWE_ROWS if table == "fwe" else POWER_ROWS)[row]
        print(json.dumps(run(laws, n, k, reps, b, (100 if table == "fwe" else 200) + row, "closed")))
        return
    print(f"AdaStop, alpha = {ALPHA}, B = {args.permutations} paths; columns: closed (this tree), "
          f"today (closed of {args.baseline}), split (seed 002 Eq. 8)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tree = baseline_tree(args.baseline, tmp)
        if args.only != "power":
            print()
            fwe_table(args.reps, args.permutations, tree, args.rows)
        if args.only != "fwe":
            print()
            power_table(args.power_reps, args.permutations, tree)
    print()
    print(f"({time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
