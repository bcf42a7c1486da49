"""Fixtures of the audit tests: the installed ``evalstop`` console script."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Callable

import orjson
import pytest
from audit_support import cli_in_process, console_script


@pytest.fixture
def evalstop(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``evalstop(*args)`` runs the console script and returns the completed process."""
    script = console_script()
    env = {**os.environ, "EVALSTOP_CACHE_DIR": str(tmp_path_factory.mktemp("step-cache"))}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], capture_output=True, text=True, env=env, timeout=300, check=False)

    return run


@pytest.fixture
def audit_json(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, dict]]:
    """``audit_json(source, *options)`` -> (exit status, the one JSON object on stdout) of ``evalstop
    audit --json`` run in this process (:func:`audit_support.cli_in_process`: the console script's parser
    and dispatch without an interpreter and its imports per audit; the script itself: ``evalstop``)."""
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path_factory.mktemp("step-cache")))

    def run(source: pathlib.Path | str, *options: str) -> tuple[int, dict]:
        done = cli_in_process("audit", str(source), "--json", *options)
        assert done.returncode in (0, 1), done.stderr
        assert done.stderr == "", done.stderr
        payload = json.loads(done.stdout)
        # exactly one compact object on one line, keys sorted at every level
        assert done.stdout == orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode() + "\n"
        return done.returncode, payload

    return run
