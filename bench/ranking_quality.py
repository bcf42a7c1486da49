#!/usr/bin/env python3
"""Rank quality on planted RoboArena-like worlds (seed 001 Sec. 5.2 metrics, Fig. 7's curves).

For each world (task effects with drift, stationary task effects, no task effects) and each
number of comparisons, ``--reps`` seeds each draw a world and one stream of comparisons; every
model ranks the stream's first ``n`` comparisons (nested, as in a campaign), and the table shows
Pearson r and MMRV against the oracle, mean over seeds, and the paired difference task minus
each other model with its SE.  The task model runs with the App. B.4 progress term (weight 1),
as ``evalstop rank`` does.

Run: ``.venv/bin/python bench/ranking_quality.py --reps 60`` (a few minutes per world).
"""

from __future__ import annotations

import argparse

from evalstop_ros.stats.ranking_eval import ArenaWorld, efficiency_curve
from evalstop_ros.stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_prog
from evalstop_ros.stats.ranking_task import TaskModelOptions, fit_task

WORLDS = {
    "task effects + drift": {"drift": 3.0},
    "task effects, stationary": {},
    "no task effects": {"task_effects": False},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--sizes", default="25,50,100,150,300")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    task = TaskModelOptions(partial_weight=1.0, n_boot=0)  # scores only
    fitters = {
        "task": lambda d: fit_task(d, task).ranking, "bt": fit_bt, "davidson": fit_davidson,
        "elo": lambda d: fit_elo(d, n_boot=0), "prog": fit_prog,
    }
    for name, options in WORLDS.items():
        curve = efficiency_curve(lambda rng, o=options: ArenaWorld.planted(rng, **o), fitters, sizes,
                                 reps=args.reps, seed=1, paired_with="task")
        print(f"\n== {name} ({args.reps} seeds): mean Pearson r / MMRV; [task - model: dr +- se, dMMRV +- se]")
        for k, size in enumerate(sizes):
            cells = []
            for model in fitters:
                cell = f"{model} {curve.pearson_mean[model][k]:.3f}/{curve.mmrv_mean[model][k]:.3f}"
                if model != "task":
                    cell += (f" [{curve.pearson_diff[model][k]:+.3f}+-{curve.pearson_diff_se[model][k]:.3f},"
                             f" {curve.mmrv_diff[model][k]:+.4f}+-{curve.mmrv_diff_se[model][k]:.4f}]")
                cells.append(cell)
            print(f"n={size:<4} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
