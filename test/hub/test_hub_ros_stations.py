"""Three ROS stations (station_manager + sim_robot) against a hub on PostgreSQL.

Each station is a manager process and a sim_robot process in its own ROS domain; sim_robot
scores each rollout itself. One station's manager is killed with SIGKILL in the middle of a
lease and restarted later (its lost lease is requeued and redone, its journal synced); the hub
is killed while the stations work and restarted later (the stations journal what they finish
meanwhile and upload it once the hub is back). Every result is counted exactly once, and the
hub's leaderboard equals ``evalstop hub analyze`` of the exported journal. The first station
shares the test's domain, so the test also reads its topics (blinded trial requests: labels A
and B only; a WARN diagnostic while the hub is unreachable) and pauses it to hold an
assignment across the hub's kill.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hub_support import (
    HubProcess,
    PostgresCluster,
    call,
    check_counted_once,
    check_lost_lease_redone_once,
    hub_journal,
    lease_marks,
    offline_equals_online,
    register_hub,
    station_records,
)

from evalstop_ros.session.auth import new_keys, write_keys

POLICIES = {"heron": 0.85, "walrus": 0.5, "osprey": 0.2}
#: A/B trials each station runs.
TRIALS = 8
NAMES = ("s1", "s2", "s3")


class RosStation:
    """One station: sim_robot and station_manager in their own ROS domain."""

    def __init__(self, name: str, domain: int, hub_url: str, key: str, root: pathlib.Path,
                 start_node: Callable[..., Any]) -> None:
        self.name, self.domain, self.hub_url, self.start_node = name, domain, hub_url, start_node
        self.key_file = root / f"{name}.key"
        self.key_file.write_text(key)
        self.journal_dir = root / "stations"
        self.dir = self.journal_dir / f"hub-{name}"
        self.managers: list[Any] = []
        self.robot: Any = None

    def start(self, seed: int) -> None:
        env = {"ROS_DOMAIN_ID": str(self.domain)}
        if self.robot is None:
            self.robot = self.start_node("sim_robot", params={"duration": 0.3, "seed": seed}, env=env)
        self.managers.append(self.start_node("station_manager", env=env, params={
            "hub_url": self.hub_url, "station_id": self.name, "hub_key_file": str(self.key_file),
            "hub_trials": TRIALS, "journal_dir": str(self.journal_dir), "exit_on_finish": True,
            "exit_linger": 0.5}))

    @property
    def manager(self) -> Any:
        return self.managers[-1]

    def records(self) -> list[dict[str, Any]]:
        return station_records(self.dir)

    def log(self) -> str:
        return "".join(m.output for m in self.managers)


@pytest.fixture
def hub_setup(postgres: PostgresCluster, tmp_path: pathlib.Path, start_node: Callable[..., Any],
              ros_env: dict[str, str]) -> Iterator[tuple[HubProcess, list[RosStation], str]]:
    db = postgres.new_database()
    keys, viewer = register_hub(db, POLICIES, NAMES)
    # Leases outlive the hub's outage even on a loaded machine, where its restart takes minutes (a
    # lease that expired meanwhile is handed out again and the result kept for it refused); the
    # killed manager's lease is requeued when the restarted one asks for work.
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "900", "--tasks", "towel,cup", "--seed", "0"])
    base = int(ros_env["ROS_DOMAIN_ID"])  # the first station shares the test's domain
    stations = [RosStation(name, base + i, hub.url, keys[name], tmp_path, start_node) for i, name in enumerate(NAMES)]
    try:
        yield hub, stations, db
    finally:
        hub.stop()  # the node processes are stopped by start_node


def test_ros_stations_survive_kills_and_every_result_counts_once(
        hub_setup: tuple[HubProcess, list[RosStation], str], probe: Any, tmp_path: pathlib.Path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from evalstop.msg import SessionStatus, TrialRequest
    from evalstop.srv import SessionControl

    from evalstop_ros import qos

    hub, stations, db = hub_setup
    requests = probe.collect(TrialRequest, "trial_request", qos.LATCHED_QOS)
    statuses = probe.collect(SessionStatus, "session_status", qos.LATCHED_QOS)
    diagnostics = probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
    hub.start()
    for seed, station in enumerate(stations):
        station.start(seed)
    victim, live = stations[2], stations[:2]

    def results_at_hub() -> int:
        return int(call(hub.url + "/v1/status", key=hub.key)[1]["results"])

    # 1. kill -9 the third station's manager in the middle of a lease
    def mid_lease() -> bool:
        marks = lease_marks(victim.records())
        return marks.count("result") >= 2 and marks[-1] == "leased"

    probe.spin_until(mid_lease, 120, "the third station to be in the middle of a lease")
    victim.manager.kill()
    records = victim.records()
    [lost_lease] = {r["assignment_id"] for r in records if r["kind"] == "leased"} - {
        r["assignment_id"] for r in records if r["kind"] == "result"}

    # 2. kill the hub while the first station holds an assignment it cannot have finished: paused
    #    with an arm still to run (arm A or B), or with the score of a run that ended after the
    #    pause held until it resumes (a session's rule: no score is taken while paused). Resumed
    #    once the hub is down, it finishes the assignment, journals the result and keeps it until
    #    the hub is back.
    probe.spin_until(lambda: results_at_hub() >= 6, 120, "6 results at the hub")
    pause = SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason="hold a lease")
    assert probe.call(SessionControl, "session_control", pause).ok
    def paused_holding_a_lease() -> bool:  # nothing in flight: the pending trial's goal was never sent, or it ran
        return any(s.pending_trial_id and (s.state_name == "hub:paused:awaiting_score" or (
            s.state_name == "hub:paused:awaiting_run" and f"trial {s.pending_trial_id} (label" not in stations[0].log()))
            for s in statuses[-1:])

    probe.spin_until(paused_holding_a_lease, 120, "the first station paused in the middle of an assignment")
    held = stations[0].records()
    assert any(r["kind"] == "paused" for r in held)  # journaled
    assert lease_marks(held)[-1] == "leased"
    hub.kill()
    resumed = probe.call(SessionControl, "session_control",
                         SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME))
    assert resumed.ok or resumed.message.endswith("is not paused"), resumed.message  # a re-sent request

    def journaled_offline() -> set[str]:
        out = set()
        for station in live:
            records = station.records()
            settled = {r["upload_id"] for r in records if r["kind"] in ("ack", "rejected")}
            out |= {r["upload_id"] for r in records if r["kind"] == "result" and r["upload_id"] not in settled}
        return out

    kept = probe.spin_until(journaled_offline, 60, "a result journaled while the hub is down")
    # The first station (paused while the hub died) notices when it uploads; the second may have
    # run all its trials before the kill on a loaded machine (then it has exited: nothing to notice).
    probe.spin_until(lambda: all("unreachable" in s.log() or s.manager.proc.poll() is not None for s in live), 120,
                     "the live stations to notice the outage")
    assert "unreachable" in stations[0].log()
    # the live stations run out of work: each finished its lease and waits, retrying
    probe.spin_until(lambda: all(s.records()[-1]["kind"] != "leased" for s in live), 120,
                     "the live stations to finish their leases while the hub is down")
    probe.spin_until(lambda: statuses and statuses[-1].state_name == "hub:waiting_for_work", 60,
                     "the first station's status: waiting for work")
    probe.spin_until(lambda: any(
        st.level == bytes([1]) and "unreachable" in st.message and "hub station" in st.name
        for d in diagnostics for st in d.status), 60, "a WARN diagnostic of the first station while the hub is down")

    # 3. hub and the killed manager come back; everyone finishes
    hub.start()
    victim.start(seed=2)
    for station in stations:
        probe.spin_until(lambda s=station: s.manager.proc.poll() is not None, 180, f"station {station.name} to finish")
        assert station.manager.proc.returncode == 0, station.manager.tail()

    entries = hub_journal(hub.url, hub.key)
    results = check_counted_once(entries, stations, trials=TRIALS)
    assert results_at_hub() == len(results)
    counted = {r["upload_id"] for r in results}
    assert kept <= counted, "a result journaled while the hub was down was not counted"

    check_lost_lease_redone_once(entries, lost_lease, results)

    online = offline_equals_online(hub, db, tmp_path)
    # Every station ran TRIALS trials; a result is refused (410) only where its lease had been
    # handed out again -- the killed station's trial in hand, when another station redid it first.
    refused = sum(r["kind"] == "rejected" for station in stations for r in station.records())
    assert refused <= 1 and online["n_results"] == len(results) == len(stations) * TRIALS - refused
    rate = {row["policy"]: row["win_rate"] for row in online["ranking"]}
    assert rate["heron"] > rate["osprey"]

    # blinding: the operator-facing topics and the managers' logs name no policy or server
    probe.spin_until(lambda: any(r.trial_id for r in requests), 10, "a trial request of the first station")
    assert {r.label for r in requests if r.trial_id} <= {"A", "B"}
    for r in requests:
        assert not any(secret in str(r) for secret in (*POLICIES, "sim://"))
    for station in stations:
        assert not any(secret in station.log() for secret in (*POLICIES, "sim://")), station.name
        assert station.key_file.read_text() not in station.log()


def test_operator_scores_pause_and_resume_a_ros_station(
        tmp_path: pathlib.Path, start_node: Callable[..., Any], probe: Any) -> None:
    """A station whose runner does not score (and opens the station's sealed goals): the operator's
    trial_score (tokens checked, every score answered on score_ack) makes the results; session_control pauses and resumes it, and a
    score sent while paused is refused, as a session refuses it (the trial loop's rules)."""
    from evalstop.msg import ScoreAck, SessionStatus, TrialRequest, TrialScore
    from evalstop.srv import SessionControl

    from evalstop_ros import qos

    db = str(tmp_path / "hub.sqlite")
    keys, viewer = register_hub(db, POLICIES, ["lab"])
    key = keys["lab"]
    # a lease long enough that a starved station (a loaded machine) never loses one: a lost lease
    # makes the hub refuse that result (410), and this test counts both results at the hub
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "120", "--tasks", "towel"])
    hub.start()
    try:
        requests = probe.collect(TrialRequest, "trial_request", qos.LATCHED_QOS)
        statuses = probe.collect(SessionStatus, "session_status", qos.LATCHED_QOS)
        acks = probe.collect(ScoreAck, "score_ack", qos.EVENT_QOS)
        scores = probe.node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
        (tmp_path / "lab.key").write_text(key)
        # the station seals the policy-server address in every goal for its runner (the runner key)
        goal_key = write_keys(tmp_path / "runner.key", new_keys(["runner"]))
        start_node("sim_robot", params={"auto_score": False, "duration": 0.0, "goal_key_file": str(goal_key)})
        manager = start_node("station_manager", params={
            "hub_url": hub.url, "station_id": "lab", "hub_key_file": str(tmp_path / "lab.key"), "hub_trials": 2,
            "journal_dir": str(tmp_path / "stations"), "exit_on_finish": True, "exit_linger": 0.5,
            "goal_key_file": str(goal_key), "allow_unsealed": False})
        manager.wait_for(r"runner goals sealed")

        def awaiting_score(trial_id: int) -> TrialRequest:
            probe.spin_until(lambda: any(s.pending_trial_id == trial_id and s.state_name == "hub:running:awaiting_score"
                                         for s in statuses[-1:]), 60, f"trial {trial_id} to await its score")
            return probe.spin_until(lambda: next((r for r in reversed(requests) if r.trial_id == trial_id), None), 10,
                                    f"the request of trial {trial_id}")

        def score(trial_id: int, token: str, success: bool, progress: float, refused: str = "token") -> ScoreAck:
            """Publish the score until its answer arrives (DDS may drop the first one): accepted, or
            refused with ``refused`` in the reason."""
            def answer() -> ScoreAck | None:
                return next((a for a in acks if a.trial_id == trial_id and (a.accepted or refused in a.reason)), None)
            acks.clear()
            for _ in range(10):
                scores.publish(TrialScore(trial_id=trial_id, token=token, success=success, progress=progress,
                                          scorer="operator"))
                try:
                    return probe.spin_until(answer, 3, f"the answer to a score of trial {trial_id}")
                except pytest.fail.Exception:
                    continue
            pytest.fail(f"no answer to a score of trial {trial_id}")

        first = awaiting_score(1)
        assert (first.session_id, first.label, first.task) == ("hub:lab", "A", "towel")
        ack = score(1, "0" * len(first.token), True, 1.0)
        assert not ack.accepted and ack.reason == "wrong token for trial 1"
        manager.wait_for(r"score for trial 1 rejected: wrong token for trial 1")
        assert score(1, first.token, False, 0.5).accepted

        request = awaiting_score(2)
        assert request.label == "B"
        paused = probe.call(SessionControl, "session_control",
                            SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason="coffee"))
        assert paused.ok, paused.message
        probe.spin_until(lambda: statuses[-1].state_name.startswith("hub:paused"), 20, "the paused status")
        assert statuses[-1].state == SessionStatus.STATE_PAUSED
        manager.wait_for(r"station 'lab' paused: coffee")  # the session layer's log line, in the node's ROS log
        refused = score(2, request.token, True, 1.0, refused="paused")  # a session takes no score while paused
        assert not refused.accepted and refused.reason == "station is paused; scores are accepted only while it runs"
        resumed = probe.call(SessionControl, "session_control",
                             SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME))
        assert resumed.ok, resumed.message
        assert score(2, request.token, True, 1.0).accepted
        for trial_id in (3, 4):
            request = awaiting_score(trial_id)
            assert score(trial_id, request.token, trial_id == 4, 0.5).accepted
        assert manager.wait(120) == 0
        probe.spin_until(lambda: statuses[-1].state == SessionStatus.STATE_FINISHED, 20, "the finished status")
        entries = hub_journal(hub.url, hub.key)
        assert [(e["body"]["score_a"], e["body"]["score_b"]) for e in entries if e["kind"] == "result"] == [(0.5, 1.0)] * 2
        assert not any(secret in str(r) for r in requests for secret in (*POLICIES, "sim://"))
    finally:
        hub.stop()


