#!/usr/bin/env python3
"""Per-update cost of N-SCORE through ``evalstop analyze`` against the reference package, in one run.

Ours: wall time of ``evalstop analyze FILE --method nscore --bins K`` on a 1 000-pair and a
101 000-pair file of null scores (continuous, never crossing at this alpha); the difference over
100 000 pairs is the per-update cost of the whole analysis path (CSV parsing, the test, the
output), start-up cancelling out -- for the terminal report and for ``--json`` (which prints every
p-value and e-value: two float reprs per update).  Reference: ``ContinuousNsmTest.step`` of the N-SCORE authors'
``nscore`` 0.1.2 (scratch venv, ``_reference.py``) with the same K levels on the same pairs,
timed per call in its own process.
Run: ``.venv/bin/python bench/analyze_speed.py`` (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
from _reference import reference_python, run_json

REFERENCE = """
import json, sys, time
import numpy as np
from nscore.nonparametric_nsm import ContinuousNsmTest
from statistical_comparison_core.base import Hypothesis
data = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
bins, updates, alpha = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
test = ContinuousNsmTest(Hypothesis.P0LessThanP1, alpha, np.linspace(0.0, 1.0, bins))
start = time.perf_counter()
for a, b in data[:updates]:
    test.step(float(a), float(b))
print(json.dumps({"per_update_s": (time.perf_counter() - start) / updates}))
"""


def write_pairs(path: pathlib.Path, n: int, rng: np.random.Generator) -> None:
    a, b = rng.random(n), rng.random(n)
    np.savetxt(path, np.column_stack((a, b)), delimiter=",", header="policy_a,policy_b", comments="", fmt="%.6f")


def analyze_seconds(path: pathlib.Path, bins: int, alpha: float, as_json: bool) -> tuple[float, int]:
    """Best of five wall times of ``evalstop analyze`` on ``path``, and the pairs it read."""
    evalstop = pathlib.Path(sys.executable).with_name("evalstop")
    best, observed = float("inf"), 0
    for _ in range(5):
        start = time.perf_counter()
        out = subprocess.run([str(evalstop), "analyze", str(path), "--method", "nscore", "--bins", str(bins),
                              "--alpha", str(alpha), "--alternative", "greater", *(["--json"] if as_json else [])],
                             check=True, capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        if as_json:
            observed = json.loads(out.stdout)["result"]["n_observed"]
        else:
            observed = int(out.stdout.split(" pairs ", 1)[0].rsplit(" ", 1)[-1])
    return best, observed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bins", type=int, nargs="+", default=[2, 5, 21])
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--reference-updates", type=int, default=500)
    args = parser.parse_args()
    reference = reference_python()
    rng = np.random.default_rng(2026)
    print(f"{'K':>3} {'output':>8} {'ours [us/update]':>17} {'reference [us/update]':>22} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        small, large = pathlib.Path(tmp, "p1000.csv"), pathlib.Path(tmp, "p101000.csv")
        write_pairs(small, 1000, rng)
        write_pairs(large, 101000, rng)
        for bins in args.bins:
            ref = run_json(reference, REFERENCE, str(large), str(bins), str(args.reference_updates),
                           str(args.alpha))["per_update_s"]
            for as_json in (False, True):
                (t_small, n_small), (t_large, n_large) = (
                    analyze_seconds(p, bins, args.alpha, as_json) for p in (small, large))
                if (n_small, n_large) != (1000, 101000):
                    print(f"K={bins}: the test stopped early ({n_small}, {n_large}); lower --alpha", file=sys.stderr)
                    break
                ours = (t_large - t_small) / 100000
                print(f"{bins:>3} {'json' if as_json else 'report':>8} {ours * 1e6:17.2f} {ref * 1e6:22.1f} "
                      f"{ref / ours:7.0f}x", flush=True)


if __name__ == "__main__":
    main()
