"""The verifier's checks one by one: corrections, STEP replay, configuration and level changes, tokens."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import numpy as np
import pytest
from audit_support import TAMPERED, bag, make_config, recording

from evalstop_ros.audit import audit
from evalstop_ros.audit.synthetic import Message, simulated_key
from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.plan import Plan
from evalstop_ros.stats.step import step_uniforms


def _codes(report: Any) -> set[str]:
    return {v.code for v in report.violations}


def _replace(messages: list[Message], topic: str, index: int, **changes: Any) -> list[Message]:
    """The ``index``-th message of ``topic`` with ``changes`` applied."""
    positions = [i for i, m in enumerate(messages) if m.topic == topic]
    out = list(messages)
    target = out[positions[index]]
    out[positions[index]] = target._replace(msg=dataclasses.replace(target.msg, **changes))
    return out


def correct(trial_id: int, reason: str) -> Any:
    """An edit that changes ``trial_id``'s score to whichever of two scores it does not have."""

    def edit(session: EvaluationSession) -> object:
        outcome = None
        for success, progress in ((False, 0.25), (True, 1.0)):
            outcome = session.correct_score(trial_id, success, progress, reason)
            if outcome.applied:
                return outcome
        raise AssertionError(outcome)

    return edit


def test_corrections_and_voids_with_reasons_verify(tmp_path: pathlib.Path) -> None:
    # A correction of trial 3 after trial 6, a void of trial 5 (and its re-run) after trial 8: the
    # published states before each edit were computed on the old scores; the audit replays
    # each against the scores as they were then (its epoch).
    edits = {6: correct(3, "operator mis-click"), 8: lambda s: s.void_score(5, "robot bumped the table")}
    messages = recording("auto", edits=edits)
    kinds = [m.msg.kind for m in messages if m.topic == "session_event"]
    assert "correction" in kinds and "void" in kinds
    report = audit(bag(tmp_path / "bag", messages, "mcap"))
    assert report.verified, [v.message for v in report.violations]
    trials = {t.trial_id: t for t in report.trials}
    assert trials[3].corrected and trials[5].voided
    assert any(t.rerun_of == 5 for t in report.trials)


def test_correction_without_reason_is_flagged(tmp_path: pathlib.Path) -> None:
    messages = recording("auto", edits={6: correct(3, "mis-click")})
    index = [m.msg.kind for m in messages if m.topic == "session_event"].index("correction")
    payload = json.loads([m for m in messages if m.topic == "session_event"][index].msg.payload_json)
    payload["reason"] = " "
    tampered = _replace(messages, "session_event", index, payload_json=json.dumps(payload, sort_keys=True))
    report = audit(bag(tmp_path / "bag", tampered, "sqlite3"))
    assert [(v.code, v.trial_ids) for v in report.violations] == [("edit_without_reason", (3,))]


def test_step_randomization_is_replayed_from_the_seed(tmp_path: pathlib.Path) -> None:
    report = audit(bag(tmp_path / "bag", recording("operator"), "mcap"))
    step = report.tests[0]
    assert step.method == "step" and step.step is not None
    assert step.step.seed == Plan(make_config()).step_seed(0, 0)  # comparison 0, metric 0
    assert step.step.stopping_trial == step.result.stopping_trial == 16
    assert step.step.draw == float(step_uniforms(step.step.seed, 16, 1)[0])  # U_n from (seed, n) alone
    assert 0.0 < step.step.weight and step.step.draw < step.step.weight


def test_config_change_mid_session_names_the_fields(tmp_path: pathlib.Path) -> None:
    messages = recording("operator")
    first = next(m for m in messages if m.topic == "session_config")
    changed = make_config(alpha=0.1, n_max=100)
    second = first._replace(stamp_ns=messages[40].stamp_ns + 1, msg=dataclasses.replace(
        first.msg, config_json=changed.canonical_json(), config_hash=changed.config_hash))
    report = audit(bag(tmp_path / "bag", sorted([*messages, second], key=lambda m: m.stamp_ns), "mcap"))
    (violation,) = [v for v in report.violations if v.code == "config_changed"]
    assert "alpha: 0.05 -> 0.1" in violation.message and "n_max: 50 -> 100" in violation.message


def test_a_recording_of_an_earlier_development_version_is_refused_with_a_clear_error(tmp_path: pathlib.Path) -> None:
    """A bag whose configuration leaves fields out (the canonical form of an earlier development
    version, self-consistent: its hash is that form's) is not this version's journal schema."""
    import hashlib

    from evalstop_ros.audit.errors import AuditError

    messages = recording("operator")
    first = next(m for m in messages if m.topic == "session_config")
    older = {k: v for k, v in json.loads(first.msg.config_json).items() if k not in ("schedule", "confirm_reset")}
    text = json.dumps(older, sort_keys=True, separators=(",", ":"))
    messages = [m._replace(msg=dataclasses.replace(m.msg, config_json=text,
                                                   config_hash=hashlib.sha256(text.encode()).hexdigest()))
                if m.topic == "session_config" else m for m in messages]
    with pytest.raises(AuditError, match=r"not in this version's canonical form \(confirm_reset: .*schedule: .*"
                                         r"another \(development\) version"):
        audit(bag(tmp_path / "bag", messages, "mcap"))


