"""``evalstop rank``: a global policy ranking from pairwise A/B comparisons (seed 001 Sec. 3.2).

A thin layer over :mod:`evalstop_ros.stats.ranking` (BT, Davidson, Elo, PROG) and
:mod:`evalstop_ros.stats.ranking_task` (the task-aware model).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
from typing import TYPE_CHECKING, Any

from ..limits import COUNT_LIMIT
from ..stats.errors import StatsInputError
from ._common import CliError, bounded_int, print_json, seed_type

if TYPE_CHECKING:  # the models load with scipy when a ranking is fitted, not for --help
    from ..stats.ranking import Comparisons, Ranking
    from .ab_data import ABTable

HELP = "rank policies from pairwise A/B comparisons (BT, Davidson, Elo, PROG, paired progress, task-aware)"
DESCRIPTION = """\
Fit a ranking model to A/B comparisons and print the leaderboard: score, standard error and
rank per policy (best first).  RESULTS is a CSV with the header
policy_a,policy_b,preference,progress_a,progress_b[,task][,valid]: preference A, B or tie,
progress on the 0-100 scale (empty = not recorded), valid 1/0 (only valid pairs count);
or a hub's journal export (`evalstop hub export`, JSON lines: each result's higher score
preferred, scores as progress, its task); or the journal (.db) or a rosbag of a `design: ab`
session (complete rounds only).

