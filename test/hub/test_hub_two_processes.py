"""Two hub processes on one PostgreSQL database (issue #23, scale): six station processes, three
on each hub, lease and upload at once; each hub is killed with SIGKILL in turn while results are
being uploaded and restarted. Every result is counted exactly once (the journal's ``result``
entries against each station's acknowledged uploads and the ``results`` table), no assignment is
leased twice at the same time (an expired lease is handed out again at most once, after it
expired; a station holds one lease at a time), and each hub's leaderboard equals the offline
analysis of the exported journal.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from hub_support import (
    POLICIES,
    HubProcess,
    PostgresCluster,
    Station,
    call,
    check_results,
    exit_ok,
    hub_journal,
    register_hub,
    stop_all,
    wait_for,
)

from evalstop_ros.hub.store import open_store


@pytest.fixture
def setup(postgres: PostgresCluster, tmp_path: pathlib.Path) -> Iterator[tuple[list[HubProcess], list[Station], str]]:
    db = postgres.new_database()
    keys, viewer = register_hub(db, POLICIES, [f"s{i}" for i in range(1, 7)])
    hubs = []
    for i in range(2):
        workdir = tmp_path / f"hub{i}"
        workdir.mkdir()
        hubs.append(HubProcess(db, viewer, workdir, ["--lease-seconds", "3", "--tasks", "towel,cup", "--seed", str(i)]))
    stations = [Station(name, hubs[n % 2].url, tmp_path, key, n) for n, (name, key) in enumerate(keys.items())]
    try:
        yield hubs, stations, db
    finally:
        for hub in hubs:
            stop_all(hub, stations)


def _results(hub: HubProcess) -> int:
    try:
        status, counts = call(hub.url + "/v1/status", key=hub.key, timeout=5)
    except OSError:
        return 0
    return int(counts["results"]) if status == 200 else 0


def _exited(station: Station) -> bool:
    return station.proc is not None and station.proc.poll() is not None


def check_no_lease_held_twice(entries: list[dict[str, Any]]) -> None:
    """Each expired assignment is handed out again at most once and only after it expired, and
    no station holds two leases at once (the journal's order is the commit order)."""
    expired: set[str] = set()
    requeued_to: dict[str, str] = {}
    live: dict[str, set[str]] = {}
    owner: dict[str, str] = {}
    for e in entries:
        body = e["body"]
        if e["kind"] == "assigned":
            station, source = body["station"], body["requeue_of"]
            assert not live.get(station), f"station {station} was given a second lease while holding {live[station]}"
            if source is not None:
                assert source in expired, f"{source} handed out again before it expired"
                assert source not in requeued_to, f"{source} handed out again twice"
                requeued_to[source] = body["assignment"]
            live.setdefault(station, set()).add(body["assignment"])
            owner[body["assignment"]] = station
        elif e["kind"] in ("requeued", "result"):
            if e["kind"] == "requeued":
                expired.add(body["assignment"])
            live.get(owner[body["assignment"]], set()).discard(body["assignment"])
    results = [e["body"]["assignment"] for e in entries if e["kind"] == "result"]
    assert len(results) == len(set(results)), "an assignment has two results"
    assert not any(requeued_to.get(a) in results for a in results), "a trial and its requeued copy both counted"


def test_two_hubs_on_one_database_count_every_result_once_under_sigkill(
        setup: tuple[list[HubProcess], list[Station], str], tmp_path: pathlib.Path) -> None:
    hubs, stations, db = setup
    for hub in hubs:
        hub.start()
    for station in stations:
        station.start()
    for n, (victim, threshold) in enumerate(((hubs[0], 15), (hubs[1], 40))):
        wait_for(lambda: _results(hubs[1 - n]) >= threshold, 240, f"{threshold} results at the hub")
        victim.kill()  # SIGKILL while its stations (and the other hub's) lease and upload
        # Each of its stations notices at its next request (bounded by the client's timeout); one
        # that already ran all its trials has exited and has nothing to notice: on a loaded machine
        # the first hub takes minutes to restart, and the second hub's stations may run all their
        # trials meanwhile (the second kill then comes while only the first hub's stations upload).
        wait_for(lambda: all("hub unreachable" in s.log() or _exited(s) for s in stations[n::2]), 240,
                 "the killed hub's stations to notice the outage")
        if n == 0:  # at 15 results no more than one of them can have run all 12 trials
            assert any("hub unreachable" in s.log() for s in stations[0::2])
        victim.start()
    exit_ok(stations, 400, lambda: "".join(hub.logs() for hub in hubs))

    # Stations retry a 5xx like an outage, so a hub's own failure would go unnoticed by them:
    # no request may have ended in an exception (uvicorn logs each with its traceback).
    for hub in hubs:
        assert "Traceback" not in hub.logs(tail=10**9), hub.logs()
    for hub in hubs:  # both hubs give the same journal, and the same leaderboard as its offline analysis
        entries, results, _ = check_results(hub, hub.key, db, tmp_path, stations)
        assert hub_journal(hubs[0].url, hubs[0].key) == entries
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(set(seqs))
    store = open_store(db)
    try:
        assert store.counts()["results"] == len(results)
    finally:
        store.close()
    check_no_lease_held_twice(entries)
