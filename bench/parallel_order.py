"""Several runners, outcome-dependent durations: the Type-I error of a sequential test fed in plan
order against one fed in completion order (docs/parallel.md, "Checked by Monte Carlo").

The rounds and durations are test/session/parallel_sim.py's: the rounds B wins finish first, so
under the null (both policies succeed with the same probability) completion order favours B;
plan order keeps the test at its level whatever the number of runners.

Usage: python bench/parallel_order.py [--replications R] [--runners N ...] [--methods M ...] [--p P ...]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "test" / "session"))

from parallel_sim import rejection_rates


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=4000)
    parser.add_argument("--runners", type=int, nargs="+", default=[1, 2, 8, 32])
    parser.add_argument("--methods", nargs="+", default=["nscore", "step"])
    parser.add_argument("--p", type=float, nargs="+", default=[0.5])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    alpha, n_max = 0.05, 100
    print(f"Type-I error at alpha {alpha}, n_max {n_max}, {args.replications} replications (2 SE shown)")
    print("method  p     runners  plan order        completion order   seconds")
    for method in args.methods:
        for p in args.p:
            for runners in args.runners:
                start = time.perf_counter()
                rates = rejection_rates(method, p, runners, args.replications, n_max, alpha, args.seed)
                se = {k: 2 * math.sqrt(max(v * (1 - v), 1e-12) / args.replications) for k, v in rates.items()}
                print(f"{method:7} {p:.2f}  {runners:7}  {rates['plan']:.4f} ± {se['plan']:.4f}   "
                      f"{rates['completion']:.4f} ± {se['completion']:.4f}   {time.perf_counter() - start:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
