"""Helpers of the runner tests: the separate openpi venv, free ports, waiting for a server, the physics extra.

``free_port`` and ``wait_for_port`` serve the hub and CLI tests too (``test/runner`` is on pytest's path)."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pathlib
import socket
import subprocess
import time
from typing import Any

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def openpi_python() -> pathlib.Path:
    """The python of the separate openpi venv (built by tools/openpi_venv.sh on first use)."""
    (REPO / "build").mkdir(exist_ok=True)
    with (REPO / "build" / ".openpi-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers: one builds, the others wait
        out = subprocess.run(["sh", str(REPO / "tools" / "openpi_venv.sh"), str(REPO / "build" / "openpi-venv")],
                             cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, f"tools/openpi_venv.sh failed:\n{out.stderr[-3000:]}"
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[Any] | None = None, timeout: float = 60.0) -> None:
    """Poll until something listens on 127.0.0.1:``port``; fail at once if ``process`` (the server) exits,
    with its stderr when it is a pipe (else: see its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            err = process.communicate()[1] if process.stderr is not None else "(see its log)"
            pytest.fail(f"server exited with {process.returncode}: {err!s}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"nothing listens on port {port} after {timeout:g} s")


def start_openpi_server(kind: str, port: int, log: pathlib.Path, *options: str) -> subprocess.Popen[bytes]:
    """openpi's own WebsocketPolicyServer serving scripted policy ``kind`` (separate venv), output to ``log``.

    ``options``: more command-line options of tools/openpi_policy_server.py (``--fail-after 2`` ...).
    """
    with log.open("wb") as out:
        process = subprocess.Popen([str(openpi_python()), str(REPO / "tools" / "openpi_policy_server.py"),
                                    "--policy", kind, "--port", str(port), *options],
                                   stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, process)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def require_robosuite() -> None:
    """Skip without the physics extra (tools/install_physics.sh); fail instead under ``EVALSTOP_PHYSICS_REQUIRED``."""
    if importlib.util.find_spec("robosuite") is None:
        if os.environ.get("EVALSTOP_PHYSICS_REQUIRED"):
            pytest.fail("robosuite is missing but EVALSTOP_PHYSICS_REQUIRED is set; run tools/install_physics.sh")
        pytest.skip("robosuite not installed; run tools/install_physics.sh (make test does)")
