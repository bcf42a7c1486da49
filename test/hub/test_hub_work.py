"""A station without ROS (``station_manager``'s work): a :class:`StationSession` supplied by
:class:`StationWork` against a real hub process.

Blinded trials (arm A, then B; the address for the runner only), scores checked by the session's
state machine (token, run first, duplicates of either arm, field lengths), the result journaled
before the upload, kept while the hub is down and uploaded once it is back; pause, resume and
abort. The station is driven by the session's own trial loop (:class:`TrialDriver`), so it keeps a session's rules:
the fault limit pauses it, a void gives the assignment up (the hub requeues it), an automatic
score that came while paused is held until it resumes, a run without one waits for the operator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hub_support import HubProcess, call, hub_journal, register_hub, requeued, wait_for

from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.station_journal import read_station_journal
from evalstop_ros.session.driver import Action, Next, TrialDriver, Verdict
from evalstop_ros.session.errors import SessionError
from evalstop_ros.station.client import StationClient
from evalstop_ros.station.session import StationSession
from evalstop_ros.station.work import StationWork


@pytest.fixture
def hub(tmp_path: pathlib.Path) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    db = str(tmp_path / "hub.sqlite")
    keys, viewer = register_hub(db, {"sure": 1, "never": 0}, ("s1", "s2"))
    process = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "30", "--tasks", "towel", "--seed", "1"])
    process.start()
    try:
        yield process, keys
    finally:
        process.stop()


def _work(hub: HubProcess, key: str, directory: pathlib.Path, name: str, trials: int,
          max_faults: int = 3, scoring: str = "auto") -> StationWork:
    work = StationWork(StationClient(hub.url, key, directory, timeout=2.0), name, trials=trials, max_faults=max_faults,
                       scoring=scoring, retry_min=0.05, retry_max=0.3)
    work.start()
    return work


def _control(work: StationWork, command: str, reason: str = "") -> bool:
    """``session_control`` as the node applies it: whether the session took the command."""
    try:
        if command == "resume":
            work.session.resume()
        else:
            getattr(work.session, command)(reason)
    except SessionError:
        return False
    work.wake()
    return True


@contextlib.contextmanager
def _driven(hub: HubProcess, key: str, directory: pathlib.Path, name: str, trials: int,
            **rules: Any) -> Iterator[tuple[StationWork, TrialDriver]]:
    """A started station and the session's trial loop over it, once it holds an assignment; closed after."""
    work = _work(hub, key, directory, name, trials, **rules)
    try:
        wait_for(lambda: work.session.pending_trial() is not None, 30, "an assignment")
        yield work, TrialDriver(work.session, "run_trial")
    finally:
        work.close()


def test_a_lease_is_journaled_once_its_ticket_resolves(hub: tuple[HubProcess, dict[str, str]],
                                                       tmp_path: pathlib.Path) -> None:
    """A ``leased`` line means the station holds the work: a lease whose runner ticket was not
    resolved (here: refused) leaves no line; the session journals a resolved one with arm A's trial."""
    process, keys = hub
    client = StationClient(process.url, keys["s2"], tmp_path / "s2", timeout=2.0)
    work = client.lease()
    assert client.records() == []
    with pytest.raises(HubError) as refused:
        client.resolve(dict(work, runner_ticket="0" * len(work["runner_ticket"])))
    assert refused.value.status == 401 and client.records() == []
    addresses = client.resolve(work)
    assert set(addresses) == {"A", "B"} and set(addresses.values()) <= {"sim://success=1", "sim://success=0"}
    assert client.records() == []
    session = StationSession(client, "s2")
    try:
        assert session.assign(work, addresses) and not session.assign(work, addresses)  # one assignment at a time
        rules, started, leased, requested = client.records()
        assert (rules["kind"], started["kind"]) == ("rules", "started")
        assert (leased["kind"], leased["assignment_id"], leased["task"]) == ("leased", work["assignment_id"], "towel")
        assert (requested["kind"], requested["trial_id"], requested["label"]) == ("trial_requested", 1, "A")
        assert "sim://" not in str(client.records())  # the addresses are for the runner only
    finally:
        client.close()


