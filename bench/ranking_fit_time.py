#!/usr/bin/env python3
"""Ranking fit time: 10 000 A/B comparisons of 50 policies (issue 11), every model.

The data come from the planted RoboArena-like world of :mod:`evalstop_ros.stats.ranking_eval`
(specialists, easy-to-hard task types, ties, noisy progress).  Timed in one process, best of
``--repeats`` runs each, and reported as a ratio to plain BT measured in the same run (the
baseline), so the numbers compare across machines:

* ``bt``, ``davidson``: damped Newton with a full 50 x 50 Hessian, then the HC2 sandwich and its
  Bell-McCaffrey df;
* ``elo``: one pass (no bootstrap); ``elo + SE``: with its online bootstrap (200 weighted passes);
* ``paired``: least squares, HC2 sandwich and df;
* ``prog``: per-policy means;
* ``task``: the EM of seed 001 App. B with Table 1's defaults (T = 60 buckets, 60 iterations),
  with the App. B.4 progress term (``--partial-weight``, default 1 as ``evalstop rank``).

Run: ``.venv/bin/python bench/ranking_fit_time.py`` (``--comparisons``, ``--policies`` for
other sizes).  Goal: the task model fits 10 000 comparisons in under 60 s on 2 shared cores.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from evalstop_ros.stats.ranking import Comparisons, Ranking
from evalstop_ros.stats.ranking_eval import ArenaWorld, simulate_arena
from evalstop_ros.stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
from evalstop_ros.stats.ranking_task import TaskModelOptions, fit_task

GOAL_TASK_S = 60.0


def best_time(fit: Callable[[Comparisons], Ranking], data: Comparisons, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fit(data)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=10_000)
    parser.add_argument("--policies", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--partial-weight", type=float, default=1.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    world = ArenaWorld.planted(rng, n_policies=args.policies)
    data = simulate_arena(world, args.comparisons, rng)
    task = TaskModelOptions(partial_weight=args.partial_weight, n_boot=0)  # one EM fit (the bootstrap repeats it n_boot times)
    models: dict[str, Callable[[Comparisons], Ranking]] = {
        "bt": fit_bt,
        "davidson": fit_davidson,
        "elo": lambda d: fit_elo(d, n_boot=0),
        "elo + SE": fit_elo,  # with its default online bootstrap (200 weighted passes)
        "prog": fit_prog,
        "paired": fit_paired_progress,
        "task": lambda d: fit_task(d, task).ranking,
    }
    print(f"{args.comparisons} comparisons of {args.policies} policies, best of {args.repeats}")
    baseline = best_time(models["bt"], data, args.repeats)
    worst = 0.0
    for name, fit in models.items():
        seconds = baseline if name == "bt" else best_time(fit, data, args.repeats)
        print(f"  {name:<9} {seconds:8.3f} s   {seconds / baseline:8.1f} x bt")
        if name == "task":
            worst = seconds
    verdict = "met" if worst < GOAL_TASK_S else "MISSED"
    print(f"goal: task model < {GOAL_TASK_S:g} s: {verdict} ({worst:.1f} s)")
    return 0 if worst < GOAL_TASK_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