@pytest.fixture
def lab_hub(tmp_path: pathlib.Path) -> Iterator[HubProcess]:
    """A hub with one station, ``lab``, whose key is in ``tmp_path/lab.key`` (30 s leases, task ``towel``)."""
    db = str(tmp_path / "hub.sqlite")
    keys, viewer = register_hub(db, POLICIES, ["lab"])
    (tmp_path / "lab.key").write_text(keys["lab"])
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "30", "--tasks", "towel"])
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def test_a_runner_that_keeps_failing_pauses_a_ros_station_and_a_void_gives_its_assignment_up(
        tmp_path: pathlib.Path, start_node: Callable[..., Any], probe: Any, lab_hub: HubProcess) -> None:
    """The session's fault limit at a station: after ``max_attempts`` runner faults in a row the
    station pauses, journaled with the reason (the runner's category and id, never its words);
    ``correct_score``'s void of the pending trial gives its assignment up (journaled, requeued by
    the hub), any other correction is refused."""
    from evalstop.msg import SessionStatus
    from evalstop.srv import CorrectScore, SessionControl

    from evalstop_ros import qos

    statuses = probe.collect(SessionStatus, "session_status", qos.LATCHED_QOS)
    start_node("sim_robot", params={"failure_probability": 1.0, "duration": 0.0})
    start_node("station_manager", params={
        "hub_url": lab_hub.url, "station_id": "lab", "hub_key_file": str(tmp_path / "lab.key"), "max_attempts": 2,
        "journal_dir": str(tmp_path / "stations")})
    status = probe.spin_until(lambda: next((s for s in statuses[-1:] if s.state_name.startswith("hub:paused")),
                                           None), 60, "the station paused at the fault limit")
    trial_id = status.pending_trial_id
    journal = tmp_path / "stations" / "hub-lab"
    records = station_records(journal)
    [pause] = [r for r in records if r["kind"] == "paused"]
    assert pause["reason"].startswith(f"runner failed 2 times in a row on trial {trial_id}: robot fault (error ")
    labels = {r["trial_id"]: r["label"] for r in records if r["kind"] == "trial_requested"}
    assert [(labels[r["trial_id"]], r["ok"]) for r in records if r["kind"] == "runner_result"] == [("A", False)] * 2
    [assignment] = [r["assignment_id"] for r in records if r["kind"] == "leased"]

    undo = probe.call(CorrectScore, "correct_score", CorrectScore.Request(action=CorrectScore.Request.ACTION_UNDO))
    assert not undo.ok and "only ACTION_VOID" in undo.message
    void = probe.call(CorrectScore, "correct_score", CorrectScore.Request(
        trial_id=trial_id, action=CorrectScore.Request.ACTION_VOID, reason="gripper broken"))
    assert void.ok or "is not the pending trial" in void.message, void.message  # or a re-sent request
    given_up = [r for r in station_records(journal) if r["kind"] == "given_up"]
    assert [(r["assignment_id"], r["faults"], r["reason"]) for r in given_up] == [(assignment, 2, "gripper broken")]
    resumed = probe.call(SessionControl, "session_control",
                         SessionControl.Request(command=SessionControl.Request.COMMAND_RESUME))
    assert resumed.ok or resumed.message.endswith("is not paused"), resumed.message
    probe.spin_until(lambda: assignment in {e["body"]["assignment"] for e in hub_journal(lab_hub.url, lab_hub.key)
                                            if e["kind"] == "requeued"}, 60,
                     "the hub to requeue the assignment given up when the station asks for new work")


