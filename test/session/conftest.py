"""Fixtures of the session tests."""

from __future__ import annotations

import pathlib

import pytest


@pytest.fixture(autouse=True)
def _step_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests use shipped STEP tables only; anything synthesized goes to a throw-away cache.
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "step-cache"))


@pytest.fixture
def journal_path(tmp_path: pathlib.Path) -> pathlib.Path:
    """Where a test's session journal goes."""
    return tmp_path / "session.db"
