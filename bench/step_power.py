#!/usr/bin/env python3
"""STEP power and E[stop]: our shipped tables beside the STEP authors' package, exactly.

For every shipped design (N_max in 50, 100, 200, 500 x alpha in 0.05, 0.025, 0.01, 0.005) the
reference policy is synthesized by ``run_step_policy_synthesis`` of ``sequentialized-barnard-tests``
0.0.9 (scratch venv, ``_reference.py``; with the shape parameters of its own script) and exported
once to ``bench/.reference-step-policies/`` (ignored by git).  Its policy is read into a
:class:`~evalstop_ros.stats.step_table.StepTable` (the package stores, per step ``n`` and
``S0 = a``, the largest ``S1`` that continues and the fractional weights above it; see
:func:`reference_table`) so that both tables go through the same exact forward propagation
(:func:`~evalstop_ros.stats.step_oc.operating_characteristics`, no Monte Carlo): power, E[min(tau,
N_max)] at the alternatives below, and the max Type-I error over 1000 diagonal nulls.

Writes ``docs/step_power.md``.  Run: ``.venv/bin/python bench/step_power.py`` (the reference
synthesis at N_max = 500 takes ~6 min per alpha the first time; ``--n-max 50 100`` for a quick run).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np
from _reference import reference_python, run_json

from evalstop_ros.stats.step_oc import check_type1, operating_characteristics
from evalstop_ros.stats.step_table import StepTable, load_table

#: The alternatives of issue 14 and the seed's Fig. 4-8 corners.
ALTERNATIVES = [(0.3, 0.5), (0.05, 0.15), (0.45, 0.55), (0.35, 0.65), (0.2, 0.4), (0.1, 0.3), (0.8, 0.95)]
ALPHAS = (0.05, 0.025, 0.01, 0.005)
CACHE = pathlib.Path(__file__).with_name(".reference-step-policies")
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "step_power.md"

EXPORT = """
import contextlib, io, json, sys
from sequentialized_barnard_tests.scripts.synthesize_general_step_policy import run_step_policy_synthesis
n_max, alpha, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
# the shape parameters its own script uses for these N_max
shape = {100: (2.1, 1.4), 200: (2.1, 1.15), 300: (2.1, 1.4), 400: (2.1, 1.4), 500: (2.2, 1.35)}
lam, axis = shape.get(n_max, (2.1, 1.4))
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    policy, _, _ = run_step_policy_synthesis(n_max, alpha, 129, lam, axis)
with open(out, "w") as handle:
    json.dump([[[float(v) for v in row] for row in step] for step in policy], handle)
print(json.dumps({"steps": len(policy)}))
"""


def reference_policy(python: pathlib.Path, n_max: int, alpha: float) -> list[list[list[float]]]:
    """The reference package's compressed policy for ``(n_max, alpha)``, synthesized once."""
    path = CACHE / f"n{n_max}_a{alpha:g}.json"
    if not path.exists():
        print(f"synthesizing the reference policy N_max {n_max}, alpha {alpha:g} ...", file=sys.stderr, flush=True)
        CACHE.mkdir(exist_ok=True)
        run_json(python, EXPORT, str(n_max), str(alpha), str(path.with_suffix(".tmp")))
        path.with_suffix(".tmp").replace(path)
    policy: list[list[list[float]]] = json.loads(path.read_text())
    return policy


def reference_table(policy: list[list[list[float]]], n_max: int, alpha: float) -> StepTable:
    """The reference policy as our table: at step ``n`` and ``S0 = a`` its row ``[c, w_1..w_L]``
    means continue for ``S1 <= c``, reject with probability ``w_k`` at ``S1 = c + k``, and reject
    for ``S1 > c + L`` (the accept region is the mirror, as in ours)."""
    regions = []
    for n in range(1, n_max + 1):
        region = np.ones((n + 1, n))
        for a, row in enumerate(policy[n]):
            continue_up_to, fractional = int(row[0]), np.asarray(row[1:])
            s1 = a + np.arange(1, n + 1)  # gaps 1..n
            inside = (s1 > continue_up_to) & (s1 <= continue_up_to + fractional.size)
            region[a, s1 <= continue_up_to] = 0.0
            region[a, inside] = fractional[s1[inside] - continue_up_to - 1]
        regions.append(region)
    return StepTable.from_regions(n_max, alpha, regions, 129)


def compare(ours: StepTable, ref: StepTable) -> tuple[list[str], list[float]]:
    """Markdown rows for one design, and ours minus the reference's power per alternative."""
    p0, p1 = (np.array([pair[i] for pair in ALTERNATIVES]) for i in (0, 1))
    rows, gains = [], []
    type1 = [check_type1(table, grid_size=1000).max_fpr for table in (ours, ref)]
    oc = [operating_characteristics(table, p0, p1) for table in (ours, ref)]
    for i, (a, b) in enumerate(ALTERNATIVES):
        power, stop = [o.power_b_better[i] for o in oc], [o.expected_stop[i] for o in oc]
        gains.append(power[0] - power[1])
        mark = "" if power[0] >= power[1] else " **(below)**"
        rows.append(f"| ({a}, {b}) | {power[0]:.4f} | {power[1]:.4f}{mark} | {stop[0]:.2f} | {stop[1]:.2f} |")
    rows.append(f"| max Type-I, 1000 diagonal nulls | {type1[0]:.5f} | {type1[1]:.5f} | | |")
    return rows, gains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-max", type=int, nargs="+", default=[50, 100, 200, 500])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/step_power.md alone")
    args = parser.parse_args()
    python = reference_python()
    lines = ["# STEP power: our tables beside the reference package (generated by bench/step_power.py)", "",
             "Exact forward propagation of both tables (no Monte Carlo). Reference: `sequentialized-barnard-tests` "
             "0.0.9, synthesized with its own script's parameters.", ""]
    blocks, gains = [], []
    for n_max in args.n_max:
        for alpha in ALPHAS:
            ours = load_table(n_max, alpha, synthesize=False)
            ref = reference_table(reference_policy(python, n_max, alpha), n_max, alpha)
            rows, design_gains = compare(ours, ref)
            gains += design_gains
            block = [f"### N_max = {n_max}, alpha = {alpha:g}", "",
                     "| (p0, p1) | power, ours | power, reference | E[stop], ours | E[stop], reference |",
                     "|---|---|---|---|---|", *rows, ""]
            print("\n".join(block), flush=True)
            blocks += block
    below = [g for g in gains if g < 0]
    summary = (f"**Summary:** our power is at least the reference's in {len(gains) - len(below)} of {len(gains)} "
               f"(design, alternative) cells (N_max {', '.join(map(str, args.n_max))}); mean difference "
               f"{np.mean(gains):+.4f}" + (f"; largest shortfall {-min(below):.4f}." if below else "."))
    print(summary)
    lines += [summary, "", *blocks]
    if not args.no_write:
        DOC.write_text("\n".join(lines))
        print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