def test_a_second_station_on_one_directory_is_refused(hub: tuple[HubProcess, dict[str, str]],
                                                       tmp_path: pathlib.Path) -> None:
    """One writer per station journal (the standard journal's lock): a second station started on
    the directory is refused before it leases anything; once the first closes, it starts."""
    process, keys = hub
    directory = tmp_path / "s1"
    first = _work(process, keys["s1"], directory, "s1", trials=0)
    try:
        with pytest.raises(HubError, match=r"station journal: journal .*station\.db' is in use by another process"):
            StationWork(StationClient(process.url, keys["s1"], directory, timeout=2.0), "s1")
    finally:
        first.close()
    second = StationWork(StationClient(process.url, keys["s1"], directory, timeout=2.0), "s1")
    second.close()
    with pytest.raises(HubError, match=r"belongs to station 's1', not 's2'"):
        StationWork(StationClient(process.url, keys["s2"], directory, timeout=2.0), "s2")


def test_trials_scores_and_an_outage(hub: tuple[HubProcess, dict[str, str]], tmp_path: pathlib.Path) -> None:
    process, keys = hub
    with _driven(process, keys["s1"], tmp_path / "s1", "s1", trials=2) as (work, driver):
        trial = work.session.pending_trial()
        assert trial is not None
        assert (trial.session_id, trial.trial_id, trial.round, trial.label, trial.attempt) == ("hub:s1", 1, 1, "A", 1)
        assert trial.policy_id in ("sim://success=1", "sim://success=0") and trial.task == "towel"
        prompt = str(trial.operator_prompt())
        assert "sim://" not in prompt and "sure" not in prompt and "never" not in prompt
        assert work.status().state == "running" and work.session.status().awaiting == "run"

        assert "no successful run" in work.session.submit_score(1, trial.token, True, 1.0, "op").reason
        assert driver.advance() == Next(Action.RUN, trial)
        assert driver.run_done(trial, False, 1.0, "gripper fault").verdict is Verdict.RETRY  # runs again
        assert work.session.pending_trial().attempt == 2  # type: ignore[union-attr]
        assert driver.run_done(dataclasses.replace(trial, trial_id=7), True, 1.0).verdict is Verdict.IGNORED
        # scoring auto, but the runner sent no score: the operator scores it
        assert driver.run_done(trial, True, 1.0).verdict is Verdict.OPERATOR and work.session.status().awaiting == "score"
        assert driver.advance().action is Action.SCORE
        assert "wrong token" in work.session.submit_score(1, "0" * 12, True, 1.0, "op").reason
        assert "longer than 64" in work.session.submit_score(1, trial.token, True, 1.0, "o" * 65).reason
        assert "progress" in work.session.submit_score(1, trial.token, False, 1.5, "op").reason
        assert work.session.submit_score(1, trial.token, True, 0.5, "op").accepted
        again = work.session.submit_score(1, trial.token, True, 0.5, "op")  # the answer was lost: resent
        assert again.accepted and again.duplicate
        second = work.session.pending_trial()
        assert second is not None and (second.trial_id, second.label, second.attempt) == (2, "B", 1)
        assert second.token != trial.token
        again = work.session.submit_score(1, trial.token, True, 0.5, "op")  # arm A's score resent during arm B
        assert again.accepted and again.duplicate
        assert not work.client.pending()  # nothing journaled before the second arm's score
        assert driver.run_done(second, True, 1.0).verdict is Verdict.OPERATOR
        assert work.session.submit_score(2, second.token, False, 0.25, "op").accepted
        wait_for(lambda: work.status().results_acked == 1, 30, "the first result acknowledged")
        first = next(r for r in work.client.records() if r["kind"] == "result")
        assert (first["score_a"], first["score_b"]) == (1.0, 0.25)  # a success scores 1, else its progress

        # the hub goes down during the second assignment: its result is kept, then uploaded
        wait_for(lambda: (work.session.pending_trial() or trial).round == 2, 30, "the second assignment")
        third = work.session.pending_trial()
        assert third is not None and (third.trial_id, third.round) == (3, 2)
        process.kill()
        for _ in ("A", "B"):  # the runner's own scores, submitted by the trial loop
            t = work.session.pending_trial()
            assert t is not None
            assert driver.run_done(t, True, 1.0, auto_score=(True, 1.0)).verdict is Verdict.RAN
            auto = driver.advance().auto
            assert auto is not None and auto.trial == t and auto.outcome.accepted
        wait_for(lambda: bool(work.status().problem), 30, "the outage noticed")
        status = work.status()
        assert status.results_pending == 1 and not work.finished and status.state == "waiting_for_work"
        [diagnostic] = work.diagnostics(status, node="evaluation_manager", hardware_id="run_trial", runner="")
        assert diagnostic.level == 1 and "unreachable" in diagnostic.message and "kept locally" in diagnostic.message
        assert keys["s1"] not in str(diagnostic)
        time.sleep(0.5)  # the station keeps retrying (with back-off) while the hub is down
        assert work.client.pending() and not work.finished
        process.start()
        wait_for(lambda: work.finished, 30, "the station to finish")
        assert work.status().state == "finished" and work.status().results_acked == 2
        assert work.status_fields(work.status())["state"] == 3
        assert call(process.url + "/v1/status", key=process.key)[1]["results"] == 2


