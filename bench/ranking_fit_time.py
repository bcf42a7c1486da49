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

``--cli`` times the command a lab runs instead (issue 38): ``evalstop rank FILE --model M`` on
1 500 comparisons of 8 policies on 4 task types (a CSV written from the same world), each model
in a fresh process (imports included), best of ``--repeats``, as a ratio to ``--model bt`` in the
same run.  Goals: ``--model task`` with its calibrated (bootstrap) intervals within 3x of bt and
10 s on an idle machine; the CPU time (user + system of the process, both cores counted) is printed
beside the wall time, since a loaded machine stretches the wall time of the two-thread task fit.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from evalstop_ros.stats.ranking import Comparisons, Ranking
from evalstop_ros.stats.ranking_eval import ArenaWorld, simulate_arena
from evalstop_ros.stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
from evalstop_ros.stats.ranking_task import TaskModelOptions, fit_task

GOAL_TASK_S = 60.0
#: issue 38: `evalstop rank --model task` (calibrated) on 1,500 comparisons, against --model bt
GOAL_CLI_RATIO, GOAL_CLI_S = 3.0, 10.0
CLI = "import sys; from evalstop_ros.cli.main import main; sys.exit(main(sys.argv[1:]))"


def best_time(fit: Callable[[Comparisons], Ranking], data: Comparisons, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fit(data)
        times.append(time.perf_counter() - start)
    return min(times)


def write_csv(data: Comparisons, path: pathlib.Path) -> None:
    """``data`` as `evalstop rank`'s CSV (progress on the 0-100 scale)."""
    label = {0: "B", 1: "tie", 2: "A"}
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["policy_a", "policy_b", "preference", "progress_a", "progress_b", "task"])
        for n in range(len(data)):
            out.writerow([data.policies[data.i[n]], data.policies[data.j[n]], label[int(data.outcome[n])],
                          round(100 * data.progress_a[n], 1), round(100 * data.progress_b[n], 1), data.tasks[n]])


def cli_time(argv: list[str], repeats: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system) of ``evalstop ARGV`` in fresh processes."""
    root = pathlib.Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(walls), min(cpus)


def main_cli(args: argparse.Namespace) -> int:
    """``evalstop rank --model bt|paired|task`` on 1,500 comparisons, timed side by side."""
    rng = np.random.default_rng(0)
    data = simulate_arena(ArenaWorld.planted(rng, n_policies=8, n_types=4), 1500, rng)
    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(scratch) / "ab.csv"
        write_csv(data, path)
        print(f"evalstop rank on {len(data)} comparisons of 8 policies, best of {args.repeats}; "
              f"load average {os.getloadavg()[0]:.1f}")
        times = {model: cli_time(["rank", str(path), "--model", model], args.repeats) for model in ("bt", "paired", "task")}
    wall_bt, cpu_bt = times["bt"]
    for model, (wall, cpu) in times.items():
        print(f"  --model {model:<7} {wall:7.2f} s ({wall / wall_bt:5.2f} x bt)   CPU {cpu:7.2f} s ({cpu / cpu_bt:5.2f} x bt)")
    wall, cpu = times["task"]
    print(f"goal: task (50 bootstrap refits) <= {GOAL_CLI_RATIO:g} x bt: {'met' if wall <= GOAL_CLI_RATIO * wall_bt else 'MISSED'} "
          f"({wall / wall_bt:.2f} x); <= {GOAL_CLI_S:g} s: {'met' if wall <= GOAL_CLI_S else 'MISSED'} ({wall:.1f} s, "
          f"load {os.getloadavg()[0]:.1f})")
    return 0 if wall <= GOAL_CLI_RATIO * wall_bt and wall <= GOAL_CLI_S else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=10_000)
    parser.add_argument("--policies", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--partial-weight", type=float, default=1.0)
    parser.add_argument("--cli", action="store_true", help="time `evalstop rank` on 1,500 comparisons instead")
    args = parser.parse_args()
    if args.cli:
        return main_cli(args)
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
