"""Fixtures of the hub tests: every store test runs on SQLite and on a real PostgreSQL 15 server."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from hub_support import PostgresCluster


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A throw-away PostgreSQL cluster for the whole test session (tools/hub/postgres.sh)."""
    cluster = PostgresCluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    """The URL of an empty hub database of each kind."""
    if request.param == "sqlite":
        return str(tmp_path / "hub.sqlite")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.new_database()
