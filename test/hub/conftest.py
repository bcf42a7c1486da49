"""Fixtures of the hub tests: every store test runs on SQLite and on a real PostgreSQL 15 server; a
network namespace for the tests that cut a station's link."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from hub_support import PostgresCluster, ip


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


@pytest.fixture
def netns() -> Iterator[dict[str, str]]:
    """A network namespace joined to the host by a veth pair; names and addresses unique per process."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (make test runs as root in CI)")
    if shutil.which("ip") is None:
        pytest.fail("iproute2 (`ip`) is missing")
    tag = os.getpid() % 100000
    # a /24 of 10.151.0.0 .. 10.200.255.0 from the pid: concurrent test processes (pytest-xdist
    # workers, the runs of `make test`) differ unless their pids agree modulo 12800
    subnet = f"10.{151 + (tag // 256) % 50}.{tag % 256}"
    net = {"ns": f"evalstop-hub-{tag}", "host_if": f"esh{tag}h", "ns_if": f"esh{tag}s",
           "host_ip": f"{subnet}.1", "ns_ip": f"{subnet}.2"}
    ip("netns", "add", net["ns"])
    try:
        ip("link", "add", net["host_if"], "type", "veth", "peer", "name", net["ns_if"])
        ip("link", "set", net["ns_if"], "netns", net["ns"])
        ip("addr", "add", f"{net['host_ip']}/24", "dev", net["host_if"])
        ip("link", "set", net["host_if"], "up")
        ip("-n", net["ns"], "addr", "add", f"{net['ns_ip']}/24", "dev", net["ns_if"])
        ip("-n", net["ns"], "link", "set", net["ns_if"], "up")
        ip("-n", net["ns"], "link", "set", "lo", "up")
        yield net
    finally:
        subprocess.run(["ip", "link", "del", net["host_if"]], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", net["ns"]], check=False, capture_output=True)
