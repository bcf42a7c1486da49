"""`evalstop rank` reads a hub export: the same comparisons, the same ranking as the hub's leaderboard."""

from __future__ import annotations

import json
import pathlib

import pytest
from audit_support import cli_in_process
from hub_support import POLICIES, cli, submit_simulated

from evalstop_ros.hub.leaderboard import leaderboard


def _export(tmp_path: pathlib.Path) -> pathlib.Path:
    db = str(tmp_path / "hub.sqlite")
    submit_simulated(db, POLICIES, 90, ["towel", "cup"], "uniform", 11,
                     lambda rng, p: round(rng.random() * p, 2))  # partial progress
    out = tmp_path / "journal.jsonl"
    done = cli_in_process("hub", "export", "--db", db, "-o", str(out))  # its console script: test_hub_cli.py
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("model", ["bt", "paired", "davidson"])
def test_rank_reads_a_hub_export_like_the_leaderboard(tmp_path: pathlib.Path, model: str) -> None:
    export = _export(tmp_path)
    done = cli("rank", str(export), "--model", model, "--json", "--level", "0.95")
    assert done.returncode == 0, done.stderr
    ranked = json.loads(done.stdout)
    entries = [json.loads(line) for line in export.read_text().splitlines()]
    board = leaderboard(["alpha", "beta", "gamma"], entries, models=(model,))
    assert ranked["n_comparisons"] == board["n_results"] == 90
    hub_rows = board["models"][model]["rows"]
    assert [r["policy"] for r in ranked["ranking"]] == [r["policy"] for r in hub_rows]
    for mine, theirs in zip(ranked["ranking"], hub_rows, strict=True):
        assert mine["score"] == pytest.approx(theirs["score"], abs=1e-12)
        assert mine["se"] == pytest.approx(theirs["se"], abs=1e-12)
        assert (mine["low"], mine["high"]) == pytest.approx((theirs["low"], theirs["high"]), abs=1e-12)
    assert ranked["ranking"][0]["policy"] == "alpha"


def test_a_broken_export_is_refused_with_its_line(tmp_path: pathlib.Path) -> None:
    export = _export(tmp_path)
    lines = export.read_text().splitlines()
    lines[5] = lines[5][:-3]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    # the refusals in this process (the same parser and dispatch); the console script ranks above
    done = cli_in_process("rank", str(broken))
    assert done.returncode == 2 and f"{broken}:6: not a JSON line of a hub export" in done.stderr
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(("\n".join(lines[:5]) + "\n").encode() + b"\xff\xfe\n")
    done = cli_in_process("rank", str(binary))
    assert done.returncode == 2 and f"{binary}: not a hub export (not UTF-8 text" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text(lines[0] + "\n")  # a policy registration, no result
    done = cli_in_process("rank", str(empty))
    assert done.returncode == 2 and "holds no result" in done.stderr
