"""Fixtures of the CLI tests: ``evalstop`` runs the CLI in-process, ``evalstop_script`` the
installed console script.

Most cases call :func:`evalstop_ros.cli.main.main` with their arguments in this process (its
output captured by ``capsys``, its exit status the return value or a ``SystemExit`` code): the
same parser, dispatch and error handling as the console script, without a fresh interpreter and
a fresh scipy import per case. One test per verb runs the real console script in a subprocess
(``evalstop_script``), as do the pipe and signal tests of test_cli_output.py and the examples.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Callable

import orjson
import pytest
from audit_support import cli_in_process, console_script


@pytest.fixture(scope="session")
def step_cache(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """One throw-away STEP table cache for the session (never the user's)."""
    return tmp_path_factory.mktemp("step-cache")


@pytest.fixture
def evalstop_script(step_cache: pathlib.Path, monkeypatch: pytest.MonkeyPatch
                    ) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``evalstop_script(*args)`` runs the installed console script and returns the completed process.

    The script and the in-process core (used for the expected values) share the STEP cache
    ``$EVALSTOP_CACHE_DIR``: the session's, unless a test sets its own first.
    """
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(step_cache))
    script = console_script()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)

    return run


@pytest.fixture
def evalstop(step_cache: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``evalstop(*args)`` runs ``evalstop ARGS`` in this process (:func:`audit_support.cli_in_process`);
    the result as a completed process."""
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(step_cache))
    return cli_in_process


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
