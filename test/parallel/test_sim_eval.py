"""A Ray sim-eval of two served policies on three robosuite tasks, a worker killed mid-rollout.

Real Ray (a local cluster of two worker processes), real robosuite rollouts, the project's policy
server over the openpi protocol, the session's own journal; the audit and the report read it.
One session (module fixture, `slow`): every task's test decides, the Holm claim over the tasks
is established, fewer rollouts than the fixed-N batch, the killed worker's rollout journaled as a
runner fault and run again, and `evalstop audit` VERIFIED.

Sized for a test (the preset's sizes are the bench's, bench/sim_eval_scale.py): alpha 0.3 (0.1
per task under Holm: SAVI decides a task after 3 pairs of a lift against a slip), n_max 5 (the
fixed-N batch: 3 x 5 x 2 = 30 rollouts), the cube within 2 to 5 cm of the table's centre (two
environments per worker: lift_quick differs from lift_centre in its horizon only, as in the preset), horizons
of 40 actions (2.7 s simulated): a rollout ends at the lift, which the exact grasp reaches after 26
to 29 actions there, while the slipping grasp runs to the horizon.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from evalstop_ros.cli.main import main as evalstop
from evalstop_ros.parallel.ray_pool import RayPool
from evalstop_ros.parallel.rollout import RolloutRequest
from evalstop_ros.parallel.sim_config import load_sim_eval
from evalstop_ros.parallel.sim_eval import SimEvalResult, run_sim_eval, served_policies
from evalstop_ros.runner.client import ServerAddress
from evalstop_ros.runner.errors import ErrorLog
from evalstop_ros.session.values import SessionState
from evalstop_ros.stats.sequential import Decision

PRESET = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sim_eval.yaml"


def _require_physics() -> None:
    if importlib.util.find_spec("robosuite") is None or importlib.util.find_spec("ray") is None:
        if os.environ.get("EVALSTOP_PHYSICS_REQUIRED"):
            pytest.fail("robosuite or ray is missing but EVALSTOP_PHYSICS_REQUIRED is set")
        pytest.skip("robosuite and ray are optional extras (tools/install_physics.sh, pip install 'evalstop[ray]')")


def _kill_first_busy_worker(pool: RayPool, pids: list[int], killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the first worker seen with a rollout in flight (polled; the deadline is the session's)."""
    while not stop.is_set():
        busy = pool.busy()
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append(busy[0])
            return
        stop.wait(0.05)


@pytest.fixture(scope="module")
def pool() -> Iterator[RayPool]:
    """Two rollout workers on a private local Ray cluster, for the module."""
    _require_physics()
    with RayPool(2) as workers:
        yield workers


@pytest.fixture(scope="module")
def session(pool: RayPool, tmp_path_factory: pytest.TempPathFactory) -> tuple[SimEvalResult, list[int], list[str]]:
    out = tmp_path_factory.mktemp("sim_eval")
    data = yaml.safe_load(PRESET.read_text())
    data.update(alpha=0.3, n_max=5)
    # lift_quick shares lift_centre's environment, as in the preset (one build fewer per worker)
    for task, spread in zip(data["simulation"]["tasks"].values(), (0.02, 0.05, 0.02)):
        task.update(spread=spread, max_steps=40)
    path = out / "sim_eval.yaml"
    path.write_text(yaml.safe_dump(data))
    config, simulation = load_sim_eval(path, workers=2)
    lines: list[str] = []
    killed: list[int] = []
    stop = threading.Event()
    with served_policies(simulation) as addresses:
        pids = pool.worker_pids()
        killer = threading.Thread(target=_kill_first_busy_worker, args=(pool, pids, killed, stop), daemon=True)
        killer.start()
        try:
            result = run_sim_eval(config, simulation, pool, journal_path=out / "sim.db", session_id="sim",
                                  addresses=addresses, error_log=ErrorLog(out / "errors"), progress=lines.append)
        finally:
            stop.set()
            killer.join(timeout=5.0)
    return result, killed, lines


def test_every_task_is_decided_and_the_claim_established_with_fewer_rollouts(
        session: tuple[SimEvalResult, list[int], list[str]]) -> None:
    result, _, lines = session
    assert result.state == SessionState.FINISHED, lines[-5:]
    assert [(c.task, c.decision) for c in result.comparisons] == [
        (task, Decision.B_BETTER) for task in ("lift_centre", "lift_spread", "lift_quick")]
    (claim,) = result.claims
    assert claim.established and claim.final
    assert sum(result.per_task.values()) < result.fixed_n == 3 * 5 * 2
    # a line per rollout, per decision, and per rollout cancelled at the stop
    assert all(line.startswith(("[", "decided ")) or line.endswith("at the stop") for line in lines), lines
    assert not any("exact_vla" in line or "high_vla" in line for line in lines)  # labels only


def test_a_killed_worker_is_a_fault_and_its_trial_runs_again(
        session: tuple[SimEvalResult, list[int], list[str]]) -> None:
    result, killed, lines = session
    assert killed, "no rollout was seen in flight"
    assert result.faults >= 1
    failed = [line for line in lines if "failed: robot fault" in line and "the simulation worker died" in line]
    assert failed, lines
    trial = failed[0].split("trial ")[1].split(" ")[0]
    assert any(f"trial {trial} " in line and "attempt 2" in line and "success=" in line for line in lines)


def test_the_journal_audits_verified_and_reports(session: tuple[SimEvalResult, list[int], list[str]],
                                                 capsys: pytest.CaptureFixture[str],
                                                 tmp_path: pathlib.Path) -> None:
    result, _, _ = session
    assert evalstop(["audit", str(result.journal), "--json"]) == 0
    audit: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert audit["verified"] is True
    # PNG only: the page is what is checked here; the three formats: test/report/test_report_figures.py
    assert evalstop(["report", str(result.journal), "-o", str(tmp_path / "report"), "--format", "png"]) == 0
    assert (tmp_path / "report" / "index.html").is_file()


def test_a_cancelled_rollout_releases_its_worker_at_once(pool: RayPool) -> None:
    # a policy server that accepts the connection and never answers: the rollout would wait for it
    with socket.create_server(("127.0.0.1", 0)) as silent:
        before = pool.worker_pids()
        request = RolloutRequest("cancel", 1, 1, "lift_centre", "scene_a", "lift", ServerAddress(
            "127.0.0.1", silent.getsockname()[1]), "Lift", 0.02, 0, 80, 15.0, infer_timeout=600.0)
        worker = pool.submit("in flight", request)
        assert pool.busy() == [worker]
        assert pool.cancel("in flight")
        assert pool.busy() == [] and pool.idle == 2
        assert pool.wait(timeout=0) == []  # nothing comes back from a cancelled rollout
        assert not pool.up(worker)  # killed: a restart takes a new process
        deadline = time.monotonic() + 300.0
        while not pool.up(worker):  # asked without waiting, until Ray has restarted it
            assert time.monotonic() < deadline, f"worker {worker} did not come back"
            threading.Event().wait(0.1)
        assert pool.up(1 - worker)
        after = pool.worker_pids()  # the killed worker was restarted
    assert after[worker] != before[worker] and after[1 - worker] == before[1 - worker]
