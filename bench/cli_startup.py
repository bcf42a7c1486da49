#!/usr/bin/env python3
"""Start-up time of ``evalstop VERB --help`` for every verb and sub-command, in one run.

Each command runs in a fresh interpreter, ``--repeats`` times (best kept), beside two baselines
measured in the same run: a bare interpreter (``python -c pass``) and ``evalstop --help`` (the
parser with no verb module).  The figures are ratios to the bare interpreter, so they compare
across machines; the absolute seconds are printed too.

Goal (issue 38): every ``evalstop VERB --help`` within 0.5 s on an idle 2-core machine.  A start-up
is one thread, so on an idle machine its wall time is its CPU time (user + system); the verdict
reads the CPU time, which a loaded machine stretches far less than the wall time.
``test/cli/test_cli_help_imports.py`` checks what the help imports (no scipy, ...).

Run: ``.venv/bin/python bench/cli_startup.py`` (``--repeats 5``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import subprocess
import sys
import time

from _common import goal_verdicts

from evalstop_ros.cli.main import VERBS, build_parser

GOAL_S = 0.5
HELP = "import sys; from evalstop_ros.cli.main import main; sys.exit(main(sys.argv[1:] + ['--help']))"


def commands() -> list[list[str]]:
    """Every verb and every sub-command the parser declares."""
    out: list[list[str]] = []
    for verb in VERBS:
        out.append([verb])
        parser = build_parser([verb])
        verb_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[verb]
        for action in verb_parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out.extend([verb, sub] for sub in action.choices)
    return out


def best_of(argv: list[str], repeats: int, env: dict[str, str]) -> tuple[float, float]:
    """The best wall time and the best CPU time (user + system) of ``repeats`` runs of ``argv``."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(walls), min(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    bare, bare_cpu = best_of([sys.executable, "-c", "pass"], args.repeats, env)
    top, top_cpu = best_of([sys.executable, "-c", HELP], args.repeats, env)
    print(f"load average {os.getloadavg()[0]:.1f}; baselines: python -c pass {bare:.3f} s ({bare_cpu:.3f} s CPU), "
          f"evalstop --help {top:.3f} s ({top_cpu:.3f} s CPU, {top / bare:.1f} x python)")
    print(f"{'command':<20} {'wall s':>7} {'CPU s':>6} {'x python':>9} {'x evalstop --help':>18}")
    goals = {}
    for command in commands():
        seconds, cpu = best_of([sys.executable, "-c", HELP, *command], args.repeats, env)
        name = " ".join(command)
        print(f"{name:<20} {seconds:7.3f} {cpu:6.3f} {seconds / bare:9.1f} {seconds / top:18.1f}")
        goals[f"evalstop {name} --help within {GOAL_S} s ({cpu:.3f} s CPU)"] = cpu <= GOAL_S
    return goal_verdicts(goals)


if __name__ == "__main__":
    raise SystemExit(main())