class _HeldAfterSync(StationClient):
    """The station's client, whose hub thread, once ``armed``, stops right after a sync (as on a
    starved machine) until the test lets it go: the moment in which the node journals a result."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.armed, self.held, self.release = threading.Event(), threading.Event(), threading.Event()

    def sync(self) -> int:
        remaining = super().sync()
        if self.armed.is_set():
            self.armed.clear()
            self.held.set()
            self.release.wait(30)
        return remaining


def test_a_result_journaled_after_a_sync_is_uploaded_before_new_work_is_asked_for(
        hub: tuple[HubProcess, dict[str, str]], tmp_path: pathlib.Path) -> None:
    """The node journals an assignment's result just after the hub thread synced: the station
    uploads it before it asks for more work. Asking first tells the hub the station lost its
    lease (a restart): the hub requeued the assignment and refused its result (410), a robot's
    trial thrown away (seen once in ``test_hub_ros_stations`` under load, before the fix)."""
    process, keys = hub
    client = _HeldAfterSync(process.url, keys["s1"], tmp_path / "s1", timeout=2.0)
    work = StationWork(client, "s1", trials=2, retry_min=0.05, retry_max=0.3)
    work.start()
    try:
        wait_for(lambda: work.session.pending_trial() is not None, 30, "an assignment")
        driver = TrialDriver(work.session, "run_trial")
        for arm in ("A", "B"):
            trial = work.session.pending_trial()
            assert trial is not None and trial.label == arm
            assert driver.run_done(trial, True, 1.0).verdict is Verdict.OPERATOR
            if arm == "B":
                client.armed.set()
                _control(work, "pause")  # any call that wakes the hub thread up
                _control(work, "resume")
                wait_for(client.held.is_set, 30, "the hub thread held after a sync")
            assert work.session.submit_score(trial.trial_id, trial.token, True, 1.0, "op").accepted
        assert client.pending()  # journaled, not uploaded: the hub thread is still held
        client.release.set()
        wait_for(lambda: work.status().results_acked == 1, 30, "the result acknowledged")
        assert work.status().results_rejected == 0
        entries = hub_journal(process.url, process.key)
        [result] = [e for e in entries if e["kind"] == "result"]
        assert result["body"]["assignment"] not in requeued(entries)
    finally:
        work.close()


def test_pause_resume_abort(hub: tuple[HubProcess, dict[str, str]], tmp_path: pathlib.Path) -> None:
    process, keys = hub
    with _driven(process, keys["s2"], tmp_path / "s2", "s2", trials=0) as (work, driver):
        assert _control(work, "resume") and work.status().state == "running"  # a re-send: nothing changes
        assert _control(work, "pause", "emergency stop") and work.session.paused
        status = work.status()
        assert status.state == "paused" and work.status_fields(status)["state_name"] == "hub:paused:awaiting_run"
        assert work.diagnostics(status, node="n", hardware_id="r", runner="")[0].level == 1
        assert driver.advance().action is Action.WAIT  # no run starts while paused
        assert _control(work, "resume") and not work.session.paused
        abort_work = work.status().assignment_id
        assert _control(work, "abort", "robot broken")
        assert work.session.pending_trial() is None and work.status().state == "aborted"
        assert driver.advance().action is Action.DONE
        wait_for(lambda: work.finished, 30, "the aborted station to be over")
        assert work.status_fields(work.status())["state"] == 4
        assert _control(work, "resume") is False
        assert abort_work not in {r["assignment_id"] for r in work.client.records() if r["kind"] == "result"}


def test_a_station_keeps_the_rules_of_a_session(hub: tuple[HubProcess, dict[str, str]],
                                               tmp_path: pathlib.Path) -> None:
    """The trial loop's rules at a station (session/driver.py): ``max_faults`` runner faults in a
    row pause it (journaled with the reason); a resume allows ``max_faults`` more runs; a void
    gives the assignment up and the hub requeues it; an automatic score that came while paused is
    held (a score sent while paused is refused) and submitted once it resumes; an invalid one goes to the
    operator; ``scoring: operator`` ignores the runner's scores."""
    process, keys = hub
    with _driven(process, keys["s2"], tmp_path / "s2", "s2", trials=0, max_faults=2) as (work, driver):
        trial = work.session.pending_trial()
        assert trial is not None and driver.max_attempts == 2 and driver.auto
        given_up = work.status().assignment_id
        assert driver.run_done(trial, False, 0.1, "arm stuck").verdict is Verdict.RETRY
        trial = work.session.pending_trial()
        assert trial is not None and trial.attempt == 2
        paused = driver.run_done(trial, False, 0.1, "arm stuck")
        assert paused.verdict is Verdict.PAUSED and work.session.paused and driver.advance().action is Action.WAIT
        assert _control(work, "resume")  # the operator fixed the robot: two more runs
        trial = work.session.pending_trial()
        assert trial is not None and trial.attempt == 3
        assert driver.run_done(trial, False, 0.1, "arm stuck").verdict is Verdict.RETRY
        trial = work.session.pending_trial()
        assert trial is not None and driver.run_done(trial, False, 0.1, "arm stuck").verdict is Verdict.PAUSED
        assert not work.session.void_score(trial.trial_id + 1, "wrong trial").applied
        assert work.session.void_score(trial.trial_id, "arm stuck").applied  # the assignment is given up
        assert work.session.pending_trial() is None and _control(work, "resume")
        wait_for(lambda: work.session.pending_trial() is not None, 30, "new work after giving one up")
        assert work.status().assignment_id != given_up
        wait_for(lambda: given_up in requeued(hub_journal(process.url, process.key)), 60,
                 "the assignment given up requeued when its lease runs out")

        # a run that ends while paused: its automatic score is held until the station resumes
        trial = work.session.pending_trial()
        assert trial is not None and driver.advance().action is Action.RUN
        assert _control(work, "pause", "emergency stop")
        assert driver.run_done(trial, True, 0.1, auto_score=(True, 1.0)).verdict is Verdict.HELD
        assert "paused" in work.session.submit_score(trial.trial_id, trial.token, True, 1.0, "op").reason
        assert driver.advance() == Next(Action.WAIT)
        assert _control(work, "resume")
        auto = driver.advance().auto
        assert auto is not None and auto.trial == trial and auto.outcome.accepted
        # an automatic score out of range: the operator scores the run
        second = work.session.pending_trial()
        assert second is not None and second.label == "B"
        assert driver.run_done(second, True, 0.1, auto_score=(False, 1.5)).verdict is Verdict.OPERATOR
        assert driver.advance().action is Action.SCORE and work.session.status().awaiting == "score"
        assert work.session.submit_score(second.trial_id, second.token, False, 0.5, "op").accepted
        records = work.client.records()
        result = next(r for r in records if r["kind"] == "result")
        assert (result["score_a"], result["score_b"]) == (1.0, 0.5)
        faults = [r["message"] for r in records if r["kind"] == "runner_result" and not r["ok"]]
        assert len(faults) == 4 and all(m.startswith("runner error (error ") and "arm stuck" not in m for m in faults)
        assert not any("detail" in r for r in records)  # the runner's own words: not journaled
        pauses = [r["reason"] for r in records if r["kind"] == "paused"]
        assert pauses[0].startswith("runner failed 2 times in a row on trial 1") and "arm stuck" not in pauses[0]
        assert [(r["assignment_id"], r["faults"], r["reason"]) for r in records if r["kind"] == "given_up"] == [
            (given_up, 2, "arm stuck")]
    with _driven(process, keys["s1"], tmp_path / "s1", "s1", trials=0, scoring="operator") as (operator, driver):
        trial = operator.session.pending_trial()
        assert trial is not None and not driver.auto
        assert driver.run_done(trial, True, 0.1, auto_score=(True, 1.0)).verdict is Verdict.RAN
        assert driver.advance() == Next(Action.SCORE, trial)  # the runner's score is not used


