"""``evalstop step synthesize|check|oc``: STEP decision tables, their Type-I check and exact OC (seed 003 §IV, Eqs. 7-10).

Same ``--alpha``/``--alternative`` as ``evalstop analyze``, so synthesizing with the analysis's flags
fetches the table it will use.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from ..stats.step import (
    StepTable,
    check_type1,
    load_table,
    operating_characteristics,
    synthesize_table,
    table_alpha,
)
from ..stats.step_table import cache_dir, find_table
from ..stats.validation import check_alpha, check_alternative
from . import EXIT_CHECK_FAILED, EXIT_OK
from ._common import (
    add_alpha_alternative,
    check_step_n_max,
    count_type,
    n_max_type,
    print_json,
    progress_bar,
    step_callback,
)
from ._estimates import announce, step_check_seconds, step_synthesis_seconds

DESCRIPTION = """\
STEP decision tables: synthesize one into the user cache, check its exact worst-case Type-I
error, or compute its exact power and expected stopping time at (p0, p1); `check` and `oc`
synthesize and cache a missing table first.  --alpha and --alternative mean what they mean
for `evalstop analyze --method step`: a two-sided test at alpha uses the table at alpha/2
per direction."""
#: One example per sub-verb: in its own --help and, all three, in ``evalstop step --help``.
EXAMPLES = {
    "synthesize": "evalstop step synthesize --n-max 100 --alpha 0.05",
    "check": "evalstop step check --n-max 100 --alpha 0.05 --grid-size 1000",
    "oc": "evalstop step oc --n-max 100 --alpha 0.05 --p0 0.35 --p1 0.65",
}
EPILOG = ("examples:\n" + "".join(f"  {example}\n" for example in EXAMPLES.values())
          + "\nexit status: 0 done, 1 `check` found max Type-I error > alpha, 2 usage or input error.")


def _verb(verbs: Any, name: str, run: Callable[[argparse.Namespace], int], help: str, description: str
          ) -> argparse.ArgumentParser:
    """The sub-verb ``name`` (running ``run``) with the options every sub-verb takes: --n-max,
    --alpha/--alternative, --json; its example (:data:`EXAMPLES`) ends its --help."""
    parser: argparse.ArgumentParser = verbs.add_parser(
        name, help=help, description=description, epilog=f"example:\n  {EXAMPLES[name]}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--n-max", type=n_max_type, required=True, help="horizon N_max (trials per policy)")
    add_alpha_alternative(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(step_run=run)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``evalstop step`` and its three sub-verbs."""
    verbs = parser.add_subparsers(dest="step_verb", metavar="{synthesize,check,oc}", required=True)
    synthesize = _verb(verbs, "synthesize", _synthesize, "synthesize a table into the user cache",
                       "Synthesize the STEP table for (n_max, alpha) and write it to the user cache.")
    synthesize.add_argument("--force", action="store_true", help="synthesize even if the table is shipped or cached")
    check = _verb(verbs, "check", _check, "exact worst-case Type-I error over a dense null grid",
                  "Compute P(false claim) exactly at GRID_SIZE null points p0 = p1 and report the "
                  "maximum (states of negligible mass, below 1e-15, are counted as false claims: an "
                  "upper bound); exit 1 if it exceeds the table's alpha.")
    check.add_argument("--grid-size", type=count_type, default=1000, help="null points checked (default %(default)s)")
    oc = _verb(verbs, "oc", _oc, "exact power and expected stopping time at (p0, p1)",
               "Exact P(B better), P(A better) and E[min(stop, n_max)] by forward propagation.")
    oc.add_argument("--p0", type=float, required=True, help="success probability of policy A")
    oc.add_argument("--p1", type=float, required=True, help="success probability of policy B")


def run(args: argparse.Namespace) -> int:
    """Dispatch to the sub-verb."""
    check_step_n_max("step", args.n_max)
    return int(args.step_run(args))


def _level(args: argparse.Namespace) -> float:
    return table_alpha(check_alpha(args.alpha), check_alternative(args.alternative))


