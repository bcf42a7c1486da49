"""The manager over a lossy link: lost goal responses and a runner that dies mid-trial.

The manager times out every wait (goal response included), re-sends idempotently and never
stalls.  Each disturbed session must end with exactly the decisions of the same session run
undisturbed: sim_robot's outcomes are a pure function of (seed, session, policy, trial), so a
trial that is re-sent or re-run scores the same.  The undisturbed session is run on the engine,
below ROS: the manager's trial loop (``TrialDriver``) with each run scored by sim_robot's own
``simulate_outcome`` (over DDS it was a third session per test, 37 s of set-up under load; an
undisturbed session over DDS is test_evaluation_manager.py's).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from nodes_support import comparison_key, engine_session, final_status, write_config

pytestmark = pytest.mark.usefixtures("ros_env")

LOSSY_RUNNER = str(pathlib.Path(__file__).with_name("lossy_runner.py"))
#: A short session (n_max 6 per policy: 12 trials, each goal of the lossy runner's lost once) decided by
#: the budget or earlier; both metrics auto-scored.
SESSION = {"n_max": 6, "seed": 11}
#: the manager's goal_response_timeout (s): how long each lost goal is waited for before it is sent again
GOAL_RESPONSE_TIMEOUT = 2.0
RATES = {"policy_a": 0.3, "policy_b": 0.8}  # sim_robot's default policies
ROBOT = {"success_rates": list(RATES.values()), "duration": 0.0}
PLAN_KEY = bytes(range(32))


def _status_topic(probe: Any, prefix: str = "") -> list[Any]:
    from evalstop.msg import SessionStatus

    from evalstop_ros import qos

    return probe.collect(SessionStatus, f"{prefix}session_status", qos.STATUS_QOS)


def _manager_params(tmp_path: pathlib.Path, name: str) -> dict[str, Any]:
    from evalstop_ros.session import load_config
    from evalstop_ros.session.journal import Journal

    config = write_config(tmp_path / f"{name}.yaml", **SESSION)
    # every run follows one plan: its journal is created up front with a shared randomization key
    # (a live manager draws a secret one), and the manager resumes it
    (tmp_path / name).mkdir()
    Journal.open(tmp_path / name / "s1.db", "s1", load_config(config), plan_key=PLAN_KEY).close()
    return {"config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / name),
            "journal_fsync": False, "exit_on_finish": True, "exit_linger": 0.2, "goal_response_timeout": GOAL_RESPONSE_TIMEOUT}


@pytest.fixture
def undisturbed(tmp_path: pathlib.Path) -> list[tuple[Any, ...]]:
    """The decisions of the same session with nothing lost, as the manager would publish them:
    its trial loop on the engine, every run succeeding with sim_robot's score (module docstring)."""
    from evalstop_ros.session import load_config

    config = load_config(write_config(tmp_path / "undisturbed.yaml", **SESSION))
    # sim_robot's defaults: seed 0, progress mean 0.4, concentration 8
    rows = engine_session(tmp_path / "undisturbed.db", config, "s1", PLAN_KEY, 0, RATES, 0.4)
    assert len(rows) == 2, rows  # success and progress
    return [comparison_key(row) for row in rows]


def test_lost_goal_responses_are_re_sent_and_change_nothing(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, undisturbed: list[Any]) -> None:
    statuses = _status_topic(probe)
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, "lossy"))
    probe.hear()
    runner = start_node(LOSSY_RUNNER, params=ROBOT)
    final = final_status(probe, statuses, timeout=180.0)
    assert manager.wait() == 0
    assert [comparison_key(c) for c in final.comparisons] == undisturbed
    # every trial's first goal was lost, noticed and re-sent (a slow response on a loaded
    # machine may add re-sends); the session never paused
    dropped = runner.output.count("goal request dropped")
    assert dropped >= final.trials_done
    assert manager.output.count(f"no goal response within {GOAL_RESPONSE_TIMEOUT:g} s; sending it again") >= dropped
    assert "session paused" not in manager.output


def test_runner_killed_mid_trial_is_a_fault_and_the_trial_runs_again(
        start_node: Any, probe: Any, tmp_path: pathlib.Path, undisturbed: list[Any]) -> None:
    statuses = _status_topic(probe)
    slow = {**ROBOT, "duration": 3.0}
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, "killed"))
    probe.hear()
    runner = start_node("sim_robot", params=slow)
    # kill -9 between accept and result, then bring a (fast) runner back
    runner.wait_for(r"trial 3 \(attempt 1\): rollout started", timeout=60.0)
    runner.kill()
    start_node("sim_robot", params=ROBOT)
    final = final_status(probe, statuses, timeout=180.0)
    assert manager.wait() == 0
    assert [comparison_key(c) for c in final.comparisons] == undisturbed
    fault = manager.wait_for(r"trial 3: (the runner went away during the run|runner timed out)")
    assert fault is not None
    manager.wait_for(r"trial 3 \(label \w+, attempt 2\): runner goal sent")
