"""A ROS station (station_manager + sim_robot) in its own network namespace loses
its link to the hub for longer than its lease.

Both nodes run inside the namespace (``ip netns exec``; DDS on the namespace's loopback) and
reach the hub (PostgreSQL) over a veth pair; a simulated Python station works beside them on the
host. While the ROS station is in the middle of a lease its link is cut until the station has
journaled the trial in hand and the hub has requeued its lease (3 s deadline; polled with a
deadline of 20 leases, so the cut lasts a few leases rather than a fixed minute); when the link
is back it uploads (counted, or refused because the trial was handed out again). Every
result is counted once or refused, none is left pending, the leaderboard equals the offline
analysis of the hub's journal.
"""

from __future__ import annotations

import pathlib
from typing import Any

from hub_support import (
    REPO,
    PostgresCluster,
    check_results,
    exit_ok,
    netns_hub,
    station_records,
    wait_for,
)
from nodes_support import NodeProcess

LIB = REPO / "build" / "ros" / "install" / "lib" / "evalstop"
POLICIES = {"heron": 0.8, "osprey": 0.3}
TRIALS = 6


def _node(ns: str, executable: str, params: dict[str, Any], env: dict[str, str], log: pathlib.Path) -> NodeProcess:
    """A node executable inside the network namespace ``ns``, its output in ``log``."""
    args = [arg for k, v in params.items() for arg in ("-p", f"{k}:={v}")]
    return NodeProcess(executable, ["ip", "netns", "exec", ns, str(LIB / executable), "--ros-args", *args], env, log)


class _RemoteStation:
    name = "remote"
    trials = TRIALS

    def __init__(self, directory: pathlib.Path) -> None:
        self.dir = directory

    def records(self) -> list[dict[str, Any]]:
        return station_records(self.dir)


def test_ros_station_cut_off_past_its_lease_syncs_later(netns: dict[str, str], postgres: PostgresCluster,
                                                      tmp_path: pathlib.Path, ros_env: dict[str, str]) -> None:
    with netns_hub(netns, postgres, tmp_path, POLICIES) as run:
        remote = _RemoteStation(tmp_path / "stations" / "hub-remote")
        (tmp_path / "remote.key").write_text(run.keys["remote"])
        env = {**ros_env, "ROS_DOMAIN_ID": str(int(ros_env["ROS_DOMAIN_ID"]) + 3)}
        nodes: list[NodeProcess] = []
        try:
            nodes.append(_node(netns["ns"], "sim_robot", {"duration": 0.3, "seed": 1}, env, tmp_path / "robot.log"))
            manager = _node(netns["ns"], "station_manager", {
                "hub_url": run.hub.url, "station_id": "remote", "hub_key_file": tmp_path / "remote.key",
                "hub_trials": TRIALS, "journal_dir": tmp_path / "stations", "exit_on_finish": "true",
                "exit_linger": 0.5}, env, tmp_path / "manager.log")
            nodes.append(manager)
            run.local.start()

            def kept() -> set[str]:
                records = remote.records()
                settled = {r["upload_id"] for r in records if r["kind"] in ("ack", "rejected")}
                return {r["upload_id"] for r in records if r["kind"] == "result"} - settled

            with run.cut_off(remote, lambda: "unreachable" in manager.output):
                wait_for(lambda: bool(kept()), 60, "the ROS station to journal its trial while cut off")
            assert manager.proc.wait(timeout=300) == 0, manager.output
            exit_ok([run.local])

            check_results(run.hub, run.viewer, run.db, tmp_path, [remote, run.local], journals=False)
            assert not any(secret in manager.output for secret in (*POLICIES, "sim://"))
        finally:
            for node in reversed(nodes):
                node.stop()
