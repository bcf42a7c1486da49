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

from hub_support import PostgresCluster, Station, check_results, exit_ok, netns_hub


def test_station_cut_off_past_its_lease_syncs_later(netns: dict[str, str], postgres: PostgresCluster,
                                                  tmp_path: pathlib.Path) -> None:
    with netns_hub(netns, postgres, tmp_path, {"alpha": 0.8, "beta": 0.4}) as run:
        remote = Station("remote", run.hub.url, tmp_path, run.keys["remote"], 1,
                         prefix=["ip", "netns", "exec", netns["ns"]])
        run.stations.append(remote)
        for station in run.stations:
            station.start()
        with run.cut_off(remote, lambda: "hub unreachable" in remote.log()):
            pass
        exit_ok(run.stations)
        check_results(run.hub, run.viewer, run.db, tmp_path, run.stations)
