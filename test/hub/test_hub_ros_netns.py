"""A ROS station (evaluation_manager in hub mode + sim_robot) in its own network namespace loses
its link to the hub for a minute.

Both nodes run inside the namespace (``ip netns exec``; DDS on the namespace's loopback) and
reach the hub (PostgreSQL) over a veth pair; a simulated Python station works beside them on the
host. While the ROS station is in the middle of a lease its link is cut for
``EVALSTOP_HUB_CUT_SECONDS`` (default 60), longer than the lease: the station finishes the trial
in hand and keeps the result in its local journal, its lease expires and is requeued, and when
the link is back it uploads (counted, or refused because the trial was handed out again). Every
result is counted once or refused, none is left pending, the leaderboard equals the offline
analysis of the hub's journal.
"""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any

from hub_support import (
    REPO,
    HubProcess,
    PostgresCluster,
    Station,
    call,
    check_counted_once,
    ip,
    iter_lines,
    offline_equals_online,
    stop_all,
    wait_for,
)
from nodes_support import NodeProcess

from evalstop_ros.hub.store import open_store

CUT_SECONDS = float(os.environ.get("EVALSTOP_HUB_CUT_SECONDS", "60"))
LIB = REPO / "build" / "ros" / "install" / "lib" / "evalstop"
POLICIES = {"heron": 0.8, "osprey": 0.3}
TRIALS = 6


def _node(ns: str, executable: str, params: dict[str, Any], env: dict[str, str], log: pathlib.Path) -> NodeProcess:
    """A node executable inside the network namespace ``ns``, its output in ``log``."""
    args = [arg for k, v in params.items() for arg in ("-p", f"{k}:={v}")]
    return NodeProcess(executable, ["ip", "netns", "exec", ns, str(LIB / executable), "--ros-args", *args], env, log)


class _RemoteStation:
    name = "remote"

    def __init__(self, directory: pathlib.Path) -> None:
        self.dir = directory

    def records(self) -> list[dict[str, Any]]:
        return list(iter_lines(self.dir / "station.jsonl"))


def test_ros_station_cut_off_for_a_minute_syncs_later(netns: dict[str, str], postgres: PostgresCluster,
                                                      tmp_path: pathlib.Path, ros_env: dict[str, str]) -> None:
    db = postgres.new_database()
    store = open_store(db)
    for name, p in POLICIES.items():
        store.add_policy(name, f"sim://success={p}")
    keys = {name: store.add_station(name) for name in ("remote", "local")}
    viewer = store.add_station("viewer", "viewer")
    store.close()
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "3"], host=netns["host_ip"])
    local = Station("local", hub.url, tmp_path, keys["local"], 2)
    remote = _RemoteStation(tmp_path / "stations" / "hub-remote")
    (tmp_path / "remote.key").write_text(keys["remote"])
    env = {**ros_env, "ROS_DOMAIN_ID": str(int(ros_env["ROS_DOMAIN_ID"]) + 3)}
    nodes: list[NodeProcess] = []
    hub.start()
    try:
        nodes.append(_node(netns["ns"], "sim_robot", {"duration": 0.3, "seed": 1}, env, tmp_path / "robot.log"))
        manager = _node(netns["ns"], "evaluation_manager", {
            "hub_url": hub.url, "station_id": "remote", "hub_key_file": tmp_path / "remote.key",
            "hub_trials": TRIALS, "journal_dir": tmp_path / "stations", "exit_on_finish": "true",
            "exit_linger": 0.5}, env, tmp_path / "manager.log")
        nodes.append(manager)
        local.start()

        def mid_lease() -> bool:
            records = remote.records()
            return sum(r["kind"] == "result" for r in records) >= 2 and records[-1]["kind"] == "leased"

        wait_for(mid_lease, 120, "the ROS station to be in the middle of a lease")
        ip("link", "set", netns["host_if"], "down")
        cut_at = time.monotonic()
        wait_for(lambda: "unreachable" in manager.output, 60, "the ROS station to notice the cut")

        def kept() -> set[str]:
            records = remote.records()
            settled = {r["upload_id"] for r in records if r["kind"] in ("ack", "rejected")}
            return {r["upload_id"] for r in records if r["kind"] == "result"} - settled

        wait_for(lambda: bool(kept()), 60, "the ROS station to journal its trial while cut off")
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))  # the cut's length, not a synchronisation
        ip("link", "set", netns["host_if"], "up")
        assert manager.proc.wait(timeout=300) == 0, manager.output
        assert local.proc is not None and local.proc.wait(timeout=300) == 0, local.log()

        status, entries = call(hub.url + "/v1/journal", key=viewer)
        assert status == 200
        results = check_counted_once(entries, [remote], trials=TRIALS)
        check_counted_once(entries, [local])
        lost = {r["assignment_id"] for r in remote.records() if r["kind"] == "leased"}
        requeued = {e["body"]["assignment"] for e in entries if e["kind"] == "requeued"}
        assert requeued & lost, "the cut-off station's lease was not requeued"
        online = offline_equals_online(hub, db, tmp_path)
        assert online["n_results"] == len(results)
        assert not any(secret in manager.output for secret in (*POLICIES, "sim://"))
    finally:
        for node in reversed(nodes):
            node.stop()
        stop_all(hub, [local])
