"""Output that explains itself: warnings, time estimates, pipes, and the documented exit codes.

Every exit code of :mod:`evalstop_ros.cli` (0, 1, 2, 3, 141) is produced here by the installed
console script, and each verb's ``--help`` documents the codes it can give.
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from evalstop_ros.cli import EXIT_BROKEN_PIPE, EXIT_CHECK_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from evalstop_ros.cli._estimates import ANNOUNCE_SECONDS, simulate_seconds, step_check_seconds
from evalstop_ros.cli.main import VERBS, build_parser

REPO = pathlib.Path(__file__).resolve().parents[2]
PROGRESS = str(REPO / "examples" / "progress_like.csv")
Run = Callable[..., subprocess.CompletedProcess[str]]


def test_partial_scores_with_default_bins_warn_in_one_line(evalstop: Run) -> None:
    done = evalstop("analyze", PROGRESS, "--method", "nscore", "--alpha", "0.05")
    assert done.returncode == EXIT_OK
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalstop analyze: warning: 120 of 120 scores are neither 0 nor 1")
    assert "--bins 21" in lines[0]
    assert "CONTINUE" in done.stdout  # what the warning explains: K = 2 never decides on partial scores
    with_bins = evalstop("analyze", PROGRESS, "--method", "nscore", "--alpha", "0.05", "--bins", "21")
    assert with_bins.returncode == EXIT_OK and with_bins.stderr == "" and "B_BETTER" in with_bins.stdout
    explicit = evalstop("analyze", PROGRESS, "--method", "nscore", "--alpha", "0.05", "--bins", "2")
    assert explicit.stderr == ""  # asked for: no warning
    binary = evalstop("analyze", str(REPO / "examples" / "towel_like.csv"), "--method", "nscore", "--alpha", "0.05")
    assert binary.returncode == EXIT_OK and binary.stderr == ""


def test_json_into_a_closed_pipe_exits_quietly(tmp_path: pathlib.Path, step_cache: pathlib.Path) -> None:
    """``--json | head -c 100`` on an output far larger than a pipe buffer: no traceback, 141."""
    data = tmp_path / "long.csv"
    data.write_text("policy_a,policy_b\n" + "0.5,0.5\n" * 30000)
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    env = {**os.environ, "EVALSTOP_CACHE_DIR": str(step_cache)}
    done = subprocess.run(["bash", "-c", f"'{script}' analyze {data} --method nscore --bins 21 --alpha 0.05 --json | head -c 100; "
                          "echo \" ${PIPESTATUS[0]}\""], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.stdout.startswith('{"data":') and done.stdout.rstrip().endswith(f" {EXIT_BROKEN_PIPE}")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stderr == ""


def _first_stderr_line(args: list[str], step_cache: pathlib.Path) -> str:
    """The first line ``evalstop ARGS`` writes on stderr; the run is then stopped."""
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    env = {**os.environ, "EVALSTOP_CACHE_DIR": str(step_cache)}
    proc = subprocess.Popen([script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        return proc.stderr.readline()
    finally:
        proc.kill()
        proc.communicate()


def test_long_runs_say_up_front_how_long(step_cache: pathlib.Path) -> None:
    """``step check`` of a large grid and a large ``simulate``: the estimate is the first line."""
    assert step_check_seconds(600, 1000) >= ANNOUNCE_SECONDS > step_check_seconds(500, 1000)  # per point above 500
    assert step_check_seconds(500, 200_000) >= ANNOUNCE_SECONDS > step_check_seconds(500, 20_000)
    assert simulate_seconds("nscore", 500, 20000, 2) < ANNOUNCE_SECONDS  # the README's: nothing to announce
    first = _first_stderr_line(["step", "check", "--n-max", "500", "--grid-size", "200000", "--alpha", "0.05",
                                 "--json"], step_cache)
    assert re.match(r"evalstop step: this will take about \d+-\d+ s \(", first), first
    assert "grid x n_max^2" in first
    first = _first_stderr_line(["simulate", "--method", "nscore", "--p0", "0.5", "--p1", "0.5", "--n-max", "10000",
                                "--reps", "20000", "--bins", "21", "--alpha", "0.05", "--json"], step_cache)
    assert first.startswith("evalstop simulate: this will take about ") and "20000 sequences" in first, first


def test_busy_port_is_one_line_and_exit_3(evalstop_script: Run, tmp_path: pathlib.Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = evalstop_script("hub", "serve", "--db", str(tmp_path / "hub.sqlite"), "--port", str(port))
    assert done.returncode == EXIT_UNAVAILABLE
    assert done.stdout == ""
    assert done.stderr == (f"evalstop hub serve: error: cannot listen on 127.0.0.1:{port}: the port is in use "
                           "(another hub or program; pick another --port)\n")
    assert list(tmp_path.iterdir()) == []  # no empty database left behind


def test_exit_codes_of_the_verbs(evalstop_script: Run, tmp_path: pathlib.Path) -> None:
    assert evalstop_script("step", "oc", "--n-max", "100", "--alpha", "0.05", "--p0", "0.3", "--p1", "0.6").returncode == \
        EXIT_OK
    bad = evalstop_script("analyze", str(tmp_path / "missing.csv"), "--method", "nscore", "--alpha", "0.05")
    assert bad.returncode == EXIT_USAGE and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert evalstop_script("rank", "--model", "nope", "x.csv").returncode == EXIT_USAGE
    assert evalstop_script("keys", "new", "alice", "alice", "--dir", str(tmp_path)).returncode == EXIT_USAGE
    audit_missing = evalstop_script("audit", str(tmp_path / "nothing"))
    assert audit_missing.returncode == EXIT_USAGE
    assert EXIT_CHECK_FAILED == 1  # step check / audit failures: test_cli_step, test/audit


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_documents_its_exit_status(verb: str) -> None:
    text = build_parser([verb])._subparsers._group_actions[0].choices[verb].format_help()  # type: ignore[union-attr]
    assert "exit status:" in text and " 0 " in text.split("exit status:")[1], verb