def test_a_restarted_station_keeps_its_journaled_rules_and_controls(hub: tuple[HubProcess, dict[str, str]],
                                                                    tmp_path: pathlib.Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The first start journals ``rules`` (max_faults, trials, scoring); a restart with other parameters
    keeps them (and says so), and comes back paused or aborted as its journal says. Faults, the
    assignment given up and every control are journaled, all in one hash chain."""
    process, keys = hub
    directory = tmp_path / "s1"
    work = _work(process, keys["s1"], directory, "s1", trials=0, max_faults=2)
    try:
        wait_for(lambda: work.session.pending_trial() is not None, 30, "an assignment")
        assert _control(work, "pause", "gripper check")
    finally:
        work.close()
    with caplog.at_level(logging.WARNING, logger="evalstop_ros.station.session"):
        work = _work(process, keys["s1"], directory, "s1", trials=5, max_faults=5)
    try:
        assert (work.session.max_faults, work.session.trials, work.session.scoring) == (2, 0, "auto")
        assert any("max_faults 2" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
        assert work.session.paused and work.status().state == "paused"
        assert work.diagnostics(work.status(), node="n", hardware_id="r", runner="")[0].message == \
            "paused (gripper check)"
        assert _control(work, "resume") and not work.session.paused
        wait_for(lambda: work.session.pending_trial() is not None, 30, "an assignment after the restart")
        trial = work.session.pending_trial()
        assert trial is not None
        given_up = work.status().assignment_id
        driver = TrialDriver(work.session, "run_trial")
        for attempt, verdict in ((1, Verdict.RETRY), (2, Verdict.PAUSED)):  # the journaled limit: 2 faults, not 5
            assert trial.attempt == attempt and driver.run_done(trial, False, 0.1, "arm stuck").verdict is verdict
            trial = work.session.pending_trial() or trial
        assert work.session.void_score(trial.trial_id, "arm stuck").applied
        assert work.status().assignment_id != given_up
        assert _control(work, "abort", "robot broken")
    finally:
        work.close()
    work = _work(process, keys["s1"], directory, "s1", trials=0, max_faults=2)
    try:
        assert work.status().state == "aborted" and _control(work, "resume") is False
        assert work.session.pending_trial() is None
    finally:
        work.close()
    contents = read_station_journal(directory)
    assert (contents.chain_break, contents.truncated, contents.head_problem) == (None, "", "")
    assert contents.station_id == "s1" and contents.opened == {"station_id": "s1"}
    records = StationClient(process.url, keys["s1"], directory).records()
    assert records == contents.records
    kinds = [r["kind"] for r in records]
    assert kinds.count("rules") == 1 and records[0] == {**records[0], "kind": "rules", "max_faults": 2, "trials": 0}
    controls = [(r["kind"], r.get("reason", "")) for r in records if r["kind"] in ("paused", "resumed", "aborted")]
    assert controls[:2] == [("paused", "gripper check"), ("resumed", "")] and controls[3] == ("aborted", "robot broken")
    assert controls[2][0] == "paused" and controls[2][1].startswith("runner failed 2 times in a row")
    trial_of = {r["trial_id"]: r["assignment_id"] for r in records if r["kind"] == "trial_requested"}
    faults = [(trial_of[r["trial_id"]], r["ok"]) for r in records if r["kind"] == "runner_result"]
    assert faults == [(given_up, False), (given_up, False)]
    given = [(r["assignment_id"], r["faults"], r["reason"]) for r in records if r["kind"] == "given_up"]
    assert given[0][2].startswith("the station restarted")  # the lease it held before the restart
    assert (given_up, 2, "arm stuck") in given
    assert records[0]["scoring"] == "auto"
