"""``evalstop simulate``: Monte Carlo power, false-claim rate and stopping time of a test.

A thin layer over :func:`evalstop_ros.stats.simulate.monte_carlo` with processes from
:func:`evalstop_ros.stats.registry.make_process`.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from ..limits import REPS_LIMIT
from ..stats.registry import METHODS, make_process
from ..stats.sequential import PairedProcess
from ..stats.simulate import ScoreModel, SimulationSummary, bernoulli, continuous_beta, monte_carlo, partial_credit
from ._common import (
    CliError,
    add_alpha_alternative,
    bins_type,
    bounded_int,
    check_step_n_max,
    float_list,
    n_max_type,
    print_json,
    seed_type,
)
from ._estimates import ANNOUNCE_SECONDS, ProgressLines, announce, simulate_seconds
from .step import fetch_table

DESCRIPTION = """\
Simulate REPS paired sequences of N_MAX trials from a score model and run the test on each.
Power is P(correct directional claim) (undefined, printed as '-', when the means are equal);
FPR is P(false claim): any claim under equal means, the wrong direction otherwise.  E[stop]
counts sequences that reach n_max undecided as n_max.

Score models (--dist):
  bernoulli  success/failure with P(success) --p0 (A) and --p1 (B)
  partial    K score --levels with probabilities --probs-a and --probs-b
  beta       Beta scores with means --mean-a, --mean-b and --concentration"""
EPILOG = """\
example:
  evalstop simulate --method nscore --p0 0.3 --p1 0.5 --n-max 200 --alpha 0.05 --reps 1000

exit status: 0 done, 2 usage or input error."""
#: The model options of each --dist, as argparse dests.
DIST_OPTIONS = {
    "bernoulli": ("p0", "p1"),
    "partial": ("levels", "probs_a", "probs_b"),
    "beta": ("mean_a", "mean_b", "concentration"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop simulate``."""
    parser.add_argument("--method", choices=tuple(METHODS), required=True, help="sequential test")
    add_alpha_alternative(parser)
    parser.add_argument("--n-max", type=n_max_type, required=True, help="trials per sequence (the test's budget)")
    parser.add_argument("--reps", type=bounded_int(1, REPS_LIMIT), required=True, help="number of simulated sequences")
    parser.add_argument("--seed", type=seed_type, default=0, help="seed of numpy.random.default_rng (default %(default)s)")
    parser.add_argument("--dist", choices=tuple(DIST_OPTIONS), default="bernoulli", help="score model (default %(default)s)")
    model = parser.add_argument_group("score model")
    model.add_argument("--p0", type=float, help="bernoulli: success probability of policy A")
    model.add_argument("--p1", type=float, help="bernoulli: success probability of policy B")
    model.add_argument("--levels", type=float_list, help="partial: score levels, e.g. 0,0.5,1")
    model.add_argument("--probs-a", type=float_list, help="partial: level probabilities of policy A")
    model.add_argument("--probs-b", type=float_list, help="partial: level probabilities of policy B")
    model.add_argument("--mean-a", type=float, help="beta: mean score of policy A")
    model.add_argument("--mean-b", type=float, help="beta: mean score of policy B")
    model.add_argument("--concentration", type=float, help="beta: a + b of each Beta law")
    parser.add_argument("--bins", type=bins_type, default=2, help="N-SCORE score bins K (default %(default)s)")
    parser.add_argument("--wsr-c", type=float, default=0.95, dest="c", help="WSR bet cap c (default %(default)s)")
    parser.add_argument("--chunk", type=bounded_int(1, REPS_LIMIT), default=None, help="sequences simulated at once (default: about 2M scores)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")


def _model(args: argparse.Namespace) -> ScoreModel:
    for dist, names in DIST_OPTIONS.items():
        for name in names:
            given = getattr(args, name) is not None
            if dist == args.dist and not given:
                raise CliError(f"--dist {dist} needs --{name.replace('_', '-')}")
            if dist != args.dist and given:
                raise CliError(f"--{name.replace('_', '-')} applies only to --dist {dist}")
    if args.dist == "bernoulli":
        return bernoulli(args.p0, args.p1)
    if args.dist == "partial":
        return partial_credit(args.levels, args.probs_a, args.probs_b)
    return continuous_beta(args.mean_a, args.mean_b, args.concentration)


def run(args: argparse.Namespace) -> int:
    """Build the model and the processes, simulate, print the summary; 0 on success."""
    check_step_n_max(args.method, args.n_max)
    model = _model(args)
    seconds = simulate_seconds(args.method, args.n_max, args.reps, args.bins)
    announce(args.prog, seconds, f"{args.reps} sequences x {args.n_max} pairs of {args.method}")
    # a bar on a terminal; in a log, a line per tenth of the work once the job is long enough to announce
    progress: bool | ProgressLines = (True if sys.stderr.isatty() else
                                      ProgressLines(args.prog, "pairs") if seconds >= ANNOUNCE_SECONDS else False)
    if args.method == "step":
        fetch_table(args)  # a first synthesis shows its progress instead of sitting silent

    def factory(n_sequences: int, seed: int) -> PairedProcess:
        return make_process(
            args.method, n_sequences, alpha=args.alpha, alternative=args.alternative,
            n_max=args.n_max, seed=seed, bins=args.bins, c=args.c,
        )

    summary = monte_carlo(
        factory, model, reps=args.reps, n_max=args.n_max, rng=np.random.default_rng(args.seed),
        chunk=args.chunk, progress=progress,
    )
    if args.json:
        settings = {
            "method": args.method, "alpha": args.alpha, "alternative": args.alternative,
            "seed": args.seed, "bins": args.bins, "c": args.c, "chunk": args.chunk,
        }
        print_json({"model": model.to_dict(), "settings": settings, "summary": summary.to_dict()})
    else:
        print("\n".join(_report(args, model, summary)))
    return 0


def _estimate(value: float, se: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f} ± {se:.{digits}f}"


def _report(args: argparse.Namespace, model: ScoreModel, summary: SimulationSummary) -> list[str]:
    wrong = "any claim (equal means)" if model.is_null else "wrong-direction claim"
    return [
        f"{args.method} ({args.alternative}, alpha {args.alpha:g}) on {model.name}",
        f"{summary.reps} sequences of n_max = {summary.n_max} trials, seed {args.seed}",
        f"power    {_estimate(summary.power, summary.power_se):<16}  P(correct directional claim)",
        f"FPR      {_estimate(summary.fpr, summary.fpr_se):<16}  P({wrong})",
        f"E[stop]  {_estimate(summary.mean_ttd, summary.ttd_se, 1):<16}  trials; undecided count as n_max",
    ]
