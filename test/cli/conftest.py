"""Fixtures of the CLI tests: they run the installed ``evalstop`` console script."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Callable

import orjson
import pytest


def _script() -> str:
    beside = pathlib.Path(sys.executable).with_name("evalstop")
    found = str(beside) if beside.is_file() else shutil.which("evalstop")
    if found is None:
        pytest.fail("the `evalstop` console script is not installed (pip install -e .)")
    return found


@pytest.fixture(scope="session")
def step_cache(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """One throw-away STEP table cache for the session (never the user's)."""
    return tmp_path_factory.mktemp("step-cache")


@pytest.fixture
def evalstop(step_cache: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``evalstop(*args)`` runs the console script and returns the completed process.

    The script and the in-process core (used for the expected values) share the STEP cache
    ``$EVALSTOP_CACHE_DIR``: the session's, unless a test sets its own first.
    """
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(step_cache))
    script = _script()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)

    return run


def _stdout_json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no diagnostics, no progress bar with --json
    payload = json.loads(proc.stdout)
    # exactly one compact object on one line, keys sorted at every level
    assert proc.stdout == orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode() + "\n"
    return payload


def _input_error(proc: subprocess.CompletedProcess[str], verb: str, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"evalstop {verb}: error: "), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


@pytest.fixture
def stdout_json() -> Callable[[subprocess.CompletedProcess[str]], dict[str, object]]:
    """``stdout_json(proc)``: check a successful ``--json`` run and return its one object."""
    return _stdout_json


@pytest.fixture
def input_error() -> Callable[..., None]:
    """``input_error(proc, verb, *fragments)``: check an exit-2 run with a one-line message."""
    return _input_error
