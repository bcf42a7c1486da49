"""``evalstop rank``: a global policy ranking from pairwise A/B comparisons (seed 001 Sec. 3.2).

A thin layer over :mod:`evalstop_ros.stats.ranking` (BT, Davidson, Elo, PROG) and
:mod:`evalstop_ros.stats.ranking_task` (the task-aware model).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..stats.ranking import Comparisons, Ranking, fit_bt, fit_davidson, fit_elo, fit_prog
from ..stats.ranking_task import TaskModelOptions, fit_task
from ._common import print_json
from .ab_data import load_ab

HELP = "rank policies from pairwise A/B comparisons (BT, Davidson, Elo, PROG, task-aware)"
DESCRIPTION = """\
Fit a ranking model to A/B comparisons and print the leaderboard: score, standard error and
rank per policy (best first).  RESULTS is a CSV with the header
policy_a,policy_b,preference,progress_a,progress_b[,task][,valid]: preference A, B or tie,
progress on the 0-100 scale (empty = not recorded), valid 1/0 (only valid pairs count);
or the journal (.db) or a rosbag of a `design: ab` session (complete rounds only).

models (seed 001, RoboArena, Sec. 3.2 and App. B):
  bt        Bradley-Terry MLE with L2 (ties = half a win); score = log-ability, sum 0
  davidson  BT with Davidson ties (the released leaderboard's model); score = log-ability, sum 0
  elo       one Elo pass in file order; SE by bootstrap
  prog      mean progress per policy in [0, 1] (progress averaging)
  task      the paper's task-aware model (latent task buckets, EM of App. B); score = theta"""
EPILOG = """\
example:
  evalstop rank arena.csv --model task --json

exit status: 0 ranking printed, 2 usage or input error."""
MODELS = ("bt", "davidson", "elo", "prog", "task")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop rank``."""
    parser.add_argument("results", help="CSV of A/B comparisons, or an A/B session's journal (.db) or rosbag")
    parser.add_argument("--model", choices=MODELS, default="task", help="ranking model (default %(default)s)")
    parser.add_argument("--l2", type=float, default=1e-2, help="L2 penalty of bt and davidson (default %(default)s)")
    parser.add_argument("--elo-k", type=float, default=None, help="Elo K-factor in log-odds units (default: chess's 32 points)")
    parser.add_argument("--buckets", type=int, default=TaskModelOptions.n_buckets,
                        help="task model: latent task buckets T (default %(default)s, App. B.6)")
    parser.add_argument("--partial-weight", type=float, default=1.0,
                        help="task model: weight of the progress scores (App. B.4; 0 = preferences only; "
                        "default %(default)s)")
    parser.add_argument("--n-boot", type=int, default=None,
                        help="bootstrap resamples for the SE (elo default 200; task default 0 = information SE)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the EM start and the bootstrap (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def fit(data: Comparisons, args: argparse.Namespace) -> Ranking:
    """The ranking of ``data`` by ``args.model`` with the options of ``args``."""
    if args.model == "bt":
        return fit_bt(data, l2=args.l2)
    if args.model == "davidson":
        return fit_davidson(data, l2=args.l2)
    if args.model == "elo":
        options: dict[str, Any] = {"seed": args.seed, "n_boot": 200 if args.n_boot is None else args.n_boot}
        return fit_elo(data, **options, **({} if args.elo_k is None else {"k": args.elo_k}))
    if args.model == "prog":
        return fit_prog(data)
    task = TaskModelOptions(
        n_buckets=args.buckets, partial_weight=args.partial_weight, seed=args.seed, n_boot=args.n_boot or 0,
    )
    return fit_task(data, task).ranking


def run(args: argparse.Namespace) -> int:
    """Load the comparisons, fit the model, print the leaderboard; 0 on success."""
    table = load_ab(args.results)
    ranking = fit(table.data, args)
    wins, games = table.data.win_matrix()
    if args.json:
        print_json({
            "model": ranking.model,
            "n_comparisons": len(table.data),
            "n_invalid": table.n_invalid,
            "params": {key: value for key, value in ranking.params.items() if math.isfinite(value)},
            "ranking": ranking.table(),
            "win_rates": {"policies": list(ranking.policies), "wins": wins.tolist(), "games": games.tolist()},
            "notes": table.notes_by_policy(),
        })
        return 0
    print(f"{table.path}: {len(table.data)} valid comparisons of {table.data.n_policies} policies "
          f"({table.n_invalid} invalid set aside); model {ranking.model}")
    width = max(len(name) for name in ranking.policies)
    print(f"{'rank':>4}  {'policy':<{width}}  {'score':>8}  {'se':>7}  {'95% interval':>17}  {'games':>5}  {'win rate':>8}")
    index = {name: k for k, name in enumerate(ranking.policies)}
    order = [index[str(row["policy"])] for row in ranking.table()]
    for rank, k in enumerate(order, start=1):
        played = int(games[k].sum())
        rate = f"{wins[k].sum() / played:.3f}" if played else "-"
        score, error = float(ranking.scores[k]), float(ranking.se[k])
        se = "-" if math.isnan(error) else f"{error:.3f}"
        low_high = "-" if math.isnan(error) else f"[{score - 1.96 * error:.3f}, {score + 1.96 * error:.3f}]"
        print(f"{rank:>4}  {ranking.policies[k]:<{width}}  {score:>8.3f}  {se:>7}  {low_high:>17}  {played:>5}  {rate:>8}")
    print("\nwin rate of the row policy against the column policy (games in parentheses; ties count 1/2):")
    cell = max(width, 10)
    print(" " * width + "".join(f"  {ranking.policies[k]:>{cell}}" for k in order))
    for k in order:
        cells = [f"{wins[k, c] / games[k, c]:.2f} ({games[k, c]})" if games[k, c] else "-" for c in order]
        print(f"{ranking.policies[k]:<{width}}" + "".join(f"  {text:>{cell}}" for text in cells))
    return 0
