"""A station in its own network namespace loses its link to the hub for longer than its lease.

The station (``ip netns exec``) reaches the hub (PostgreSQL) over a veth pair; a second station
works beside it on the host. While the first station is in the middle of a lease its link is
cut (``ip link set down``) until the hub has requeued that lease (its 3 s deadline passed; polled
with a deadline of 20 leases, so the cut lasts a few leases rather than a fixed minute): it keeps
its result in its local journal and syncs when the link is back. Every result is counted once or refused with a reason, none is left pending, and
the leaderboard equals the offline analysis of the hub's journal.
"""

from __future__ import annotations

import pathlib

from hub_support import (
    HubProcess,
    PostgresCluster,
    Station,
    check_counted_once,
    cut_off,
    exit_ok,
    hub_journal,
    offline_equals_online,
    register_hub,
    stop_all,
)

LEASE_SECONDS = 3.0


def test_station_cut_off_past_its_lease_syncs_later(netns: dict[str, str], postgres: PostgresCluster,
                                                  tmp_path: pathlib.Path) -> None:
    db = postgres.new_database()
    keys, viewer = register_hub(db, {"alpha": 0.8, "beta": 0.4}, ("remote", "local"))
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", str(LEASE_SECONDS)], host=netns["host_ip"])
    remote = Station("remote", hub.url, tmp_path, keys["remote"], 1, prefix=["ip", "netns", "exec", netns["ns"]])
    local = Station("local", hub.url, tmp_path, keys["local"], 2)
    stations = [remote, local]
    hub.start()
    try:
        for station in stations:
            station.start()

        with cut_off(netns, hub, viewer, remote, lambda: "hub unreachable" in remote.log(), LEASE_SECONDS):
            pass
        exit_ok(stations)
        entries = hub_journal(hub.url, viewer)
        results = check_counted_once(entries, stations)
        online = offline_equals_online(hub, db, tmp_path, [s.dir for s in stations])
        assert online["n_results"] == len(results)
    finally:
        stop_all(hub, stations)