def fetch_table(args: argparse.Namespace) -> StepTable:
    """The table for ``args.n_max``/``alpha``/``alternative``: shipped, cached, or synthesized now.

    A synthesis (minutes at ``n_max = 500``) shows a progress bar on a terminal unless
    ``args.json``; `analyze` and `simulate` call this first so that they do not sit silent.
    """
    if find_table(args.n_max, _level(args)) is None:
        announce(args.prog, step_synthesis_seconds(args.n_max), f"a STEP table for n_max {args.n_max} is "
                 "synthesized once, then cached")
    with progress_bar(not args.json, args.n_max, "step") as bar:
        return load_table(args.n_max, _level(args), progress=step_callback(bar))


def _describe(table: StepTable, args: argparse.Namespace) -> dict[str, object]:
    return {
        "n_max": table.n_max,
        "table_alpha": table.alpha,
        "alpha": args.alpha,
        "alternative": args.alternative,
        "param_hash": table.param_hash,
    }


def _title(table: StepTable, args: argparse.Namespace) -> str:
    return (
        f"STEP table n_max {table.n_max}, alpha {table.alpha:g} per direction "
        f"({args.alternative} test at {args.alpha:g}), hash {table.param_hash[:12]}"
    )


def _synthesize(args: argparse.Namespace) -> int:
    level = _level(args)
    existing = None if args.force else find_table(args.n_max, level)
    start = time.perf_counter()
    if existing is not None:
        table, path = StepTable.load(existing), existing
    else:
        announce(args.prog, step_synthesis_seconds(args.n_max), f"synthesis at n_max {args.n_max}; scales as n_max^3")
        with progress_bar(not args.json, args.n_max, "step") as bar:
            table = synthesize_table(args.n_max, level, progress=step_callback(bar))
        path = table.save(cache_dir())
    seconds = time.perf_counter() - start
    if args.json:
        print_json({**_describe(table, args), "path": str(path), "seconds": seconds, "synthesized": existing is None})
    else:
        print(_title(table, args))
        print(f"{'synthesized' if existing is None else 'already present'}: {path}")
        print(f"param_hash {table.param_hash}")
        print(f"time {seconds:.1f} s")
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    table = fetch_table(args)
    announce(args.prog, step_check_seconds(args.n_max, args.grid_size),
             f"exact check of {args.grid_size} null points at n_max {args.n_max}; scales as grid x n_max^2")
    with progress_bar(not args.json, args.grid_size, "point") as bar:
        report = check_type1(table, grid_size=args.grid_size, progress=step_callback(bar))
    if args.json:
        print_json({
            **_describe(table, args), "grid_size": report.grid_size, "max_fpr": report.max_fpr,
            "argmax_p": report.argmax_p, "passes": report.passes,
        })
    else:
        print(_title(table, args))
        print(f"max P(false claim, one direction) over {report.grid_size} null points p0 = p1: "
              f"{report.max_fpr:.6f} at p = {report.argmax_p:.4f}")
        verdict = "PASS" if report.passes else "FAIL"
        print(f"{verdict}: bound alpha = {report.alpha:g}")
    return EXIT_OK if report.passes else EXIT_CHECK_FAILED


def _oc(args: argparse.Namespace) -> int:
    table = fetch_table(args)
    oc = operating_characteristics(table, args.p0, args.p1)
    values = {
        "p0": float(oc.p0[0]), "p1": float(oc.p1[0]),
        "power_b_better": float(oc.power_b_better[0]), "power_a_better": float(oc.power_a_better[0]),
        "expected_stop": float(oc.expected_stop[0]),
    }
    if args.json:
        print_json({**_describe(table, args), **values})
    else:
        print(_title(table, args))
        print(f"at p0 = {values['p0']:g}, p1 = {values['p1']:g} (exact):")
        print(f"P(B better)  {values['power_b_better']:.4f}")
        print(f"P(A better)  {values['power_a_better']:.4f}")
        print(f"E[stop]      {values['expected_stop']:.2f} trials (undecided count as n_max)")
    return EXIT_OK
