"""``evalstop adastop``: AdaStop over a CSV of scores collected interim by interim (seed 002; the CSV layout: docs/cli.md).
"""

from __future__ import annotations

import argparse
import csv

import numpy as np
from numpy.typing import NDArray

from ..limits import INTERIM_SIZE_LIMIT, INTERIMS_LIMIT, PERMUTATIONS_LIMIT
from ..stats.adastop import GUARANTEES, PERMUTATIONS, AdaStopResult, adastop_test
from ..stats.adastop_welch import spread_warning
from ..stats.families import comparison_pairs
from ._common import CliError, bounded_int, print_json, seed_type
from .data import parse_number

DESCRIPTION = """\
Run AdaStop (seed 002: group-sequential permutation test, linear alpha-spending over the
interims; by default closed testing over exact per-intersection permutation laws) on scores collected interim by interim: one column per agent, N rows per interim,
rows in interim order.  Each comparison ends 'larger', 'smaller' (rejected equality, the sign of
the mean difference) or 'equal' (not rejected after the last interim); 'continue' while the test
needs the next interim.  An agent whose comparisons are all decided stops early; its later cells
may be empty."""
EPILOG = """\
example:
  evalstop adastop examples/adastop_scores.csv --n-per-interim 5 --interims 6 --alpha 0.05 --permutations 10000

exit status: 0 done (finished or waiting for the next interim), 2 usage or input error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop adastop``."""
    parser.add_argument("scores", help="CSV file: header of agent names, one row per run, interim order")
    parser.add_argument("--n-per-interim", type=bounded_int(1, INTERIM_SIZE_LIMIT), required=True, metavar="N", help="scores per agent per interim")
    parser.add_argument("--interims", type=bounded_int(1, INTERIMS_LIMIT), required=True, metavar="K", help="maximum number of interims")
    parser.add_argument("--alpha", type=float, required=True, help="family-wise error level in (0, 1)")
    parser.add_argument(
        "--permutations", type=bounded_int(1, PERMUTATIONS_LIMIT), default=10_000, metavar="B",
        help="permutation paths per interim at most (default %(default)s)",
    )
    parser.add_argument("--seed", type=seed_type, default=0, help="seed of the random permutations (default %(default)s)")
    parser.add_argument(
        "--baseline", default=None, metavar="AGENT",
        help="compare every agent with AGENT only (default: all pairs)",
    )
    parser.add_argument(
        "--permutation", choices=PERMUTATIONS, default="closed",
        help="'closed' (family-wise error <= alpha whatever the agents' laws, unequal spreads included), "
        "'relabel' (exact when all agents are equal only) or 'split' (the paper's Eq. 8 read literally); "
        "see docs/adastop.md (default %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def load_scores(path: str) -> tuple[list[str], NDArray[np.float64]]:
    """Read the agent names and the ``(rows, agents)`` scores (NaN for empty cells)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    except OSError as err:
        raise CliError(f"cannot read {path!r}: {err.strerror}") from None
    if not rows:
        raise CliError(f"{path}: the file is empty; expected a header of agent names")
    header = [cell.strip() for cell in rows[0]]
    skip = 1 if header and header[0] == "" else 0  # pandas' unnamed index column
    names = header[skip:]
    if len(names) < 2 or not all(names):
        raise CliError(f"{path}, line 1: the header must name at least two agents; found {rows[0]!r}")
    if len(set(names)) != len(names):
        raise CliError(f"{path}, line 1: agent names must be distinct; found {names!r}")
    table = np.full((len(rows) - 1, len(names)), np.nan)
    for i, row in enumerate(rows[1:]):
        line = i + 2
        cells = row[skip:]
        if len(cells) > len(names):
            raise CliError(f"{path}, line {line}: {len(cells)} cells for {len(names)} agents; found {row!r}")
        for j, cell in enumerate(cells):
            if cell.strip():  # an empty cell: the agent had stopped
                table[i, j] = parse_number(cell, f"{path}, line {line}, agent {names[j]!r}")
    return names, table


def run(args: argparse.Namespace) -> int:
    """Load the scores, run AdaStop, print the result; 0 on success."""
    names, table = load_scores(args.scores)
    comparisons = None
    if args.baseline is not None:
        if args.baseline not in names:
            raise CliError(f"--baseline must be one of the agents {names}; found {args.baseline!r}")
        index = {name: i for i, name in enumerate(names)}
        comparisons = [(index[c.policy_a], index[c.policy_b])
                       for c in comparison_pairs(names, design="vs-baseline", baseline=args.baseline)]
    result = adastop_test(
        table, n_per_interim=args.n_per_interim, n_interims=args.interims, alpha=args.alpha,
        comparisons=comparisons, n_permutations=args.permutations, seed=args.seed, agent_names=names,
        permutation=args.permutation,
    )
    warning = spread_warning(table, result.n_scores, result.agents, result.comparisons)
    if args.json:
        payload = result.to_dict()
        payload["path"] = args.scores
        payload["permutation"] = args.permutation
        payload["letters"] = result.letters() if result.is_finished else None
        payload["guarantee"] = GUARANTEES[args.permutation]
        payload["warnings"] = [warning] if warning else []
        print_json(payload)
    else:
        lines = _report(args.scores, result)
        lines.append(f"guarantee ({args.permutation}): {GUARANTEES[args.permutation]}")
        print("\n".join([*lines, warning] if warning else lines))
    return 0


def _report(path: str, result: AdaStopResult) -> list[str]:
    status = (
        f"finished after interim {result.interim}" if result.is_finished
        else f"undecided after interim {result.interim}; next interim needs {', '.join(result.active_agents)}"
    )
    lines = [
        f"{path}: {len(result.agents)} agents, N = {result.n_per_interim}, K = {result.n_interims}, "
        f"alpha = {result.alpha:g}: {status}",
        f"{'comparison':<30} {'decision':<9} {'interim':>7} {'mean diff':>12}",
    ]
    for (l1, l2), decision, at, diff in zip(result.comparisons, result.decisions, result.decided_at,
                                            result.mean_differences):
        pair = f"{result.agents[l1]} vs {result.agents[l2]}"
        lines.append(f"{pair:<30} {decision:<9} {at if at else '-':>7} {diff:12.4g}")
    lines.append(f"{'agent':<20} {'scores':>6} {'mean':>12}  letters")
    letters = result.letters() if result.is_finished else {}
    for i, name in enumerate(result.agents):
        lines.append(f"{name:<20} {result.n_scores[i]:>6} {result.means[i]:12.4g}  {letters.get(name, '')}")
    early = ", ".join(
        f"{name} (after interim {result.last_interim[result.agents.index(name)]})" for name in result.stopped_early
    )
    lines.append(f"stopped early: {early or 'none'}")
    spent = result.level_spent[-1] if result.level_spent else 0.0
    lines.append(f"level spent: {spent:.4g} of {result.alpha:g}")
    from ..session.guarantees import method_guarantee  # here, not at the top: keeps `--help` fast

    lines.append(f"guarantee: {method_guarantee('adastop', interims=(result.n_per_interim, result.n_interims))}")
    return lines
