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
"""

from __future__ import annotations

import argparse
import sys

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--n-max", type=int, nargs="+", default=[100, 200, 500])
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
