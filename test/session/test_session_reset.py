"""The operator's reset confirmation (``confirm_reset``): phases, journal, replay, audit, undo notes."""

from __future__ import annotations

import pathlib

import pytest
import session_sim as sim

from evalstop_ros.audit import audit
from evalstop_ros.session import EvaluationSession, SessionError, offline_decisions, read_journal
from evalstop_ros.session.publishing import diagnostics

FAST = {"metrics": [{"name": "success", "method": "nscore"}]}


def open_session(path: pathlib.Path, **overrides: object) -> EvaluationSession:
    config = sim.make_config(confirm_reset=True, **FAST, **overrides)
    return EvaluationSession.open(path, config, "s1", durable=False, plan_key=sim.TEST_KEY)


def test_a_trial_waits_for_its_reset_then_its_run_then_its_score(tmp_path: pathlib.Path) -> None:
    with open_session(tmp_path / "s.db") as session:
        session.start()
        trial = session.next_trial()
        assert trial is not None and session.status().awaiting == "reset"
        (entry,) = diagnostics(session, node="m", hardware_id="r", runner="", max_attempts=3)[:1]
        assert (entry.level, entry.message) == (0, "running, 0 trials scored; trial 1 waits for the operator's "
                                                   "scene reset")
        with pytest.raises(SessionError, match="scene reset was not confirmed"):
            session.record_runner_result(trial.trial_id, True, 1.0)
        assert session.confirm_reset(trial.trial_id).applied
        assert session.status().awaiting == "run"
        again = session.confirm_reset(trial.trial_id, trial.attempt)  # a re-sent request: same answer
        assert (again.applied, again.reason) == (True, "trial 1: reset already confirmed")
        session.record_runner_result(trial.trial_id, False, 1.0, "runner fault")
        retry = session.next_trial()
        assert retry is not None and retry.attempt == 2 and session.status().awaiting == "reset"
        stale = session.confirm_reset(trial.trial_id, 1)  # sent for the failed run: must not start the next
        assert not stale.applied and "attempt 1 is over" in stale.reason
        assert session.confirm_reset(trial.trial_id, 2).applied
        session.record_runner_result(trial.trial_id, True, 1.0)
        assert session.status().awaiting == "score"
        assert session.submit_score(trial.trial_id, trial.token, True, 1.0).accepted
        nxt = session.next_trial()
        assert nxt is not None and session.status().awaiting == "reset"
        other = session.confirm_reset(trial.trial_id)  # trial 1 is done: a stale confirmation
        assert not other.applied and other.reason.startswith("trial 1 is not the pending trial (trial 2 is)")
        assert session.confirm_reset(trial.trial_id, 2).reason == "trial 1: reset already confirmed"  # a late re-send
        assert not session.confirm_reset(99).applied and not session.confirm_reset(True).applied  # type: ignore[arg-type]
        session.pause("break")
        assert not session.confirm_reset(nxt.trial_id).applied
        session.resume()
    kinds = [(e.kind, e.trial_id, e.payload.get("attempt")) for e in read_journal(tmp_path / "s.db").events
             if e.kind == "reset_confirmed"]
    assert kinds == [("reset_confirmed", 1, 1), ("reset_confirmed", 1, 2)]
    with open_session(tmp_path / "s.db") as replayed:  # replay gives the same phase
        assert replayed.status().awaiting == "reset" and replayed.pending_trial().trial_id == 2  # type: ignore[union-attr]
        assert replayed.confirm_reset(2).applied and replayed.status().awaiting == "run"


