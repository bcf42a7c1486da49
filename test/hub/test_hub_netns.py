"""A station in its own network namespace loses its link to the hub for a minute.

The station (``ip netns exec``) reaches the hub (PostgreSQL) over a veth pair; a second station
works beside it on the host. While the first station is in the middle of a lease its link is
cut (``ip link set down``) for ``EVALSTOP_HUB_CUT_SECONDS`` (default 60), longer than the lease:
its lease expires and is requeued, it keeps its result in its local journal and syncs when the
link is back. Every result is counted once or refused with a reason, none is left pending, and
the leaderboard equals the offline analysis of the hub's journal.
"""

from __future__ import annotations

import os
import pathlib
import time

from hub_support import (
    HubProcess,
    PostgresCluster,
    Station,
    call,
    check_counted_once,
    ip,
    offline_equals_online,
    stop_all,
    wait_for,
)

from evalstop_ros.hub.store import open_store

CUT_SECONDS = float(os.environ.get("EVALSTOP_HUB_CUT_SECONDS", "60"))


def test_station_cut_off_for_a_minute_syncs_later(netns: dict[str, str], postgres: PostgresCluster,
                                                  tmp_path: pathlib.Path) -> None:
    db = postgres.new_database()
    store = open_store(db)
    for name, p in {"alpha": 0.8, "beta": 0.4}.items():
        store.add_policy(name, f"sim://success={p}")
    keys = {name: store.add_station(name) for name in ("remote", "local")}
    viewer = store.add_station("viewer", "viewer")
    store.close()
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "3"], host=netns["host_ip"])
    remote = Station("remote", hub.url, tmp_path, keys["remote"], 1, prefix=["ip", "netns", "exec", netns["ns"]])
    local = Station("local", hub.url, tmp_path, keys["local"], 2)
    stations = [remote, local]
    hub.start()
    try:
        for station in stations:
            station.start()

        def mid_lease() -> bool:
            records = remote.records()
            return sum(r["kind"] == "result" for r in records) >= 2 and bool(records[-1]["kind"] == "leased")

        wait_for(mid_lease, 120, "the remote station to be in the middle of a lease")
        ip("link", "set", netns["host_if"], "down")
        cut_at = time.monotonic()
        wait_for(lambda: "hub unreachable" in remote.log(), 60, "the remote station to notice the cut")
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))  # the cut's length, not a synchronisation
        ip("link", "set", netns["host_if"], "up")
        for station in stations:
            assert station.proc is not None
            assert station.proc.wait(timeout=300) == 0, station.log()
        status, entries = call(hub.url + "/v1/journal", key=viewer)
        assert status == 200
        results = check_counted_once(entries, stations)
        lost = [r["assignment_id"] for r in remote.records() if r["kind"] == "leased"]
        requeued = {e["body"]["assignment"] for e in entries if e["kind"] == "requeued"}
        assert requeued & set(lost), "the cut-off station's lease was not requeued"
        online = offline_equals_online(hub, db, tmp_path)
        assert online["n_results"] == len(results)
    finally:
        stop_all(hub, stations)
