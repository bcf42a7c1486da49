"""Three station processes against one hub process on a real PostgreSQL server.

A station is killed with SIGKILL in the middle of a lease and restarted later; the hub is
killed with SIGKILL while results are being uploaded and restarted on the same database.
Every result is counted exactly once, the dead station's lease is requeued and redone, no
station keeps an unsent result, and the hub's leaderboard equals ``evalstop hub analyze`` of
the exported journal (the offline analysis).
"""

from __future__ import annotations

import pathlib
import signal
from collections.abc import Iterator

import pytest
from hub_support import (
    POLICIES,
    HubProcess,
    PostgresCluster,
    Station,
    call,
    check_lost_lease_redone_once,
    check_results,
    exit_ok,
    mid_lease,
    register_hub,
    stop_all,
    wait_for,
)


@pytest.fixture
def setup(postgres: PostgresCluster, tmp_path: pathlib.Path) -> Iterator[tuple[HubProcess, list[Station], str]]:
    db = postgres.new_database()
    keys, viewer = register_hub(db, POLICIES, ("s1", "s2", "s3"))
    hub = HubProcess(db, viewer, tmp_path, ["--lease-seconds", "3", "--tasks", "towel,cup", "--seed", "0"])
    stations = [Station(name, hub.url, tmp_path, key, seed) for seed, (name, key) in enumerate(keys.items())]
    try:
        yield hub, stations, db
    finally:
        stop_all(hub, stations)


def test_stations_survive_kills_and_every_result_counts_once(setup: tuple[HubProcess, list[Station], str],
                                                            tmp_path: pathlib.Path) -> None:
    hub, stations, db = setup
    hub.start()
    for station in stations:
        station.start()
    victim = stations[2]

    wait_for(lambda: mid_lease(victim), 120, "the third station to be in the middle of a lease")
    assert victim.proc is not None
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    lost_lease = [r for r in victim.records() if r["kind"] == "leased"][-1]["assignment_id"]

    wait_for(lambda: bool(call(hub.url + "/v1/status", key=hub.key)[1]["results"] >= 8), 120, "8 results at the hub")
    hub.kill()  # SIGKILL while the two live stations upload
    wait_for(lambda: all("hub unreachable" in s.log() for s in stations[:2]), 60,
             "the live stations to notice the outage")
    hub.start()
    victim.start()  # the killed station comes back: syncs what it journaled, then works on
    exit_ok(stations)

    entries, results, online = check_results(hub, hub.key, db, tmp_path, stations)
    assert call(hub.url + "/v1/status", key=hub.key)[1]["results"] == len(results)
    check_lost_lease_redone_once(entries, lost_lease, results)
    rate = {row["policy"]: row["win_rate"] for row in online["ranking"]}
    assert rate["alpha"] > rate["gamma"]
    for station in stations:  # the operator's terminal never names a policy or its server
        assert not any(secret in station.log() for secret in (*POLICIES, "sim://"))
