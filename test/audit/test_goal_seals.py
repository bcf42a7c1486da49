"""The audit checks what the manager sealed for the runner: after the reveal it re-derives the session's
seal key from the revealed key and recomputes each run's goal seal from the plan; a goal that named
another policy than the plan's is a ``goal_seal_mismatch`` on exactly that trial."""

from __future__ import annotations

import pathlib

import pytest
from audit_support import make_config

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.goal_sealing import journal_seal, seal_identity, session_seal_key


def _session(path: pathlib.Path, wrong_trial: int | None) -> None:
    """Three sealed runs, each scored, then abort (the key is revealed); trial ``wrong_trial``'s goal
    sealed the other policy."""
    session = EvaluationSession.open(path, make_config(), "s1", durable=False)
    with session:
        session.start()
        assert session.plan.key is not None
        seal_key = session_seal_key(session.plan.key, "s1")
        for _ in range(3):
            trial = session.next_trial()
            assert trial is not None
            policy = trial.policy_id
            if trial.trial_id == wrong_trial:
                policy = next(p for p in session.config.policies if p != trial.policy_id)
            sealed = seal_identity(seal_key, "s1", trial.trial_id, trial.attempt, policy)
            session.record_runner_result(trial.trial_id, True, 1.0, goal_seal=journal_seal(sealed, trial.attempt))
            assert session.submit_score(trial.trial_id, trial.token, True, 1.0, "alice").accepted
        session.abort("end of the test")


@pytest.mark.parametrize("wrong_trial", [None, 2], ids=["as-planned", "trial-2-sealed-the-other-policy"])
def test_each_runs_goal_seal_is_the_planned_policys(tmp_path: pathlib.Path, audit_json,
                                                     wrong_trial: int | None) -> None:
    path = tmp_path / "journals" / "s1.db"
    path.parent.mkdir(mode=0o700)
    _session(path, wrong_trial)
    status, report = audit_json(path)
    found = [v for v in report["violations"] if v["code"] == "goal_seal_mismatch"]
    if wrong_trial is None:
        assert status == 0 and report["verified"] and not found, report["violations"]
    else:
        assert status == 1 and not report["verified"]
        assert [v["trial_ids"] for v in found] == [[wrong_trial]], report["violations"]
        assert "not the seal of the planned policy" in found[0]["message"]
