#!/usr/bin/env python3
"""Coverage of every ranking model's intervals in the RoboArena-like hard world, full size (issue 20).

Worlds (``--worlds``): ``hard`` = :meth:`~evalstop_ros.stats.ranking_eval.ArenaWorld.hard` (15
policies, pairing propensities spanning 20x, task types whose weights halve from one to the next,
specialists, ~28 % ties, 8 % flipped preferences, slider progress), seed 0; ``planted`` =
:meth:`~evalstop_ros.stats.ranking_eval.ArenaWorld.planted` (7 policies, uniform pairing,
specialists, ties), seed 0.  ``--reps`` datasets per size.  Each
model's estimand is its own limit on this world (:func:`interval_coverage`); the table shows
the coverage of its printed interval at ``--level`` with its Monte Carlo SE (over datasets) and
the median and smallest ratio, over policies, of mean reported SE to true SD.  The CI-sized
version is ``test/stats/test_ranking_coverage.py``.

Run: ``.venv/bin/python bench/ranking_coverage.py --reps 400`` (BT, Davidson, PROG, PAIRED, Elo
with its default 200 online-bootstrap passes, both worlds, the table of docs/ranking.md: about 20
minutes on 2 busy cores, most of it the planted world's n = 5000 cells) and ``--models task
--worlds hard --sizes 1000 --reps 40 --n-boot 30 --save DIR`` for the task model with 60 buckets
and its bootstrap (each dataset costs ``n_boot + 1`` EM fits of about 0.9 s on one core: 40
datasets take 17 minutes, 64 about half an hour on a busy core).  The task model's row is followed by the same fits' intervals with the normal
quantile instead of its ``t_{n_boot-1}`` (:attr:`~evalstop_ros.stats.ranking_task.TaskFit.ranking`).
``--models "bt (bootstrap-t),davidson (bootstrap-t)"`` is a diagnostic, not a shipped interval: BT
and Davidson with the studentised bootstrap over resampled comparisons (199 refits per dataset;
docs/ranking.md explains why the analytic interval stays).

``--seed S`` draws the datasets from seed ``size + 10**6 S`` (S = 0: the tables in the docs), so
batches with different seeds are independent and can be pooled: coverage as the mean weighted by
datasets, its SE as ``sqrt(sum reps_k^2 SE_k^2) / sum reps_k``.  ``--save DIR`` writes each cell's
scores, SEs and interval ends per dataset (``DIR/<world>_<model>_<n>_seed<S>.npz``) for per-policy
diagnosis: ``bench/ranking_coverage_pool.py`` pools such cells and tests the per-policy coverages.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import time
from collections.abc import Callable

import numpy as np

from evalstop_ros.stats.ranking import Comparisons, Ranking
from evalstop_ros.stats.ranking_eval import ArenaWorld, Coverage, interval_coverage
from evalstop_ros.stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
from evalstop_ros.stats.ranking_task import TaskModelOptions, fit_task


def models(n_boot: int) -> dict[str, Callable[[Comparisons], Ranking]]:
    task = TaskModelOptions(partial_weight=1.0, n_boot=n_boot)
    return {
        "bt": fit_bt, "davidson": fit_davidson, "prog": fit_prog, "paired": fit_paired_progress,
        "elo": fit_elo, "task": lambda d: fit_task(d, task).ranking,
        "task (n_boot 0)": lambda d: fit_task(d, TaskModelOptions(partial_weight=1.0, n_boot=0)).ranking,
        "bt (bootstrap-t)": _studentised_over_comparisons(fit_bt),
        "davidson (bootstrap-t)": _studentised_over_comparisons(fit_davidson),
    }


def _studentised_over_comparisons(fit: Callable[[Comparisons], Ranking], n_boot: int = 199) -> Callable[[Comparisons], Ranking]:
    """A diagnostic, not shipped: ``fit`` with the symmetric bootstrap-t over resampled comparisons.

    ``|T*| = |score* - score| / se*`` over ``n_boot`` refits on comparisons drawn with replacement
    (each with the fit's own HC2 SE; infinite where a policy is absent from the resample), the
    interval ``score -+ q se`` as PROG's (:meth:`~evalstop_ros.stats.ranking.Ranking.interval`).
    docs/ranking.md uses it to test whether the sandwich models' residual over-coverage can be
    removed; the resamples are seeded per dataset from its first comparisons.
    """

    def fitted(data: Comparisons) -> Ranking:
        ranking = fit(data)
        rng = np.random.default_rng(int(data.outcome[:32] @ 3 ** np.arange(min(32, len(data)))))
        replicates = []
        for _ in range(n_boot):
            again = fit(data.subset(rng.integers(0, len(data), len(data))))
            with np.errstate(invalid="ignore", divide="ignore"):
                replicates.append(np.abs(again.scores - ranking.scores) / again.se)
        return dataclasses.replace(ranking, boot_t=np.sort(np.nan_to_num(np.array(replicates), nan=np.inf), axis=0))

    return fitted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bt,davidson,prog,paired,elo", help="comma-separated (default %(default)s)")
    parser.add_argument("--sizes", default="200,1000,5000", help="comparisons per dataset (default %(default)s)")
    parser.add_argument("--reps", type=int, default=200, help="datasets per cell (default %(default)s)")
    parser.add_argument("--n-boot", type=int, default=TaskModelOptions().n_boot,
                        help="bootstrap refits of the task model (default %(default)s)")
    parser.add_argument("--worlds", default="hard,planted", help="comma-separated, of hard, planted "
                        "(default %(default)s)")
    parser.add_argument("--level", type=float, default=0.95, help="interval level (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="batch seed: datasets from seed size + 10**6 seed "
                        "(default %(default)s, the docs' tables)")
    parser.add_argument("--save", type=pathlib.Path, help="directory for each cell's per-dataset scores, SEs and "
                        "intervals (.npz)")
    args = parser.parse_args()
    known = models(args.n_boot)
    chosen = args.models.split(",")
    for name in chosen:
        if name not in known:
            parser.error(f"--models: unknown model {name!r}; known: {', '.join(known)}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0; found {args.seed}")
    worlds = {"hard": ArenaWorld.hard(np.random.default_rng(0)), "planted": ArenaWorld.planted(np.random.default_rng(0))}
    for world_name in args.worlds.split(","):
        if world_name not in worlds:
            parser.error(f"--worlds: unknown world {world_name!r}; known: {', '.join(worlds)}")
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
    print(f"| world | model | n | coverage at {args.level:g} (SE) | SE/SD median | SE/SD min | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for world_name in args.worlds.split(","):
        for name in chosen:
            for size in (int(s) for s in args.sizes.split(",")):
                start = time.monotonic()

                def report(done: int, total: int, name: str = name, size: int = size, start: float = start) -> None:
                    if done % max(1, total // 10) == 0:
                        print(f"{world_name} {name} n={size}: {done}/{total} datasets "
                              f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)

                fits: list[Ranking] = []

                def recorded(data: Comparisons, fit: Callable[[Comparisons], Ranking] = known[name]) -> Ranking:
                    fits.append(fit(data))
                    return fits[-1]

                seed = size + 10**6 * args.seed
                got = interval_coverage(worlds[world_name], recorded, size, reps=args.reps, level=args.level,
                                        seed=seed, progress=report)
                _row(world_name, name, size, got, time.monotonic() - start)
                if name == "task":
                    # the same datasets (same seed) and fits, normal quantile instead of t_{n_boot-1}
                    replay = iter([dataclasses.replace(fit, df=None) for fit in fits])
                    normal = interval_coverage(worlds[world_name], lambda _data: next(replay), size, reps=args.reps,
                                               level=args.level, seed=seed)
                    _row(world_name, "task, normal quantile (same fits)", size, normal, 0.0)
                if args.save is not None:
                    _save(args.save / f"{world_name}_{name.replace(' ', '_')}_{size}_seed{args.seed}.npz", fits,
                          args.level)
    return 0


def _row(world: str, model: str, size: int, got: Coverage, seconds: float) -> None:
    print(f"| {world} | {model} | {size} | {got.coverage:.3f} ({got.coverage_se:.3f}) | "
          f"{np.median(got.se_ratio):.2f} | {np.min(got.se_ratio):.2f} | {seconds:.0f} |", flush=True)


def _save(path: pathlib.Path, fits: list[Ranking], level: float) -> None:
    ends = [fit.interval(level) for fit in fits]
    np.savez(path, scores=np.array([fit.scores for fit in fits]), se=np.array([fit.se for fit in fits]),
             low=np.array([low for low, _ in ends]), high=np.array([high for _, high in ends]), level=level)


if __name__ == "__main__":
    raise SystemExit(main())
