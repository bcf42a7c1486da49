#!/usr/bin/env python3
"""STEP synthesis: our time and peak memory against the reference synthesizer, in one run.

For each N_max (default 100, 200, 500; alpha = 0.05) both synthesizers run in fresh subprocesses
(so each peak RSS is its own) and are timed *inside* the process, imports excluded:

* ours -- :func:`evalstop_ros.stats.step_table.synthesize_table` (Eq.-10 LPs on HiGHS with row
  and column generation), followed (untimed) by the exact Type-I check on 1000 diagonal nulls;
* reference -- ``run_step_policy_synthesis`` of the STEP authors' package
  (``sequentialized-barnard-tests`` 0.0.9, installed into a scratch venv by ``_reference.py``)
  with the per-N_max shape parameters of its own synthesis script.

Both synthesize the one table that serves both directions (the accept region is the mirror).
Run: ``.venv/bin/python bench/step_synthesis.py`` (N_max = 500 takes the reference ~6 min);
``--n-max 50`` for a quick check.

``--large 1000`` (issue 38; the reference would take hours there): the synthesis at that N_max as
shipped (rows below ``SYNTHESIS_FLOOR`` dropped and counted as spent) against the same
synthesizer with no row dropped (``floor`` 0, as before), each in its own process; wall and CPU
time, peak RSS and the ratio.  Goals: at most 60 s and 500 MB on an idle machine (the CPU time is
the idle figure's stand-in on a loaded one: the synthesis is one thread).  The exact Type-I check
runs after the clock.
"""

from __future__ import annotations

import argparse
import os
import sys

from _common import goal_verdicts
from _reference import reference_python, run_json

OURS = """
import json, resource, sys, time
from evalstop_ros.stats import step_synthesis  # imported (HiGHS) before the clock, as the reference's
from evalstop_ros.stats.step_table import synthesize_table
from evalstop_ros.stats.step_oc import check_type1
n_max, alpha = int(sys.argv[1]), float(sys.argv[2])
start = time.perf_counter()
table = synthesize_table(n_max, alpha)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
report = check_type1(table, grid_size=1000)
print(json.dumps({"seconds": seconds, "peak_mb": peak, "max_fpr": report.max_fpr}))
"""

LARGE = """
import json, resource, sys, time
from evalstop_ros.stats import step_synthesis
from evalstop_ros.stats.step_table import BUDGET_FRACTION, StepTable, dead_time, default_grid_size
from evalstop_ros.stats.step_oc import check_type1
n_max, alpha, floor = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
grid = default_grid_size(n_max)
start, cpu = time.perf_counter(), time.process_time()
regions = step_synthesis.synthesize_weights(n_max, alpha, budget=BUDGET_FRACTION * alpha, dead_time=dead_time(n_max),
                                            grid_size=grid, floor=None if floor == "default" else float(floor))
table = StepTable.from_regions(n_max, alpha, regions, grid)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
report = check_type1(table, grid_size=1000)
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mb": peak, "max_fpr": report.max_fpr}))
"""
GOAL_S, GOAL_MB = 60.0, 500.0

REFERENCE = """
import json, resource, sys, time
from sequentialized_barnard_tests.scripts.synthesize_general_step_policy import run_step_policy_synthesis
n_max, alpha = int(sys.argv[1]), float(sys.argv[2])
# the shape parameters its own script uses for these N_max
shape = {100: (2.1, 1.4), 200: (2.1, 1.15), 300: (2.1, 1.4), 400: (2.1, 1.4), 500: (2.2, 1.35)}
lam, axis = shape.get(n_max, (2.1, 1.4))
start = time.perf_counter()
run_step_policy_synthesis(n_max, alpha, 129, lam, axis)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--n-max", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--large", type=int, nargs="*", default=None, metavar="N_MAX",
                        help="N_max values to time against our own exact synthesis instead (e.g. 1000)")
    args = parser.parse_args()
    if args.large is not None:
        return large(args.large or [1000], args.alpha)
    reference = reference_python()
    print(f"{'N_max':>6} {'ours [s]':>9} {'ref [s]':>9} {'speed-up':>9} {'ours [MB]':>10} {'ref [MB]':>9} "
          f"{'exact max Type-I (1000 nulls)':>30}")
    for n_max in args.n_max:
        print(f"N_max {n_max}: running ours, then the reference ...", file=sys.stderr, flush=True)
        ours = run_json(sys.executable, OURS, str(n_max), str(args.alpha))
        ref = run_json(reference, REFERENCE, str(n_max), str(args.alpha))
        ok = "<= alpha" if ours["max_fpr"] <= args.alpha else "> alpha!"
        print(f"{n_max:>6} {ours['seconds']:9.2f} {ref['seconds']:9.2f} {ref['seconds'] / ours['seconds']:8.1f}x "
              f"{ours['peak_mb']:10.0f} {ref['peak_mb']:9.0f} {ours['max_fpr']:>20.6f} {ok}", flush=True)
    return 0


def large(sizes: list[int], alpha: float) -> int:
    """Ours as shipped against ours with no row dropped, at each N_max, with the goals' verdicts."""
    goals = {}
    for n_max in sizes:
        print(f"N_max {n_max}: the synthesis as shipped, then with no row dropped ...", file=sys.stderr, flush=True)
        ours = run_json(sys.executable, LARGE, str(n_max), str(alpha), "default")
        exact = run_json(sys.executable, LARGE, str(n_max), str(alpha), "0")
        for name, run in (("as shipped", ours), ("no row dropped", exact)):
            print(f"N_max {n_max} {name:<15} {run['seconds']:8.1f} s wall {run['cpu']:8.1f} s CPU "
                  f"{run['peak_mb']:6.0f} MB  exact max Type-I {run['max_fpr']:.6f}", flush=True)
        print(f"N_max {n_max}: {exact['cpu'] / ours['cpu']:.2f}x less CPU, {exact['peak_mb'] / ours['peak_mb']:.2f}x less "
              f"memory; load average {os.getloadavg()[0]:.1f}")
        goals[f"N_max {n_max}: <= {GOAL_S:g} s ({ours['cpu']:.1f} s CPU)"] = ours["cpu"] <= GOAL_S
        goals[f"N_max {n_max}: <= {GOAL_MB:g} MB ({ours['peak_mb']:.0f} MB)"] = ours["peak_mb"] <= GOAL_MB
        goals[f"N_max {n_max}: exact Type-I <= alpha ({ours['max_fpr']:.6f})"] = ours["max_fpr"] <= alpha
    return goal_verdicts(goals)


if __name__ == "__main__":
    sys.exit(main())
