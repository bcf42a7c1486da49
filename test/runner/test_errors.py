"""The runner's failure categories and its private error log (issue 19: nothing a server says reaches the operator)."""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pytest

from evalstop_ros.runner.errors import CATEGORIES, MESSAGE_RE, Category, ErrorLog, RunnerError, operator_message


def test_the_categories_are_the_fixed_words_the_operator_sees() -> None:
    assert CATEGORIES[:5] == ("unreachable", "too slow", "protocol error", "server error",
                              "refused by the command guard")
    for category in Category:
        message = operator_message(category, "0123abcd")
        assert MESSAGE_RE.fullmatch(message) and message == f"{category.value} (error 0123abcd)"


def test_the_error_log_is_private_whatever_the_umask(tmp_path: pathlib.Path) -> None:
    old = os.umask(0)
    try:
        (tmp_path / "loose").mkdir(mode=0o777)
        log = ErrorLog(tmp_path / "loose" / "runner")
        error = RunnerError("policy server error frame: Traceback ... pi0_fast_droid", category=Category.SERVER)
        error.__cause__ = OSError("connection reset")
        error_id = log.record(error, error.category, policy="pi0_fast_droid", trial=7)
        again = ErrorLog(tmp_path / "loose")   # an existing directory others could read is tightened
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(again.directory.stat().st_mode) == 0o700
    entry = log.find(error_id)
    assert entry is not None and entry["category"] == "server error" and entry["policy"] == "pi0_fast_droid"
    assert entry["text"].endswith("pi0_fast_droid <- OSError: connection reset") and entry["trial"] == "7"
    assert [json.loads(line)["error_id"] for line in log.path.read_text().splitlines()] == [error_id]
    assert len(error_id) == 8 and int(error_id, 16) >= 0


def test_an_unusable_error_log_directory_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot use error log directory"):
        ErrorLog(tmp_path / "file" / "runner")
