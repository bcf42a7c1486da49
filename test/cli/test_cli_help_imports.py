"""``evalstop VERB --help`` loads only the parser: no scipy, plotting, learning or database stack.

Each command runs in a fresh interpreter (the console script's own import path), which prints
the help and then the names in ``sys.modules``.  Every verb and every sub-command of a verb is
covered, read from the parser itself, so a verb added later is checked too.  How long the help
takes is a bench (``bench/cli_startup.py``), not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from evalstop_ros.cli.main import VERBS, build_parser

#: Packages a help text must not load (seconds of import each, or a service's driver).
HEAVY = frozenset({
    "scipy", "matplotlib", "torch", "psycopg", "psycopg2", "highspy", "pandas", "sklearn", "sentence_transformers",
    "transformers", "rclpy", "mujoco", "robosuite", "fastapi", "uvicorn", "starlette", "pydantic", "cryptography",
    "rosbags", "yaml", "PIL", "imageio", "ray",
})
#: Our packages above the statistics core, which a help text does not need either.
OURS_ABOVE_STATS = ("evalstop_ros.session", "evalstop_ros.report", "evalstop_ros.audit", "evalstop_ros.runner",
                    "evalstop_ros.nodes", "evalstop_ros.active", "evalstop_ros.parallel")

PROBE = """
import contextlib, io, json, sys
from evalstop_ros.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as shown:
    status = main(sys.argv[1:] + ["--help"])
print(json.dumps({"status": status, "help": shown.getvalue(), "modules": sorted(sys.modules)}))
"""


def _commands() -> list[tuple[str, ...]]:
    """Every verb, and every sub-command of the verbs that have them, as the parser declares them."""
    commands: list[tuple[str, ...]] = []
    for verb in VERBS:
        commands.append((verb,))
        parser = build_parser([verb])
        verb_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[verb]
        for action in verb_parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands.extend((verb, sub) for sub in action.choices)
    return commands


def test_the_command_list_covers_the_sub_commands() -> None:
    commands = _commands()
    assert {c[0] for c in commands} == set(VERBS)
    assert ("step", "synthesize") in commands and ("hub", "serve") in commands and ("keys", "new") in commands


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_help_imports_no_heavy_module(command: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *command], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert probe["status"] == 0 and f"usage: evalstop {' '.join(command)}" in probe["help"]
    roots = {name.split(".")[0] for name in probe["modules"]}
    assert not roots & HEAVY, f"`evalstop {' '.join(command)} --help` imports {sorted(roots & HEAVY)}"
    above = sorted(name for name in probe["modules"] if name.startswith(OURS_ABOVE_STATS))
    assert not above, f"`evalstop {' '.join(command)} --help` imports {above}"