def test_a_second_runner_on_the_action_pauses_a_ros_station(
        tmp_path: pathlib.Path, start_node: Callable[..., Any], probe: Any, lab_hub: HubProcess) -> None:
    """The one-runner rule at a station, as at a local session (the trial loop's ``watch_runners``):
    two runners serving ``run_trial`` pause the station, journaled with the reason, and the pause
    shows in its status and its ROS log."""
    from evalstop.msg import SessionStatus

    from evalstop_ros import qos

    statuses = probe.collect(SessionStatus, "session_status", qos.LATCHED_QOS)
    start_node("sim_robot", params={"duration": 0.3})
    start_node("sim_robot", params={"duration": 0.3}, ros_args=["-r", "__node:=sim_robot_b"])
    manager = start_node("station_manager", params={
        "hub_url": lab_hub.url, "station_id": "lab", "hub_key_file": str(tmp_path / "lab.key"),
        "journal_dir": str(tmp_path / "stations")})
    manager.wait_for(r"session paused: 2 runners serve the action 'run_trial'", 60)
    probe.spin_until(lambda: statuses and statuses[-1].state_name.startswith("hub:paused"), 30,
                     "the station's paused status")
    [pause] = [r for r in station_records(tmp_path / "stations" / "hub-lab") if r["kind"] == "paused"]
    assert pause["reason"].startswith("2 runners serve the action 'run_trial'")
    manager.wait_for(r"station 'lab' paused: 2 runners serve", 10)  # the state machine's own line, forwarded