@pytest.mark.parametrize(("field", "value", "code"), [
    ("alpha", 0.02, "alpha_changed"),  # the comparison ran at another level than pre-registered
    ("method", "wsr", "method_changed"),
])
def test_level_or_method_change_on_a_published_status(tmp_path: pathlib.Path, field: str, value: object,
                                                      code: str) -> None:
    report = audit(bag(tmp_path / "bag", _replace(recording("operator"), "comparison_status", 5, **{field: value}),
                       "mcap"))
    assert code in _codes(report)
    assert report.named_trials == ()


def test_accepted_score_with_a_wrong_token(tmp_path: pathlib.Path) -> None:
    # Wire-only bag: the manager acknowledged a score whose token is not its trial's.
    wire = [m for m in recording("operator") if m.topic != "session_event"]
    index = [m.msg.trial_id for m in wire if m.topic == "trial_score"].index(TAMPERED)
    report = audit(bag(tmp_path / "bag", _replace(wire, "trial_score", index, token="ffffffffffff"), "sqlite3"),
                   key=simulated_key("sim"))
    assert [(v.code, v.trial_ids) for v in report.violations] == [("token_mismatch", (TAMPERED,))]


def test_published_pvalue_off_in_the_last_digit_is_caught(tmp_path: pathlib.Path) -> None:
    messages = recording("operator")
    statuses = [m.msg for m in messages if m.topic == "comparison_status"]
    index = next(i for i, m in enumerate(statuses) if m.metric == "progress" and m.n == 16)
    pvalue = statuses[index].pvalue
    assert pvalue < 1.0
    report = audit(bag(tmp_path / "bag", _replace(messages, "comparison_status", index,
                                                    pvalue=float(np.nextafter(pvalue, 2.0)) * (1 + 1e-8)), "mcap"))
    (violation,) = [v for v in report.violations if v.code == "status_mismatch"]
    assert "pvalue published" in violation.message


def test_decision_published_without_reason_to_stop(tmp_path: pathlib.Path) -> None:
    # A comparison_status claiming B_BETTER at pair 5 that the data do not support.
    messages = recording("operator")
    index = next(i for i, m in enumerate(m for m in messages if m.topic == "comparison_status")
                 if m.msg.metric == "success" and m.msg.n == 5)
    report = audit(bag(tmp_path / "bag", _replace(messages, "comparison_status", index, decision=1, stopping_trial=5),
                       "mcap"))
    (violation,) = [v for v in report.violations if v.code == "status_mismatch"]
    assert "decision published B_BETTER, recomputed CONTINUE" in violation.message


def test_journal_audit_directly(tmp_path: pathlib.Path) -> None:
    messages = recording("auto", workdir=tmp_path)
    journal = tmp_path / "sim.db"
    report = audit(journal)
    assert report.record.kind == "journal" and report.verified, [v.message for v in report.violations]
    wire = audit(bag(tmp_path / "bag", messages, "mcap"))
    assert [t.to_dict() | {"checked": 0, "published": None} for t in report.tests] == \
        [t.to_dict() | {"checked": 0, "published": None} for t in wire.tests]


def test_a_score_refused_after_the_stop_is_noted_not_a_violation(tmp_path: pathlib.Path) -> None:
    """An operator's score that reaches a finished session is refused and journaled (``score_rejected``):
    nothing entered, so the audit notes it (with several arms an operator may score one arm's trial as
    the decision comes from another's); a score *counted* after the stop stays a violation (below)."""
    recording("operator", workdir=tmp_path)
    with EvaluationSession.open(tmp_path / "sim.db", make_config(), "sim", durable=False) as session:
        assert session.state.value == "finished"
        last = max(session._book.trials)
        outcome = session.submit_score(last, session._book.trials[last].token, False, 0.125, "operator")
        assert not outcome.accepted, outcome
    report = audit(tmp_path / "sim.db")
    assert report.verified, [v.message for v in report.violations]
    assert any(f"1 score(s) came after the stop and were refused or duplicates (trial(s) {last}): never used" in note
               for note in report.notes), report.notes


def test_journal_with_a_score_after_the_stop(tmp_path: pathlib.Path) -> None:
    recording("auto", workdir=tmp_path)
    config = make_config(scoring="auto")
    with EvaluationSession.open(tmp_path / "sim.db", config, "sim", durable=False) as session:
        assert session.state.value == "finished"
        journal = session._journal  # the append-only journal accepts any event: that is what audits are for
        journal.append("score_accepted", 99, submission={"token": "x", "success": True, "progress": 1.0,
                                                         "operator": "late", "notes": "", "preference": ""})
    report = audit(tmp_path / "sim.db")
    assert report.named_trials == (99,)
    assert {"after_stop", "score_not_requested"} <= _codes(report)
