"""Tampered bags: each changes exactly one message, and the audit fails naming exactly that trial.

Every recording is a real session (EvaluationSession driven through a simulated lab) written as
a real bag with the rosbags writer, in sqlite3 and in mcap.  The expected codes are the
*evidence* the audit should find; the named trials must be exactly the tampered one.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from audit_support import (
    TAMPERED,
    alter_journal_score,
    alter_wire_score,
    bag,
    drop,
    inject_journal_score_after_stop,
    inject_score_after_stop,
    recording,
)

from evalstop_ros.audit import audit
from evalstop_ros.audit.synthetic import Message, simulated_key

STORAGES = ("sqlite3", "mcap")


@pytest.fixture(scope="module")
def recordings() -> dict[str, list[Message]]:
    """The BASE session scored by an operator (scores on trial_score) and automatically."""
    operator = recording("operator")
    return {"operator": operator, "auto": recording("auto"),
            "wire-only": [m for m in operator if m.topic != "session_event"]}


def _key(source: str) -> bytes | None:
    """A wire-only bag lacks the revealed key (it is on session_event): the auditor passes it."""
    return simulated_key("sim") if source == "wire-only" else None


def _same_trial(edit: Callable[[list[Message], int], list[Message]]) -> Callable[[list[Message]], tuple[list[Message], int]]:
    return lambda messages: (edit(messages, TAMPERED), TAMPERED)


# (recording, tamper, evidence the audit must report)
CASES: list[tuple[str, Callable[[list[Message]], tuple[list[Message], int]], set[str]]] = [
    # the operator's score on trial_score no longer matches what the manager journaled
    ("operator", _same_trial(alter_wire_score), {"score_mismatch"}),
    # the manager's journaled score changed: the wire disagrees, and the recomputation no
    # longer reproduces the published means and p-values from that pair on
    ("operator", _same_trial(alter_journal_score), {"score_mismatch", "status_mismatch"}),
    # automatic scores exist only in the journal stream: the published running means pin the trial
    ("auto", _same_trial(alter_journal_score), {"status_mismatch"}),
    # without a journal stream the wire scores are all there is: again the published means
    ("wire-only", _same_trial(alter_wire_score), {"status_mismatch"}),
    # a score injected after the stop, for a trial never requested
    ("operator", inject_score_after_stop, {"after_stop", "score_not_requested", "score_mismatch"}),
    ("auto", inject_journal_score_after_stop, {"after_stop", "score_not_requested"}),
    ("wire-only", inject_score_after_stop, {"after_stop", "score_not_requested", "score_unacknowledged"}),
    # a missing trial: its score is gone (from the wire, or from the journal stream) ...
    ("operator", _same_trial(lambda m, t: drop(m, "trial_score", t)), {"score_mismatch"}),
    ("auto", _same_trial(lambda m, t: drop(m, "session_event", t, "score_accepted")),
     {"unscored_trial", "journal_gap", "status_mismatch"}),
    ("wire-only", _same_trial(lambda m, t: drop(m, "trial_score", t)), {"unscored_trial", "status_mismatch"}),
]


def _case_id(case: tuple[str, Any, set[str]]) -> str:
    return f"{case[0]}-{'+'.join(sorted(case[2]))}"


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("scoring", ["operator", "auto", "wire-only"])
def test_untampered_recording_verifies(recordings: dict[str, list[Message]], tmp_path: pathlib.Path, storage: str,
                                       scoring: str) -> None:
    report = audit(bag(tmp_path / "bag", recordings[scoring], storage), key=_key(scoring))
    assert report.verified, [v.message for v in report.violations]
    assert [(t.metric, t.result.decision.name, t.result.stopping_trial) for t in report.tests] == \
        [("success", "B_BETTER", 16), ("progress", "B_BETTER", 18)]
    assert all(t.reproduced and t.checked > 0 for t in report.tests)
    # the tampered trial is one both tests consumed, so altering it must change what they saw
    assert all(TAMPERED in t.trials_a + t.trials_b for t in report.tests)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_tampered_recording_fails_naming_the_trial(recordings: dict[str, list[Message]], tmp_path: pathlib.Path,
                                                   storage: str, case: tuple[str, Any, set[str]]) -> None:
    source, tamper, evidence = case
    messages, trial_id = tamper(recordings[source])
    report = audit(bag(tmp_path / "bag", messages, storage), key=_key(source))
    codes = {v.code for v in report.violations}
    assert not report.verified
    assert evidence <= codes, (evidence, [(v.code, v.message) for v in report.violations])
    named = [(v.code, v.trial_ids, v.message) for v in report.violations]
    if evidence == {"status_mismatch"} and report.named_trials != (trial_id,):
        # only the published statistics show the change: the running means that pinned the one trial are
        # withheld while the session runs (blinding), and the p-values name the pair it belongs to
        assert len(report.named_trials) == 2 and trial_id in report.named_trials, named
        assert all(v.trial_ids == report.named_trials for v in report.violations), named
    else:
        assert report.named_trials == (trial_id,), named
        assert any(f"trial {trial_id}" in v.message for v in report.violations)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4], CASES[8]], ids=_case_id)
def test_cli_exit_status_and_named_trial(recordings: dict[str, list[Message]], tmp_path: pathlib.Path,
                                         evalstop: Any, case: tuple[str, Any, set[str]]) -> None:
    source, tamper, _ = case
    messages, trial_id = tamper(recordings[source])
    done = evalstop("audit", str(bag(tmp_path / "bag", messages, "mcap")))
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    # an automatic score edited in the journal shows only in the published statistics: the p-values name its
    # pair (the running means that pinned the trial itself are withheld while the session runs: blinding)
    named = f"{trial_id}, {trial_id + 1}" if case is CASES[2] else str(trial_id)
    assert any(line.startswith("VIOLATION ") and (f"trial {trial_id}" in line or f"trials {trial_id}" in line)
               for line in lines), done.stdout
    assert lines[-1].startswith("audit: FAILED: ") and lines[-1].endswith(f"naming trial(s) {named}"), lines[-1]


@pytest.mark.parametrize("case", [None, CASES[1], CASES[6]], ids=["clean", "altered", "injected"])
def test_sqlite3_and_mcap_audit_identically(recordings: dict[str, list[Message]], tmp_path: pathlib.Path,
                                            audit_json: Any, case: tuple[str, Any, set[str]] | None) -> None:
    messages = recordings["operator"] if case is None else case[1](recordings[case[0]])[0]
    outputs = []
    for storage in STORAGES:
        key = _key(case[0] if case else "operator")
        status, payload = audit_json(bag(tmp_path / storage, messages, storage), *(["--key", key.hex()] if key else []))
        assert payload.pop("storage") == storage
        assert payload.pop("source") == str(tmp_path / storage)
        outputs.append((status, payload))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == (0 if case is None else 1)


@pytest.mark.parametrize("storage", STORAGES)
def test_request_missing_from_the_wire_is_a_recording_gap(recordings: dict[str, list[Message]],
                                                          tmp_path: pathlib.Path, storage: str) -> None:
    """trial_request keeps the last 256 requests, so a slow recorder may miss one: the journal
    stream has it, the audit verifies and says which requests were not recorded."""
    messages, trial = _same_trial(lambda m, t: drop(m, "trial_request", t))(recordings["operator"])
    report = audit(bag(tmp_path / "bag", messages, storage))
    assert report.verified, [v.message for v in report.violations]
    assert any(f"trial_request of trial(s) {trial} not recorded" in note for note in report.notes), report.notes


def test_answers_before_the_first_recorded_are_a_recording_gap_and_a_lost_one_after_is_not(
        recordings: dict[str, list[Message]], tmp_path: pathlib.Path) -> None:
    """score_ack is volatile: a recorder that matched the manager's publisher late lacks the answers
    journaled before the first one it recorded (journal order: two arms answer out of trial order, and
    a trial answered twice may lose its first answer only): a gap of the recording, noted; an answer
    missing after it is a mismatch naming its trial."""
    messages = recordings["operator"]
    acks = [m for m in messages if m.topic == "score_ack"]
    late = [m for m in messages if not any(m is a for a in acks[:3])]  # the first three answers lost
    report = audit(bag(tmp_path / "late", late, "mcap"))
    assert report.verified, [v.message for v in report.violations]
    assert any(note.startswith("score_ack was recorded from its first answer on: the answers to trial(s) "
                               f"{', '.join(str(a.msg.trial_id) for a in acks[:3])} came before it") for note in report.notes)
    lost = acks[5].msg.trial_id
    report = audit(bag(tmp_path / "lost", [m for m in messages if m is not acks[5]], "mcap"))
    assert not report.verified and {v.code for v in report.violations} == {"ack_mismatch"}
    assert report.named_trials == (lost,), [v.message for v in report.violations]