@pytest.mark.parametrize(("params", "env", "reason"), [
    ({"hub_url": ""}, {}, "`hub_url` is required"),
    ({"station_id": ""}, {}, "`station_id` is required with `hub_url`"),
    ({"hub_url": "ftp://hub"}, {}, "`hub_url` must be an http:// or https:// URL"),
    ({"hub_key_file": ""}, {"EVALSTOP_HUB_KEY": ""}, "no API key: pass --key-file or set EVALSTOP_HUB_KEY"),
    ({"hub_key_file": "/nonexistent/lab.key"}, {}, "cannot read the key file '/nonexistent/lab.key'"),
])
def test_station_manager_refuses_bad_parameters(params: dict[str, Any], env: dict[str, str], reason: str,
                                         tmp_path: pathlib.Path, start_node: Callable[..., Any]) -> None:
    """Exit 2 with one FATAL line naming the problem; the key is never printed."""
    import re

    (tmp_path / "lab.key").write_text("secret-key-of-the-lab")
    manager = start_node("station_manager", env=env, params={
        "hub_url": "http://127.0.0.1:9", "station_id": "lab", "hub_key_file": str(tmp_path / "lab.key"),
        "journal_dir": str(tmp_path), **params})
    assert manager.wait(60) == 2
    manager.wait_for(r"\[FATAL\] \[\S*station_manager\]: invalid parameters: .*" + re.escape(reason))
    assert "secret-key-of-the-lab" not in manager.output


def test_evaluation_manager_given_hub_url_refuses_and_names_station_manager(
        tmp_path: pathlib.Path, start_node: Callable[..., Any]) -> None:
    """A station is its own node (issue #22): ``evaluation_manager`` given ``hub_url`` exits 2 with one
    FATAL line telling to run ``station_manager``, and opens no journal."""
    manager = start_node("evaluation_manager", params={
        "hub_url": "http://127.0.0.1:9", "station_id": "lab", "journal_dir": str(tmp_path / "journals")})
    assert manager.wait(60) == 2
    manager.wait_for(r"\[FATAL\] \[\S*evaluation_manager\]: invalid parameters: `hub_url` is set "
                     r"\(http://127\.0\.0\.1:9\): a station of an evaluation hub is its own node, run "
                     r"`ros2 run evalstop station_manager`")
    assert not (tmp_path / "journals").exists()
