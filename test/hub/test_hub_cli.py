"""``evalstop hub`` management verbs: keys written once (mode 600, never printed), clear errors."""

from __future__ import annotations

import os
import pathlib
import stat

from audit_support import cli_in_process
from hub_support import cli


def test_add_station_writes_the_key_only_to_its_file(tmp_path: pathlib.Path) -> None:
    db = str(tmp_path / "hub.sqlite")
    key_file = tmp_path / "lab1.key"
    done = cli("hub", "add-station", "--db", db, "lab1", "--key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    key = key_file.read_text().strip()
    assert key.startswith("esk_") and key not in done.stdout + done.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = cli("hub", "add-station", "--db", db, "lab1", "--key-file", str(tmp_path / "other.key"))
    assert again.returncode == 2 and "evalstop hub: error: station 'lab1' is already registered" in again.stderr
    assert cli("hub", "revoke", "--db", db, "lab1").returncode == 0
    assert "no station 'nobody'" in cli("hub", "revoke", "--db", db, "nobody").stderr


def test_station_without_key_and_bad_journal_are_usage_errors(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "EVALSTOP_HUB_KEY"}
    done = cli("hub", "station", "--hub", "http://127.0.0.1:9", "--dir", str(tmp_path / "s"), "--trials", "1", env=env)
    assert done.returncode == 2 and "no API key: pass --key-file or set EVALSTOP_HUB_KEY" in done.stderr
    bad = tmp_path / "journal.jsonl"
    bad.write_text("{not json\n")
    done = cli("hub", "analyze", str(bad))
    assert done.returncode == 2 and f"{bad}:1: not a JSON line of a hub export" in done.stderr


def test_the_hub_evaluates_as_it_was_started(tmp_path: pathlib.Path) -> None:
    """The first start journals the evaluation (method, alpha, ranker, models, budget, schedule,
    tasks); a later start with another is refused with the differences, nothing served or
    journaled; ``hub analyze`` reads the export's evaluation, and an option given there is a
    what-if analysis, said so."""
    import json

    from hub_support import HubProcess, register_hub

    db = str(tmp_path / "hub.sqlite")
    _, viewer = register_hub(db, {"alpha": 0.9, "beta": 0.5, "gamma": 0.1}, ("s1",))
    flags = ["--alpha", "0.1", "--tasks", "towel,cup", "--budget", "40"]
    hub = HubProcess(db, viewer, tmp_path, flags)
    hub.start()
    hub.stop()
    changed = cli("hub", "serve", "--db", db, "--port", "0", "--alpha", "0.05", "--tasks", "towel,cup", "--budget", "40",
                  "--schedule", "uniform")
    assert changed.returncode == 2, changed.stderr
    assert "the hub's journal holds another evaluation (alpha: journaled 0.1, given 0.05; schedule: journaled " \
           "'uncertain', given 'uniform')" in changed.stderr
    hub.start()  # the journaled settings again: served
    hub.stop()
    restarted = HubProcess(db, viewer, tmp_path)  # a restart with no option: the journaled evaluation
    restarted.start()
    restarted.stop()
    announced = (tmp_path / "hub-1.log").read_text()
    assert f"leaderboard: http://127.0.0.1:{restarted.port}/leaderboard" in announced, announced
    assert "mixture at family-wise alpha 0.1 (declared family), ranker bt, schedule uncertain, tasks towel,cup" in announced, announced
    export = tmp_path / "journal.jsonl"
    assert cli("hub", "export", "--db", db, "-o", str(export)).returncode == 0
    entries = [json.loads(line) for line in export.read_text().splitlines()]
    [evaluation] = [e["body"] for e in entries if e["kind"] == "evaluation"]
    assert evaluation == {"method": "mixture", "alpha": 0.1, "ranker": "bt", "models": ["paired", "bt", "davidson", "elo",
                          "prog", "task"], "budget": 40, "schedule": "uncertain", "tasks": ["towel", "cup"],
                          "family": "declared"}
    hub_view = cli("hub", "analyze", str(export))
    assert hub_view.returncode == 0 and hub_view.stderr == ""
    assert "sequential weighted Holm over all 3 pairs at family-wise level 0.1" in hub_view.stdout
    # the what-if options in this process (the same parser and dispatch, no interpreter per run)
    what_if = cli_in_process("hub", "analyze", str(export), "--alpha", "0.05")
    assert what_if.returncode == 0 and "family-wise level 0.05" in what_if.stdout
    assert "a what-if analysis, not the hub's evaluation (alpha: journaled 0.1, given 0.05)" in what_if.stderr
    before = cli_in_process("hub", "analyze", str(export), "--family", "all-pairs")  # the family before, still selectable
    assert before.returncode == 0 and "sequential Holm over all 3 pairs at family-wise level 0.1" in before.stdout
    assert "(family: journaled 'declared', given 'all-pairs')" in before.stderr


def test_a_refused_first_start_leaves_no_database(tmp_path: pathlib.Path) -> None:
    """A start refused for its evaluation (a test that needs a horizon) leaves no empty database behind."""
    db = tmp_path / "hub.sqlite"
    done = cli("hub", "serve", "--db", str(db), "--port", "0", "--method", "step")
    assert done.returncode == 2 and "anytime-valid test without a horizon" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
