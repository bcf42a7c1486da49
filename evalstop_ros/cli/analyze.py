"""``evalstop analyze``: replay a recorded paired comparison through a sequential test, reporting the first stop (seed 003 §IV).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from ..stats.methods import VALIDITY
from ..stats.registry import METHODS, run_test
from ..stats.sequential import Decision, SequentialResult
from ._common import CliError, add_alpha_alternative, bins_type, check_step_n_max, n_max_type, print_json, seed_type
from .data import PairedScores, load_pairs
from .step import fetch_table

DESCRIPTION = """\
Replay paired scores of policy A (baseline) and policy B (candidate) through a sequential
test, in collection order, and report the first decision, its trial and the p-value path.

The CSV is wide (header policy_a,policy_b, one row per trial; or any two columns named with
--columns A,B) or long (header trial,policy,score; pairs formed by trial id in order of first
appearance; --columns A,B picks and orients two policies).  Scores lie in [0, 1]."""
EPILOG = """\
examples:
  evalstop analyze examples/towel_like.csv --method step --alpha 0.05 --n-max 200
  evalstop analyze examples/progress_like.csv --method nscore --bins 21 --alpha 0.05 --alternative greater

The anytime p-value of a two-sided test is min(1, 2 min(p_greater, p_less)), each one-sided
p-value being 1 / (largest e-value so far) of its direction; the test stops where p <= alpha.

exit status: 0 done (whatever the decision), 2 usage or input error; 141 stdout closed early
(e.g. piped into head)."""
#: Human output shows every this-many-th trial of the p-value path, plus the last one.
TABLE_EVERY = 10


#: N-SCORE's bins when --bins is not given (binary success).
DEFAULT_BINS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop analyze``."""
    parser.add_argument("data", help="CSV file of paired scores (wide or long layout)")
    parser.add_argument("--method", choices=tuple(METHODS), required=True, help="sequential test")
    add_alpha_alternative(parser)
    parser.add_argument(
        "--n-max", type=n_max_type, default=None,
        help="horizon: required by step and lai; for nscore, wsr and savi an optional budget "
        "(default: all pairs)",
    )
    parser.add_argument("--seed", type=seed_type, default=0, help="STEP randomization seed, fixed before the data (default %(default)s)")
    parser.add_argument("--bins", type=bins_type, default=None,
                        help=f"N-SCORE score bins K (default {DEFAULT_BINS}: binary scores; for partial scores in "
                        "[0, 1] use 21, steps of 0.05, as the paper's N-SCORE_inf)")
    parser.add_argument("--wsr-c", type=float, default=0.95, dest="c", help="WSR bet cap c (default %(default)s)")
    parser.add_argument(
        "--columns", default=None, metavar="A,B",
        help="policy A and B: two column names (wide) or two policy labels (long)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _columns(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if len(names) != 2 or not all(names):
        raise CliError(f"--columns must be two comma-separated names A,B; found {text!r}")
    return names[0], names[1]


def run(args: argparse.Namespace) -> int:
    """Load the pairs, run the test, print the result; 0 on success."""
    check_step_n_max(args.method, args.n_max)
    data = load_pairs(args.data, _columns(args.columns))
    if args.bins is None:
        args.bins = DEFAULT_BINS
        _warn_partial_scores(args, data)
    if args.method == "step" and args.n_max is not None:
        fetch_table(args)  # a first synthesis shows its progress instead of sitting silent
    result = run_test(
        args.method, data.scores_a, data.scores_b, alpha=args.alpha, alternative=args.alternative,
        n_max=args.n_max, seed=args.seed, bins=args.bins, c=args.c,
    )
    if args.json:
        settings = {"n_max": args.n_max, "seed": args.seed, "bins": args.bins, "c": args.c}
        print_json({
            "data": data.describe(), "settings": settings, "result": result.to_dict(),
            "validity": VALIDITY[args.method],
        })
    else:
        print("\n".join(_report(data, result, args.n_max)))
    return 0


def _warn_partial_scores(args: argparse.Namespace, data: PairedScores) -> None:
    """One line on stderr when N-SCORE's default K = 2 meets scores other than 0 and 1: every
    partial score would fall into the lowest bin, silently (seed 003 Sec. IV: K bins of [0, 1])."""
    if args.method != "nscore":
        return
    scores = np.concatenate([data.scores_a, data.scores_b])
    partial = int(np.count_nonzero((scores != 0.0) & (scores != 1.0)))
    if partial:
        print(f"{args.prog}: warning: {partial} of {scores.size} scores are neither 0 nor 1, but the default "
              f"--bins {DEFAULT_BINS} counts only full successes (each partial score falls into the lowest bin); "
              "pass --bins 21 for scores in [0, 1] (or --bins K for K evenly spaced levels)", file=sys.stderr)


def _decision_line(data: PairedScores, result: SequentialResult, n_max: int | None) -> str:
    a, b = data.policy_a, data.policy_b
    if result.decision == Decision.B_BETTER:
        return f"decision: B_BETTER at trial {result.stopping_trial}: {b} is better than {a}"
    if result.decision == Decision.A_BETTER:
        return f"decision: A_BETTER at trial {result.stopping_trial}: {a} is better than {b}"
    if result.decision == Decision.BUDGET_EXHAUSTED:
        return f"decision: BUDGET_EXHAUSTED: no decision within n_max = {n_max} trials"
    return f"decision: CONTINUE: no decision after all {result.n_observed} pairs (the data ran out)"


def _number(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}g}"


def _report(data: PairedScores, result: SequentialResult, n_max: int | None) -> list[str]:
    from ..session.guarantees import method_guarantee  # here, not at the top: keeps `--help` fast

    summary = data.describe()
    lines = [
        f"{data.path}: {summary['n_pairs']} pairs ({data.layout}); A = {data.policy_a} "
        f"(mean {summary['mean_a']:.3f}), B = {data.policy_b} (mean {summary['mean_b']:.3f})",
        f"test: {result.method}, alpha {result.alpha:g}, {result.alternative} ({VALIDITY[result.method]})",
        _decision_line(data, result, n_max),
        f"guarantee: {method_guarantee(result.method, n_max=n_max)}",
    ]
    if result.n_observed == 0:
        return lines
    lines.append(f"{'trial':>6}  {'p-value':>10}  {'e-value':>10}")
    shown = [*range(TABLE_EVERY, result.n_observed, TABLE_EVERY), result.n_observed]
    for n in shown:
        mark = "  <- stop" if result.stopping_trial == n else ""
        lines.append(
            f"{n:>6}  {_number(result.pvalues[n - 1], 4):>10}  {_number(result.evalues[n - 1], 4):>10}{mark}"
        )
    if math.isnan(result.pvalue):
        lines.append(f"({result.method} defines no p-value or e-value)")
    return lines
