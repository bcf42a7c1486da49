"""``evalstop keys new``: key files the manager and the clients read."""

from __future__ import annotations

import os

from evalstop_ros.session.auth import read_identity, read_keys


def test_new_keys_write_the_manager_file_and_one_per_operator(evalstop_script, tmp_path):
    proc = evalstop_script("keys", "new", "alice", "auto:runner", "--dir", str(tmp_path / "k"))
    assert proc.returncode == 0, proc.stderr
    keys = read_keys(tmp_path / "k" / "operators.keys")
    assert sorted(keys) == ["alice", "auto:runner"]
    assert read_identity(tmp_path / "k" / "alice.key") == ("alice", keys["alice"])
    assert read_identity(tmp_path / "k" / "auto_runner.key") == ("auto:runner", keys["auto:runner"])
    assert all(os.stat(p).st_mode & 0o077 == 0 for p in (tmp_path / "k").iterdir())
    assert keys["alice"].hex() not in proc.stdout


def test_existing_files_are_not_overwritten_and_bad_ids_are_usage_errors(evalstop, tmp_path):
    assert evalstop("keys", "new", "alice", "--dir", str(tmp_path)).returncode == 0
    again = evalstop("keys", "new", "alice", "--dir", str(tmp_path))
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr
    bad = evalstop("keys", "new", "a b", "--dir", str(tmp_path / "x"))
    assert bad.returncode == 2 and "invalid operator id 'a b'" in bad.stderr
