#!/usr/bin/env python3
"""Pool saved coverage cells of ``bench/ranking_coverage.py --save`` and look at them per policy (issue 20).

Every file is one cell (``<world>_<model>_<n>_seed<S>.npz``: per-dataset scores, SEs and interval
ends); pass cells of the same world, model and size drawn with different ``--seed``.  The estimand
is re-centred on the mean score over *all* pooled datasets (each file's own centre rests on fewer),
and the table gives, per policy, how often its interval covers it, the ratio of its mean SE to the
SD of its score and, below, the pooled coverage with its SE over datasets and a chi-square of the
per-policy hit counts against ``Binomial(datasets, level)``: if every policy covers at ``level``,
the counts spread like that (policies within one dataset are dependent, so the test is
approximate) and the smallest of them is just the smallest of many noisy counts.  The chance of a
minimum at least as low under that null is simulated (100 000 draws, seed 0).

Run: ``.venv/bin/python bench/ranking_coverage_pool.py DIR/hard_task_1000_seed2.npz DIR/hard_task_1000_seed3.npz``.
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np
from scipy import stats

from evalstop_ros.stats.ranking_eval import coverage_of


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cells", nargs="+", type=pathlib.Path, help="saved cells (.npz) to pool")
    args = parser.parse_args()
    loaded = [np.load(path) for path in args.cells]
    levels = {float(cell["level"]) for cell in loaded}
    if len(levels) != 1 or len({cell["scores"].shape[1] for cell in loaded}) != 1:
        parser.error("the cells differ in level or in the number of policies: pool one cell's batches only")
    level = levels.pop()
    got = coverage_of(*(np.concatenate([cell[key] for cell in loaded]) for key in ("scores", "se", "low", "high")),
                      level)
    print(f"{got.reps} datasets from {len(loaded)} cells; coverage at {level:g}: {got.coverage:.4f} "
          f"(SE {got.coverage_se:.4f})")
    print("| policy | datasets | coverage | mean SE / SD |")
    print("|---:|---:|---:|---:|")
    shown = (~np.isnan(got.hit)).sum(axis=0)
    hits = np.nansum(got.hit, axis=0)
    for policy in range(shown.size):
        print(f"| {policy} | {shown[policy]} | {hits[policy] / max(shown[policy], 1):.3f} | {got.se_ratio[policy]:.2f} |")
    shown, hits = shown[shown > 0], hits[shown > 0]  # a policy never compared has no interval
    expected = shown * level
    chi2 = float(np.sum((hits - expected) ** 2 / (expected * (1.0 - level))))
    draws = np.random.default_rng(0).binomial(shown, level, (100_000, shown.size)) / shown
    lowest = float(np.min(hits / shown))
    print(f"chi-square of the per-policy counts against Binomial(datasets, {level:g}): {chi2:.1f} on {shown.size} df "
          f"(p = {stats.chi2.sf(chi2, shown.size):.2f}); smallest coverage {lowest:.3f}, "
          f"P(smallest <= it) = {float(np.mean(draws.min(axis=1) <= lowest + 1e-12)):.3f} if all cover at {level:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