models (seed 001, RoboArena, Sec. 3.2 and App. B):
  bt        Bradley-Terry MLE with L2 (ties = half a win); score = log-ability, sum 0
  davidson  BT with Davidson ties (the released leaderboard's model); score = log-ability, sum 0
  elo       one Elo pass in file order; SE by bootstrap
  prog      mean progress per policy in [0, 1] (progress averaging)
  paired    least squares on the within-pair progress differences; score = progress relative to
            the pool average (an evaluator's calibration offset cancels within the pair)
  task      the paper's task-aware model (latent task buckets, EM of App. B); score = theta;
            SE by bootstrap over comparisons (--n-boot, default 50 EM refits; slow on large files)

which model (docs/ranking_study.md: 4 worlds x 200/1000/5000 comparisons): paired is the default,
never far from the best and immune to graders who see some policies more than others; prog is
best when every evaluator grades all policies alike, and collapses when not; bt/davidson need
no progress scores; task is slow (its bootstrap) and nowhere clearly better; elo is never best.

intervals: score -+ z(level) se, with Student's t instead of z for bt, davidson and paired
(Satterthwaite df of their small-sample-corrected sandwich SE, with the residuals' kurtosis;
small for rarely compared policies); prog uses the symmetric bootstrap-t (each policy's rollouts
resampled --n-boot times, default 999; progress is skewed near 0 and 1, and the t interval is
short there; Hall's skewness-corrected t with --n-boot 0 or 2-3 rollouts).  Every model's intervals are checked by simulation to cover
at the printed level, at 200 comparisons as at 5000 (docs/ranking.md); --n-boot 0 with the task
model falls back to an SE that is too narrow, and then no interval is printed."""
EPILOG = """\
example:
  evalstop rank examples/arena_ab.csv --json
  evalstop rank examples/arena_ab.csv --model prog --level 0.9

--json keys: model; n_comparisons, n_invalid (rows or rounds set aside); data_note (how the data
were read, e.g. preferences derived from the scores of an auto-scored A/B session; "" if
nothing to say); params (the model's fitted constants); ranking (best first: policy, score, se,
rank, low, high: the interval, null where none is printed); interval (level, se_method,
calibrated); win_rates (policies, wins, games: row against column, ties 1/2); n_notes (the
operator's explanations per policy; --notes adds notes, the texts); categories (--categories).

exit status: 0 ranking printed, 2 usage or input error."""
MODELS = ("bt", "davidson", "elo", "prog", "paired", "task")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop rank``."""
    parser.add_argument("results", help="CSV of A/B comparisons, a hub export (.jsonl), or an A/B session's journal "
                        "(.db) or rosbag")
    parser.add_argument("--model", choices=MODELS, default="paired",
                        help="ranking model (default %(default)s: the study in docs/ranking_study.md)")
    parser.add_argument("--l2", type=float, default=1e-2, help="L2 penalty of bt and davidson (default %(default)s)")
    parser.add_argument("--elo-k", type=float, default=None, help="Elo K-factor in log-odds units (default: chess's 32 points)")
    parser.add_argument("--buckets", type=bounded_int(1, 1000), default=None,
                        help="task model: latent task buckets T (default 60, App. B.6)")
    parser.add_argument("--partial-weight", type=float, default=1.0,
                        help="task model: weight of the progress scores (App. B.4; 0 = preferences only; "
                        "default %(default)s)")
    parser.add_argument("--n-boot", type=bounded_int(0, COUNT_LIMIT), default=None,
                        help="bootstrap resamples for the SE (elo default 200; task default 50; task 0 = the "
                        "conditional information SE, too narrow, no interval printed) or, for prog, for its "
                        "bootstrap-t interval (default 999; 0 = Hall's skewness-corrected t)")
    parser.add_argument("--level", type=float, default=0.95,
                        help="confidence level of the printed intervals, in (0, 1) (default %(default)s)")
    parser.add_argument("--seed", type=seed_type, default=0, help="seed of the EM start and the bootstrap (default %(default)s)")
    parser.add_argument("--categories", action="store_true",
                        help="sort the task instructions into the paper's 11 categories with the bundled sentence "
                        "model and add per-category win rates and progress per policy (needs evalstop[categories])")
    parser.add_argument("--category-map", metavar="YAML", default=None,
                        help="the operator's confirmed categories, instruction: category (they override the model)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table (keys below)")
    parser.add_argument("--notes", action="store_true", help="with --json: add the operator's explanations per "
                        "policy (key notes; by default only their count, n_notes)")


def fit(data: Comparisons, args: argparse.Namespace) -> Ranking:
    """The ranking of ``data`` by ``args.model`` with the options of ``args``."""
    from ..stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
    from ..stats.ranking_task import TaskModelOptions, fit_task

    if args.model == "bt":
        return fit_bt(data, l2=args.l2)
    if args.model == "davidson":
        return fit_davidson(data, l2=args.l2)
    if args.model == "elo":
        options: dict[str, Any] = {"seed": args.seed, "n_boot": 200 if args.n_boot is None else args.n_boot}
        return fit_elo(data, **options, **({} if args.elo_k is None else {"k": args.elo_k}))
    if args.model == "prog":
        return fit_prog(data, seed=args.seed, **({} if args.n_boot is None else {"n_boot": args.n_boot}))
    if args.model == "paired":
        return fit_paired_progress(data)
    task = TaskModelOptions(
        partial_weight=args.partial_weight, seed=args.seed,
        **({} if args.n_boot is None else {"n_boot": args.n_boot}),
        **({} if args.buckets is None else {"n_buckets": args.buckets}),
    )
    step = max(1, task.n_boot // 10)

    def report(done: int, total: int) -> None:  # the table's readers see progress; --json keeps stderr clean
        if not args.json and (done % step == 0 or done == total):
            print(f"task model: bootstrap refit {done}/{total}", file=sys.stderr, flush=True)

    return fit_task(data, task, progress=report).ranking


def _categories(table: ABTable, args: argparse.Namespace) -> dict[str, Any] | None:
    """Per-category assignments, rates and notes (``--categories``), or ``None``."""
    if not args.categories:
        return None
    import yaml  # type: ignore[import-untyped, unused-ignore]

    from ..report.categories import Categorizer, CategoryError
    from ..stats.ranking_groups import group_summary

    overrides: dict[str, str] = {}
    if args.category_map:
        try:
            loaded = yaml.safe_load(pathlib.Path(args.category_map).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as err:
            raise CliError(f"cannot read {args.category_map}: {err}") from err
        if not isinstance(loaded, dict):
            raise CliError(f"{args.category_map}: expected a mapping instruction: category")
        overrides = {str(k): str(v) for k, v in loaded.items()}
    try:
        guesses = Categorizer().assign(list(table.data.tasks), overrides)
    except CategoryError as err:
        raise CliError(str(err)) from err
    groups = [g.category for g in guesses]
    notes: dict[str, dict[str, list[str]]] = {}
    for n, (group, text) in enumerate(zip(groups, table.explanations)):
        if text:
            for k in (table.data.i[n], table.data.j[n]):
                notes.setdefault(group, {}).setdefault(table.data.policies[int(k)], []).append(text)
    unique = {g.instruction: g for g in guesses}
    return {
        "assignments": [{"instruction": g.instruction, "category": g.category, "similarity": round(g.similarity, 4),
                         "confirmed": g.confirmed} for g in unique.values()],
        "rates": [{key: (None if isinstance(value, float) and math.isnan(value) else value)
                   for key, value in dataclasses.asdict(row).items()} for row in group_summary(table.data, groups)],
        "notes": notes,
    }


def run(args: argparse.Namespace) -> int:
    """Load the comparisons, fit the model, print the leaderboard; 0 on success."""
    from scipy.stats import norm

    from .ab_data import load_ab

    if not 0.0 < args.level < 1.0:
        raise CliError(f"--level must lie in (0, 1); found {args.level!r}")
    table = load_ab(args.results)
    try:
        ranking = fit(table.data, args)
    except StatsInputError as err:
        raise CliError(str(err)) from err
    low, high = ranking.interval(args.level)
    shown = ranking.calibrated
    wins, games = table.data.win_matrix()
    categories = _categories(table, args)
    index = {name: k for k, name in enumerate(ranking.policies)}
    if args.json:
        print_json({
            **({} if categories is None else {"categories": categories}),
            "model": ranking.model,
            "n_comparisons": len(table.data),
            "n_invalid": table.n_invalid,
            "params": {key: value for key, value in ranking.params.items() if math.isfinite(value)},
            "ranking": [
                {**row, **({"low": _finite(low[index[str(row["policy"])]]), "high": _finite(high[index[str(row["policy"])]])}
                           if shown else {"low": None, "high": None})}
                for row in ranking.table()
            ],
            "interval": {"level": args.level, "se_method": ranking.se_method, "calibrated": shown},
            "win_rates": {"policies": list(ranking.policies), "wins": wins.tolist(), "games": games.tolist()},
            "n_notes": {policy: len(notes) for policy, notes in table.notes_by_policy().items()},
            **({"notes": table.notes_by_policy()} if args.notes else {}),
            "data_note": table.note,
        })
        return 0
    print(f"{table.path}: {len(table.data)} valid comparisons of {table.data.n_policies} policies "
          f"({table.n_invalid} invalid set aside); model {ranking.model}")
    if table.note:
        print(f"note: {table.note}")
    width = max(len("policy"), *(len(name) for name in ranking.policies))
    heading = f"{_percent(args.level)} interval" if shown else "no interval"
    print(f"{'rank':>4}  {'policy':<{width}}  {'score':>8}  {'se':>7}  {heading:>17}  {'games':>5}  {'win rate':>8}")
    order = [index[str(row["policy"])] for row in ranking.table()]
    for rank, k in enumerate(order, start=1):
        played = int(games[k].sum())
        rate = f"{wins[k].sum() / played:.3f}" if played else "-"
        score, error = float(ranking.scores[k]), float(ranking.se[k])
        se = "-" if math.isnan(error) else f"{error:.3f}"
        low_high = "-" if math.isnan(error) or not shown else f"[{low[k]:.3f}, {high[k]:.3f}]"
        print(f"{rank:>4}  {ranking.policies[k]:<{width}}  {score:>8.3f}  {se:>7}  {low_high:>17}  {played:>5}  {rate:>8}")
    if shown:
        z = float(norm.ppf(0.5 + args.level / 2.0))
        quantile = f"{z:.2f}" if ranking.df is None else f"t(df) (Student t, each policy's df; {z:.2f} as df grows)"
        form = (f"score -+ {quantile} se" if ranking.skewness is None
                else "score -+ q se, q each policy's bootstrap-t quantile of |score - mean| / se "
                "(Hall's skewness-corrected t where too few rollouts)" if ranking.boot_t is not None
                else "Hall's skewness-corrected t on score and se (asymmetric; each policy's df)")
        print(f"\n{_percent(args.level)} intervals: {form}, se by {ranking.se_method}; "
              "coverage checked by simulation (docs/ranking.md)")
    else:
        print(f"\nno intervals: se by {ranking.se_method}; it covers only ~80 % where a 95 % interval is claimed "
              "(docs/ranking.md); use --n-boot 100 for calibrated intervals")
    print("\nwin rate of the row policy against the column policy (games in parentheses; ties count 1/2):")
    cell = max(width, 10)
    print(" " * width + "".join(f"  {ranking.policies[k]:>{cell}}" for k in order))
    for k in order:
        cells = [f"{wins[k, c] / games[k, c]:.2f} ({games[k, c]})" if games[k, c] else "-" for c in order]
        print(f"{ranking.policies[k]:<{width}}" + "".join(f"  {text:>{cell}}" for text in cells))
    if categories is not None:
        print("\nper task category (anytime-valid 95% intervals): policy  games  win rate [interval]  progress [interval]")
        for row in categories["rates"]:
            def band(mean: float | None, low: float | None, high: float | None) -> str:
                return "-" if mean is None else f"{mean:.2f} [{low:.2f}, {high:.2f}]"
            print(f"  {row['group']:<24} {row['policy']:<{width}}  {row['games']:>5}  "
                  f"{band(row['win_rate'], row['win_low'], row['win_high']):>18}  "
                  f"{band(row['progress'], row['progress_low'], row['progress_high']):>18}")
    return 0


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _percent(level: float) -> str:
    """``0.95`` -> ``95%``, ``0.975`` -> ``97.5%``."""
    return f"{100.0 * level:.4g}%"
