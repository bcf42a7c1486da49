"""What a node process imports before it does anything: only what it needs before its first trial.

Each node module is imported in a fresh interpreter (as its executable does), which prints the names
in ``sys.modules``.  rclpy itself is allowed (it brings numpy and yaml along); the statistics engine
only where the node runs a session; never what only reports, audits, the hub's server or rankings
need.  How long a node takes to start is a bench (``bench/node_startup.py``), not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"

#: Every node executable's module (CMakeLists.txt installs one executable per module).
NODES = ("evaluation_manager", "station_manager", "sim_robot", "policy_runner", "teleop_scorer", "policy_server")
#: The nodes that run a session and so need the engine (config, journal, statistics) at start.
MANAGERS = frozenset({"evaluation_manager", "station_manager"})

#: Packages no node loads at start (seconds of import each, or a service's driver).
HEAVY = frozenset({
    "scipy", "matplotlib", "torch", "pandas", "sklearn", "psycopg", "psycopg2", "highspy", "fastapi", "uvicorn",
    "starlette", "rosbags", "PIL", "imageio", "sentence_transformers", "transformers", "mujoco", "robosuite",
})
#: Our modules for the offline re-analysis, reports, audits, the hub's server, rankings and the CLI.
NEVER_AT_START = (
    "evalstop_ros.report", "evalstop_ros.audit", "evalstop_ros.active", "evalstop_ros.cli",
    "evalstop_ros.session.offline", "evalstop_ros.stats.ranking", "evalstop_ros.stats.step_synthesis",
    "evalstop_ros.hub.app", "evalstop_ros.hub.database", "evalstop_ros.hub.leaderboard", "evalstop_ros.hub.rankings",
    "evalstop_ros.hub.store", "evalstop_ros.hub.export",
)
#: The session engine and what only it needs: a node that does not run a session loads none of it.
ENGINE = ("evalstop_ros.stats", "evalstop_ros.session.session", "evalstop_ros.session.config",
          "evalstop_ros.session.journal", "pydantic", "sqlite3")
#: What the simulated robot and the scorer's terminal do not need: the websocket client, the AEAD
#: of sealed goals (loaded when the first sealed goal arrives), the hub station's HTTP client.
NOT_IN_LIGHT_NODES = ("websockets", "cryptography", "http.client", "ssl", "msgpack")
LIGHT_NODES = frozenset({"sim_robot", "teleop_scorer"})


def _modules_at_start(node: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, f"evalstop_ros.nodes.{node}"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout)
    assert f"evalstop_ros.nodes.{node}" in modules
    return modules


def _under(modules: list[str], prefixes: tuple[str, ...] | frozenset[str]) -> list[str]:
    return sorted(name for name in modules if any(name == p or name.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("node", NODES)
def test_a_node_imports_only_what_it_needs_before_its_first_trial(node: str) -> None:
    modules = _modules_at_start(node)
    heavy = sorted({name.split(".")[0] for name in modules} & HEAVY)
    assert not heavy, f"{node} imports {heavy} at start"
    assert not _under(modules, NEVER_AT_START), f"{node} imports {_under(modules, NEVER_AT_START)} at start"
    engine = _under(modules, ENGINE)
    if node in MANAGERS:
        assert "evalstop_ros.session.session" in engine  # the bound above is not vacuous: the engine is there
    else:
        assert not engine, f"{node} runs no session but imports {engine} at start"
    if node in LIGHT_NODES:
        extra = _under(modules, NOT_IN_LIGHT_NODES)
        assert not extra, f"{node} imports {extra} at start"

