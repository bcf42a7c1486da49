"""Sealed runner goals (session/goal_sealing.py): only a holder of the runner key opens what identifies
the policy; the seal is bound to its trial and run, hides the identity's length, is a pure function of
the plan (the audit recomputes it after the reveal), and a result counts only with the runner's proof.

The goal and result are plain records with the ``RunTrial`` fields (the module reads attributes only);
the same code runs on the real messages in test/nodes/test_sealed_goals.py."""

from __future__ import annotations

import dataclasses
import pathlib
import secrets

import pytest

from evalstop_ros.session.auth import write_keys
from evalstop_ros.session.goal_sealing import (
    GoalSealer,
    SealError,
    open_goal,
    read_runner_key,
    result_proof,
    seal_identity,
    seal_problem,
    session_seal_key,
)

RUNNER_KEY = bytes(range(32))
SESSION_KEY = bytes(range(100, 132))


@dataclasses.dataclass
class Goal:  # the RunTrial goal's fields
    session_id: str = "s1"
    trial_id: int = 3
    label: str = "X"
    task: str = "t"
    initial_condition: str = "c"
    attempt: int = 1
    sealed: bytes = b""
    seal_key: bytes = b""
    policy_id: str = ""


@dataclasses.dataclass
class Result:  # the RunTrial result's fields
    ok: bool = True
    message: str = "30 steps"
    duration: float = 1.5
    auto_scored: bool = True
    auto_success: bool = False
    auto_progress: float = 0.25
    proof: bytes = b""


def _goal(sealer: GoalSealer, identity: str = "pi0_fast_droid", trial_id: int = 3, attempt: int = 1) -> Goal:
    fields = sealer.goal_fields(trial_id, attempt, identity)
    return Goal(trial_id=trial_id, attempt=attempt, **{k: bytes(v) if isinstance(v, list) else v
                                                        for k, v in fields.items()})


def _sealer(runner_key: bytes | None = RUNNER_KEY) -> GoalSealer:
    return GoalSealer(runner_key, session_seal_key(SESSION_KEY, "s1"), "s1")


def test_only_the_runner_key_opens_the_goal() -> None:
    goal = _goal(_sealer())
    assert goal.policy_id == "" and b"pi0" not in goal.sealed + goal.seal_key
    assert open_goal(RUNNER_KEY, goal).identity == "pi0_fast_droid"
    with pytest.raises(SealError, match="has no runner key"):
        open_goal(None, goal)
    with pytest.raises(SealError, match="does not open with this runner's key"):
        open_goal(bytes(32), goal)


def test_a_seal_opens_only_at_its_own_trial_and_run() -> None:
    goal = _goal(_sealer())
    for moved in (dataclasses.replace(goal, trial_id=4), dataclasses.replace(goal, attempt=2),
                  dataclasses.replace(goal, session_id="s2")):
        with pytest.raises(SealError):
            open_goal(RUNNER_KEY, moved)


def test_seals_hide_the_length_and_link_no_two_trials() -> None:
    sealer = _sealer()
    short, long = _goal(sealer, "a"), _goal(sealer, "ws://gpu-box.lab.example.org:8001/" + "x" * 150)
    assert len(short.sealed) == len(long.sealed)
    again = [_goal(sealer, "pi0", trial_id=t).sealed for t in (1, 2, 3)]
    assert len(set(again)) == 3  # the same policy in three trials: three unrelated seals
    assert _goal(sealer, "pi0", trial_id=1).sealed == again[0]  # a re-sent goal: the same bytes


def test_the_audit_recomputes_the_seal_from_the_revealed_key() -> None:
    goal = _goal(_sealer(), "pi0_fast_droid", trial_id=5, attempt=2)
    record = {"attempt": 2, "sealed": goal.sealed.hex()}
    s = session_seal_key(SESSION_KEY, "s1")
    assert seal_problem(record, s, "s1", 5, "pi0_fast_droid") == ""
    assert "not the seal of the planned policy" in seal_problem(record, s, "s1", 5, "pi0_flow_droid")
    assert "malformed" in seal_problem({"sealed": "zz"}, s, "s1", 5, "pi0_fast_droid")
    assert seal_identity(s, "s1", 5, 2, "pi0_fast_droid") == goal.sealed


def test_a_result_counts_only_with_the_runners_proof() -> None:
    sealer = _sealer()
    goal = _goal(sealer)
    opened = open_goal(RUNNER_KEY, goal)
    result = Result()
    assert sealer.result_problem(goal, result) == "no runner proof"
    result.proof = result_proof(opened.seal_key, goal, result)
    assert sealer.result_problem(goal, result) == ""
    forged = dataclasses.replace(result, auto_success=True)  # a changed result keeps no proof
    assert sealer.result_problem(goal, forged) == "a wrong runner proof"
    other = dataclasses.replace(result, proof=result_proof(bytes(32), goal, result))  # not the session's key
    assert sealer.result_problem(goal, other) == "a wrong runner proof"


def test_without_a_runner_key_goals_go_in_clear_and_need_no_proof() -> None:
    sealer = _sealer(None)
    goal = _goal(sealer)
    assert (goal.policy_id, goal.sealed, goal.seal_key) == ("pi0_fast_droid", b"", b"")
    assert open_goal(None, goal).identity == "pi0_fast_droid"
    assert sealer.result_problem(goal, Result()) == ""


def test_the_runner_key_file_is_a_key_file_line(tmp_path: pathlib.Path) -> None:
    path = write_keys(tmp_path / "runner.key", {"runner": RUNNER_KEY})
    assert read_runner_key(path) == RUNNER_KEY
    short = write_keys(tmp_path / "short.key", {"runner": secrets.token_bytes(16)})
    with pytest.raises(SealError, match="16 bytes; 32 needed"):
        read_runner_key(short)
    (tmp_path / "bad.key").write_bytes(b"runner \xff\xfe\n")
    with pytest.raises(SealError, match="runner key: cannot read key file"):
        read_runner_key(tmp_path / "bad.key")
