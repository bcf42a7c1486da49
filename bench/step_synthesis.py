#!/usr/bin/env python3
"""STEP synthesis time and peak memory (issue goal: N_max=500, alpha=0.05 in < 40 s, < 300 MB).

Each synthesis runs in a fresh subprocess so its peak RSS is its own.  The baseline, measured in
the same run, is the same Eq.-10 synthesis solving every step's LP over all reachable candidates
at once instead of by column generation (N_max=200 only by default: at 500 it takes minutes;
``--baseline-500`` to include it).
Run: ``.venv/bin/python bench/step_synthesis.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from evalstop_ros.stats.step_synthesis import synthesize_weights
n_max, alpha, cg = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
start = time.perf_counter()
for _ in synthesize_weights(n_max, alpha, budget=0.995 * alpha, column_generation=cg):
    pass
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(n_max: int, alpha: float, column_generation: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n_max), str(alpha), "1" if column_generation else "0"],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--baseline-500", action="store_true", help="also time the baseline at N_max=500")
    args = parser.parse_args()
    print(f"{'N_max':>6} {'method':<22} {'time [s]':>9} {'peak [MB]':>10} {'speed-up':>9}")
    for n_max in (200, 500):
        ours = measure(n_max, args.alpha, True)
        base = measure(n_max, args.alpha, False) if n_max == 200 or args.baseline_500 else None
        ratio = f"{base['seconds'] / ours['seconds']:8.1f}x" if base else "       -"
        print(f"{n_max:>6} {'column generation':<22} {ours['seconds']:9.1f} {ours['peak_mb']:10.0f} {ratio}", flush=True)
        if base:
            print(f"{n_max:>6} {'full LP (baseline)':<22} {base['seconds']:9.1f} {base['peak_mb']:10.0f} {'1.0x':>9}", flush=True)
        if n_max == 500:
            ok = ours["seconds"] < 40 and ours["peak_mb"] < 300
            print(f"goal N_max=500 < 40 s and < 300 MB: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
