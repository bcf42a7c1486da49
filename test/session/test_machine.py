"""The session state machine on its own: an owner's journal is a list of events it hands back.

The owners (a local session, a hub station) are tested with their journals in test_session*.py and
test/hub/test_hub_work.py; here the rules themselves, and that a replay of the journaled events
rebuilds the same state.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstop_ros.session.errors import SessionError
from evalstop_ros.session.journal_format import Event
from evalstop_ros.session.machine import TrialMachine
from evalstop_ros.session.trials import TrialBook, TrialRecord
from evalstop_ros.session.values import PendingTrial, ScoreOutcome, SessionState


class _Owner:
    """The smallest owner: events in a list, trials requested by hand, a valid score accepted as is."""

    def __init__(self, events: list[Event] | None = None) -> None:
        self.events: list[Event] = []
        self.book = TrialBook()
        self.machine = TrialMachine("bench 'b1'", self.book, self.commit, self.pending, self.request)
        for event in events or []:
            self.apply(event)

    def commit(self, kind: str, trial_id: int | None, **payload: Any) -> None:
        self.apply(Event(len(self.events) + 1, 0, kind, trial_id, payload))

    def apply(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "score_accepted":
            self.book.apply(event)
        else:
            assert self.machine.apply(event) == ""

    def pending(self) -> TrialRecord | None:
        return next((r for r in self.book.trials.values() if not r.closed), None)

    def request(self, record: TrialRecord) -> PendingTrial:
        return PendingTrial(session_id="b1", trial_id=record.trial_id, round=record.round, attempt=record.attempt,
                            label=record.label, policy_id=record.policy, task=record.task, task_description="",
                            initial_condition="", reset_instructions="", token=record.token)

    def trial(self) -> int:
        trial_id = len(self.book.trials) + 1
        self.commit("trial_requested", trial_id, round=trial_id, policy_id="p", label="A", task="t",
                    initial_condition="", token=f"tok{trial_id}")
        return trial_id

    def score(self, trial_id: int, token: str, success: bool, progress: float, operator: str = "op") -> ScoreOutcome:
        def accept(record: TrialRecord, submission: dict[str, Any]) -> ScoreOutcome:
            self.commit("score_accepted", record.trial_id, submission=submission)
            return ScoreOutcome(True, False, "scored")
        return self.machine.submit_score(trial_id, token, success, progress, operator, accept=accept)


def test_the_life_cycle_and_its_re_sends() -> None:
    owner = _Owner()
    machine = owner.machine
    with pytest.raises(SessionError, match=r"cannot pause: bench 'b1' is idle"):
        machine.pause("early")
    machine.start()
    machine.pause("coffee")
    machine.pause("coffee")  # a re-sent request: nothing journaled
    machine.resume()
    machine.resume()
    with pytest.raises(SessionError, match="a reason is required"):
        machine.abort(" ")
    machine.abort("robot broken")
    machine.abort("robot broken")
    assert [e.kind for e in owner.events] == ["started", "paused", "resumed", "aborted"]
    with pytest.raises(SessionError, match=r"cannot resume: bench 'b1' is aborted"):
        machine.resume()


def test_faults_count_in_a_row_and_restart_on_resume_and_on_the_next_trial() -> None:
    owner = _Owner()
    owner.machine.start()
    trial = owner.trial()
    again = owner.machine.record_runner_result(trial, False, 1.0, "gripper fault")
    assert again is not None and again.attempt == 2 and owner.machine.faults == 1
    assert owner.machine.runner_message.startswith("runner error (error ")  # the category and an id, not its words
    owner.machine.record_runner_result(trial, False, 1.0, "gripper fault")
    assert owner.machine.faults == 2
    owner.machine.pause("fault limit")
    owner.machine.resume()
    assert owner.machine.faults == 0
    with pytest.raises(SessionError, match=r"runner result for trial 7, but the pending trial is 1"):
        owner.machine.record_runner_result(7, True, 1.0)
    with pytest.raises(SessionError, match="`duration_s` must be a finite number"):
        owner.machine.record_runner_result(trial, True, float("nan"))
    owner.machine.record_runner_result(trial, False, 1.0, "gripper fault")
    owner.trial()  # a trial requested starts its own count
    assert owner.machine.faults == 0


@pytest.mark.parametrize(("trial_id", "token", "success", "progress", "operator", "reason"), [
    (1, "tok1", True, 1.0, "o" * 65, "`operator` is longer than 64 characters (65)"),
    (9, "tok1", True, 1.0, "op", "unknown trial 9"),
    (1, "tok2", True, 1.0, "op", "wrong token for trial 1"),
    (1, "tok1", False, 1.5, "op", "progress"),
])
def test_a_score_is_checked_and_every_refusal_journaled(trial_id: int, token: str, success: bool, progress: float,
                                                       operator: str, reason: str) -> None:
    owner = _Owner()
    owner.machine.start()
    owner.machine.record_runner_result(owner.trial(), True, 1.0)
    outcome = owner.score(trial_id, token, success, progress, operator)
    assert not outcome.accepted and reason in outcome.reason
    assert owner.events[-1].kind == "score_rejected" and owner.machine.rejections == 1


def test_a_score_needs_a_run_and_a_running_owner_and_a_resent_one_is_a_duplicate() -> None:
    owner = _Owner()
    owner.machine.start()
    first = owner.trial()
    assert "no successful run" in owner.score(first, "tok1", True, 1.0).reason
    owner.machine.record_runner_result(first, True, 1.0, auto_score=(True, 1.0))
    held = owner.machine.held_auto_score()
    assert held is not None and held[0].trial_id == first and held[1:] == (True, 1.0)
    owner.machine.pause("coffee")
    assert owner.score(first, "tok1", True, 1.0).reason == "bench is paused; scores are accepted only while it runs"
    owner.machine.resume()
    assert owner.score(first, "tok1", True, 1.0).accepted
    second = owner.trial()
    resent = owner.score(first, "tok1", True, 1.0)  # an earlier trial's score, sent again while the next one waits
    assert resent.accepted and resent.duplicate and owner.events[-1].kind == "score_duplicate"
    assert "already scored" in owner.score(first, "tok1", False, 0.5).reason
    assert owner.pending() is not None and owner.pending().trial_id == second  # type: ignore[union-attr]


def test_a_replay_of_the_journaled_events_rebuilds_the_state() -> None:
    owner = _Owner()
    owner.machine.start()
    trial = owner.trial()
    owner.machine.record_runner_result(trial, False, 1.0, "gripper fault")
    owner.machine.pause("fault limit")
    replayed = _Owner(owner.events)
    assert (replayed.machine.state, replayed.machine.faults, replayed.machine.runner_message) == (
        SessionState.PAUSED, 1, owner.machine.runner_message)
    assert replayed.book.trials[trial].attempt == 2
    assert replayed.machine.apply(Event(99, 0, "started", None, {})) == "started in state paused"
