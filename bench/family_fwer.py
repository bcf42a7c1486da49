#!/usr/bin/env python3
"""Family-wise error under the global null (all policies equal), with Monte Carlo SEs (issue 5).

Rows:

* AdaStop, 5 agents, N = 5, K = 6, B = 10^4, all pairs, N(0, 1) scores -- the three permutation
  schemes (``closed``, the default, ``relabel`` and the paper's ``split``; see stats.adastop Notes
  item 2; partial nulls and power are in ``adastop_study.py``);
  the public package measures about 0.10 here (adastop.md pitfall P1);
* 4-policy families, all pairs, Bernoulli(0.5) scores: N-SCORE with Bonferroni and with
  sequential Holm (200 rounds), the mixture e-process (the hub's pairs' test) with sequential
  Holm, STEP with Bonferroni (N_max = 50; STEP has no p-value, so no Holm).

The goal is FWE <= alpha + 2 SE (SE of a rate equal to alpha).  STEP tables missing from the
package are synthesized into ``$EVALSTOP_CACHE_DIR`` (default: the user cache) on first use.

Run: ``.venv/bin/python bench/family_fwer.py [--reps 500] [--family-reps 2000]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from evalstop_ros.stats.adastop import adastop_test
from evalstop_ros.stats.families import FamilyProcess
from evalstop_ros.stats.sequential import Decision

ALPHA = 0.05


def adastop_fwe(reps: int, permutation: str, rng: np.random.Generator) -> int:
    errors = 0
    for _ in range(reps):
        res = adastop_test(rng.normal(size=(30, 5)), n_per_interim=5, n_interims=6, alpha=ALPHA,
                           seed=int(rng.integers(2**31)), permutation=permutation)
        errors += any(d in ("larger", "smaller") for d in res.decisions)
    return errors


def family_fwe(method: str, correction: str, reps: int, rounds: int, rng: np.random.Generator,
               n_max: int | None = None) -> int:
    fam = FamilyProcess(["p0", "p1", "p2", "p3"], method=method, alpha=ALPHA, correction=correction,
                        n_max=n_max, n_sequences=reps, seed=int(rng.integers(2**31)))
    for _ in range(rounds):
        fam.update((rng.random((4, reps)) < 0.5).astype(float))
        if fam.finished.all():
            break
    claims = (fam.decision == Decision.A_BETTER) | (fam.decision == Decision.B_BETTER)
    return int(claims.any(axis=0).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=500, help="AdaStop repetitions (default %(default)s)")
    parser.add_argument("--family-reps", type=int, default=2000, help="families per row (default %(default)s)")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    rows = [
        ("AdaStop 5 agents N=5 K=6 B=1e4 (closed)", args.reps, lambda: adastop_fwe(args.reps, "closed", rng)),
        ("AdaStop 5 agents N=5 K=6 B=1e4 (relabel)", args.reps, lambda: adastop_fwe(args.reps, "relabel", rng)),
        ("AdaStop 5 agents N=5 K=6 B=1e4 (split)", args.reps, lambda: adastop_fwe(args.reps, "split", rng)),
        ("N-SCORE 4 policies, Bonferroni", args.family_reps,
         lambda: family_fwe("nscore", "bonferroni", args.family_reps, 200, rng)),
        ("N-SCORE 4 policies, Holm", args.family_reps,
         lambda: family_fwe("nscore", "holm", args.family_reps, 200, rng)),
        ("Mixture 4 policies, Holm", args.family_reps,
         lambda: family_fwe("mixture", "holm", args.family_reps, 200, rng)),
        ("STEP 4 policies N_max=50, Bonferroni", args.family_reps,
         lambda: family_fwe("step", "bonferroni", args.family_reps, 50, rng, n_max=50)),
    ]
    print(f"family-wise error under the global null, alpha = {ALPHA}; goal FWE <= alpha + 2 SE")
    print(f"{'family':<42} {'reps':>6} {'FWE':>7} {'SE':>7} {'bound':>7} {'goal':>8} {'time [s]':>9}")
    for name, reps, run in rows:
        start = time.perf_counter()
        errors = run()
        fwe = errors / reps
        se = math.sqrt(fwe * (1 - fwe) / reps)
        bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
        print(f"{name:<42} {reps:>6} {fwe:7.4f} {se:7.4f} {bound:7.4f} {'met' if fwe <= bound else 'NOT met':>8} "
              f"{time.perf_counter() - start:9.1f}", flush=True)


if __name__ == "__main__":
    main()
