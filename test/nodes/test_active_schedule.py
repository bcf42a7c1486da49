"""``schedule: active`` over DDS: evaluation_manager + sim_robot, then the audit of the journal.

The manager needs no change for the active schedule: the session chooses each round's task
(seed 004's cost-aware task EIG) and journals the choice; the audit re-runs every choice from
the journal (evalstop_ros.audit.active) and the statistics from the scores.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from nodes_support import final_status, write_config

pytestmark = pytest.mark.usefixtures("ros_env")

POLICIES = ["agent_1", "agent_2", "agent_3"]


def test_active_session_is_audited_from_its_journal(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop.msg import SessionStatus

    from evalstop_ros import qos
    from evalstop_ros.audit import verify
    from evalstop_ros.audit.journal import read_journal_record
    from evalstop_ros.session.journal import read_journal

    tasks = [{"id": task, "description": text,
              "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Spot {i}."} for i in range(2)]}
             for task, text in (("open_drawer", "Open the drawer."), ("close_drawer", "Close the drawer."),
                                ("push_button", "Push the red button."))]
    config = write_config(
        tmp_path / "active.yaml", policies=POLICIES, tasks=tasks, claim="any", alpha=0.1, n_max=8,
        schedule="active",
        active={"strategy": "cost-task-eig", "embedding": "random", "epochs": 30, "mc_samples": 5,
                "task_groups": {"open_drawer": "drawer", "close_drawer": "drawer"}},
        metrics=[{"name": "progress", "method": "nscore", "alpha": 0.1, "bins": 21, "alternative": "greater"}])
    statuses = probe.collect(SessionStatus, "session_status", qos.STATUS_QOS)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "exit_on_finish": True, "exit_linger": 0.5})
    # then the runner: the session cannot start before the probe hears the manager, which loads
    # PyTorch for the surrogate first (13 s on a busy machine; over 30 s beside two test runs)
    probe.hear(timeout=180.0)
    start_node("sim_robot", params={"policies": POLICIES, "success_rates": [0.0] * 3,
                                    "progress_means": [0.2, 0.5, 0.9], "duration": 0.0})
    final = final_status(probe, statuses, timeout=300.0)
    assert manager.wait() == 0
    assert final.state_name == "finished"
    journal = tmp_path / "journals" / "s1.db"
    events = read_journal(journal).events
    choices = [e for e in events if e.kind == "schedule_choice"]
    rounds = {int(e.payload["round"]) for e in events if e.kind == "trial_requested"}
    assert len(choices) == len(rounds) >= 3
    assert len({e.payload["task"] for e in choices}) >= 2
    report = verify(read_journal_record(journal))
    assert report.verified, [v.message for v in report.violations]
