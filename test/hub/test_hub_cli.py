"""``evalstop hub`` management verbs: keys written once (mode 600, never printed), clear errors."""

from __future__ import annotations

import os
import pathlib
import stat

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