def test_without_confirm_reset_a_trial_goes_straight_to_its_run(tmp_path: pathlib.Path) -> None:
    config = sim.make_config(**FAST)
    assert config.to_dict()["confirm_reset"] is False
    with EvaluationSession.open(tmp_path / "s.db", config, "s1", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        trial = session.next_trial()
        assert trial is not None and session.status().awaiting == "run"
        refused = session.confirm_reset(trial.trial_id)
        assert not refused.applied and "confirm_reset: false" in refused.reason


def test_a_confirmed_session_audits_and_reanalyses_alike(tmp_path: pathlib.Path) -> None:
    """Reset confirmations change no score: the offline analysis and the audit agree with the session."""
    path = tmp_path / "s.db"
    rates = {"pi_base": 0.1, "pi_new": 0.9}
    with open_session(path, policies=["pi_base", "pi_new"]) as session:
        session.start()
        while (trial := session.next_trial()) is not None:
            session.confirm_reset(trial.trial_id)
            session.record_runner_result(trial.trial_id, True, 1.0)
            success, progress = sim.outcome(trial.policy_id, trial.trial_id, rates)
            session.submit_score(trial.trial_id, trial.token, success, progress)
        live = [(c.decision, c.stopping_trial) for c in session.comparisons()]
        config = session.config
    assert [(o.result.decision, o.result.stopping_trial) for o in offline_decisions(config, path)] == live
    sim.audit_verified(path)


def test_the_audit_names_a_run_without_a_confirmed_reset(tmp_path: pathlib.Path) -> None:
    """A journal whose runner ran a trial before the operator confirmed its reset (forged without the
    session's check) is a protocol violation."""
    from evalstop_ros.session.journal import Journal

    config = sim.make_config(confirm_reset=True, **FAST)
    path = tmp_path / "s.db"
    with open_session(path) as session:
        session.start()
        trial = session.next_trial()
        assert trial is not None
        token = trial.token
    journal = Journal.open(path, "s1", config, durable=False)
    try:
        journal.write("runner_result", 1, ok=True, duration_s=1.0, message="")
        journal.write("score_accepted", 1, submission={"token": token, "success": True, "progress": 1.0,
                                                       "operator": "", "notes": "", "preference": ""})
    finally:
        journal.close()
    report = audit(path)
    assert [v.code for v in report.violations if v.code == "reset_unconfirmed"] == ["reset_unconfirmed"]


def test_undo_says_which_trial_runs_the_voided_one_again(tmp_path: pathlib.Path) -> None:
    with open_session(tmp_path / "s.db") as session:
        session.start()
        first = session.next_trial()
        assert first is not None
        session.confirm_reset(first.trial_id)
        session.record_runner_result(first.trial_id, True, 1.0)
        session.submit_score(first.trial_id, first.token, True, 1.0)
        pending = session.next_trial()
        assert pending is not None
        outcome = session.undo_last("wrong button")
        assert outcome.reason == (f"trial 1 voided; it runs again as trial 3 after the pending trial 2 (label "
                                  f"{first.label}, round 1, condition {first.initial_condition})")
        given_up = session.void_score(pending.trial_id, "scene broken")
        assert given_up.applied and given_up.reason == "trial 2 voided; given up (not run again)"
        rerun = session.next_trial()
        assert rerun is not None and (rerun.trial_id, rerun.label) == (3, first.label)


def test_the_operator_sees_the_labels_of_the_round_and_no_policy(tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session.publishing import request_fields

    policies = ["pi_a", "pi_b", "pi_c"]
    with open_session(tmp_path / "s.db", policies=policies, blinding="per-round") as session:
        session.start()
        seen: dict[int, set[str]] = {}
        for _ in range(6):  # two paired rounds of three policies
            trial = session.next_trial()
            assert trial is not None
            prompt = request_fields(trial)
            assert not set(policies) & {str(v) for v in prompt.values()}, "no policy id for the operator"
            labels = prompt["round_labels"]
            assert labels == sorted(session.plan.label(p, trial.round) for p in policies) and trial.label in labels
            seen.setdefault(trial.round, set()).add(trial.label)
            session.confirm_reset(trial.trial_id)
            session.record_runner_result(trial.trial_id, True, 1.0)
            session.submit_score(trial.trial_id, trial.token, True, 1.0)
        assert seen == {r: {session.plan.label(p, r) for p in policies} for r in (1, 2)}


def test_a_recorded_confirm_reset_session_audits_from_its_bag(tmp_path: pathlib.Path) -> None:
    """The manager's messages of a confirm_reset session (simulated like the audit's drills), as a real
    bag: the reset phase is published, the confirmations are journaled, and the audit verifies it."""
    from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag

    config = sim.make_config(confirm_reset=True, **FAST)
    messages = simulate_recording(config, SimulatedLab({"pi0": 0.2, "pi1": 0.9}), session_id="s1")
    states = [m.msg.state_name for m in messages if m.topic == "session_status"]
    assert "running:awaiting_reset" in states and "running:awaiting_run" in states
    events = [m.msg for m in messages if m.topic == "session_event"]
    runs = [e.trial_id for e in events if e.kind == "runner_result"]
    assert runs and runs == [e.trial_id for e in events if e.kind == "reset_confirmed"]
    sim.audit_verified(write_bag(tmp_path / "bag", messages, storage="mcap"))
