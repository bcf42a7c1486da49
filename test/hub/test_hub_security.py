"""Refusals of the hub service over real HTTP (uvicorn) on SQLite and PostgreSQL: each bad request
gets a clear error and changes nothing in the store or the journal."""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hub_support import HubProcess, call

from evalstop_ros.hub.store import open_store


@pytest.fixture
def hub(database: str, tmp_path: pathlib.Path) -> Iterator[dict[str, Any]]:
    store = open_store(database)
    store.add_policy("alpha", "tcp://10.9.8.7:8000")
    store.add_policy("beta", "tcp://10.9.8.6:8000")
    keys = {name: store.add_station(name) for name in ("s1", "s2", "gone")}
    keys["viewer"] = store.add_station("viewer", "viewer")
    store.revoke_station("gone")
    store.close()
    server = HubProcess(database, keys["viewer"], tmp_path)
    server.start()
    try:
        yield {"url": server.url, "keys": keys, "db": database}
    finally:
        server.stop()


def _state(db: str) -> tuple[Any, ...]:
    store = open_store(db)
    try:
        return tuple(e.to_dict() for e in store.journal()), store.counts()
    finally:
        store.close()


def _refused(hub: dict[str, Any], status: int, message: str, path: str, key: str | None, **kwargs: Any) -> None:
    before = _state(hub["db"])
    got, body = call(hub["url"] + path, "POST", key=key, **kwargs)
    assert got == status, body
    assert message in body["error"]
    assert _state(hub["db"]) == before, "a refused request wrote to the store"


def test_work_is_blinded_and_results_count_once(hub: dict[str, Any]) -> None:
    status, work = call(hub["url"] + "/v1/work", "POST", key=hub["keys"]["s1"])
    assert status == 200 and work["arms"] == ["A", "B"]
    text = json.dumps(work)
    assert not any(secret in text for secret in ("alpha", "beta", "10.9.8"))
    status, addresses = call(hub["url"] + "/v1/tickets/resolve", "POST", key=hub["keys"]["s1"],
                             body={"ticket": work["runner_ticket"]})
    if hub["db"].startswith("postgresql"):  # the multi-lab hub relays by default: no address leaves it
        assert status == 200 and all(a.startswith(hub["url"].replace("http", "ws") + "/v1/relay/rly_")
                                     for a in addresses.values()) and "10.9.8" not in json.dumps(addresses)
    else:  # one lab's hub gives its runner the addresses
        assert status == 200 and set(addresses.values()) == {"tcp://10.9.8.7:8000", "tcp://10.9.8.6:8000"}
    path = f"/v1/assignments/{work['assignment_id']}/result"
    upload = {"upload_id": "upload-0001", "score_a": 1.0, "score_b": 0.0}
    assert call(hub["url"] + path, "POST", key=hub["keys"]["s1"], body=upload) == (
        200, {"status": "recorded", "assignment_id": work["assignment_id"], "upload_id": "upload-0001"})
    before = _state(hub["db"])
    assert call(hub["url"] + path, "POST", key=hub["keys"]["s1"], body=upload)[1]["status"] == "duplicate"
    assert _state(hub["db"]) == before
    # a replay of the upload with other scores, or a second result, is refused
    _refused(hub, 409, "already used", path, hub["keys"]["s1"], body={**upload, "score_b": 1.0})
    _refused(hub, 409, "already has a result", path, hub["keys"]["s1"], body={**upload, "upload_id": "upload-0002"})
    _refused(hub, 401, "unknown or expired runner ticket", "/v1/tickets/resolve", hub["keys"]["s1"],
             body={"ticket": work["runner_ticket"]})  # the ticket dies with the lease


def test_keys_and_foreign_assignments_are_refused(hub: dict[str, Any]) -> None:
    _refused(hub, 401, "missing API key", "/v1/work", None)
    _refused(hub, 401, "unknown API key", "/v1/work", "esk_not-a-key")
    _refused(hub, 401, "revoked", "/v1/work", hub["keys"]["gone"])
    _refused(hub, 403, "only stations take work", "/v1/work", hub["keys"]["viewer"])
    status, work = call(hub["url"] + "/v1/work", "POST", key=hub["keys"]["s1"])
    assert status == 200
    path = f"/v1/assignments/{work['assignment_id']}/result"
    upload = {"upload_id": "upload-0001", "score_a": 1.0, "score_b": 0.0}
    _refused(hub, 404, "no assignment", path, hub["keys"]["s2"], body=upload)
    _refused(hub, 404, "no assignment", f"/v1/assignments/{work['assignment_id']}/renew", hub["keys"]["s2"])
    _refused(hub, 401, "unknown or expired runner ticket", "/v1/tickets/resolve", hub["keys"]["s2"],
             body={"ticket": work["runner_ticket"]})
    assert call(hub["url"] + "/v1/journal", key=hub["keys"]["s1"])[0] == 403  # stations never see policy names
    assert call(hub["url"] + "/v1/leaderboard")[0] == 401


def test_upload_ids_are_the_stations_own(hub: dict[str, Any]) -> None:
    """A station cannot probe another station's upload ids (no 409 "already used" for them) nor
    squat on them: the same id used first by s2 is still s1's to use, and each counts once."""
    works = {}
    for name in ("s1", "s2"):
        status, works[name] = call(hub["url"] + "/v1/work", "POST", key=hub["keys"][name])
        assert status == 200
    upload = {"upload_id": "upload-0001", "score_a": 1.0, "score_b": 0.0}
    squat = call(hub["url"] + f"/v1/assignments/{works['s2']['assignment_id']}/result", "POST", key=hub["keys"]["s2"],
                 body={**upload, "score_b": 0.5})
    assert squat[0] == 200 and squat[1]["status"] == "recorded", squat
    mine = call(hub["url"] + f"/v1/assignments/{works['s1']['assignment_id']}/result", "POST", key=hub["keys"]["s1"],
                body=upload)
    assert mine[0] == 200 and mine[1]["status"] == "recorded", mine
    # within one station an id still names one result
    _refused(hub, 409, "already used", f"/v1/assignments/{works['s1']['assignment_id']}/result", hub["keys"]["s1"],
             body={**upload, "score_b": 1.0})
    assert call(hub["url"] + "/v1/status", key=hub["keys"]["s1"]) == (200, {"done": 2, "results": 2})


def test_bad_payloads_are_refused(hub: dict[str, Any]) -> None:
    status, work = call(hub["url"] + "/v1/work", "POST", key=hub["keys"]["s1"])
    assert status == 200
    path = f"/v1/assignments/{work['assignment_id']}/result"
    key = hub["keys"]["s1"]
    _refused(hub, 400, "malformed request", path, key, raw=b'{"upload_id": "upload-0001", "score_a": 1.0,')
    _refused(hub, 400, "score_b", path, key, body={"upload_id": "upload-0001", "score_a": 1.0, "score_b": 7})
    _refused(hub, 400, "Extra inputs are not permitted", path, key, body={"upload_id": "upload-0001", "score_a": 1, "score_b": 0, "policy": "x"})
    _refused(hub, 413, "request body over", path, key, raw=b"{" + b" " * (10 * 1024 * 1024) + b"}")
    assert call(hub["url"] + "/v1/status", key=key) == (200, {"leased": 1, "results": 0})


#: Every endpoint that names a policy (issue #23, blinding): (method, path, body).
NAMING_ENDPOINTS = (("GET", "/v1/leaderboard", None), ("GET", "/leaderboard", None), ("GET", "/v1/journal", None))


def test_station_keys_cannot_read_what_names_a_policy(hub: dict[str, Any]) -> None:
    """A station reading the leaderboard before and after its upload would learn its arms: every
    endpoint that names a policy answers 403 to a station key and 200 to a viewer key."""
    status, work = call(hub["url"] + "/v1/work", "POST", key=hub["keys"]["s1"])
    assert status == 200
    upload = {"upload_id": "upload-0001", "score_a": 1.0, "score_b": 0.0}
    assert call(hub["url"] + f"/v1/assignments/{work['assignment_id']}/result", "POST", key=hub["keys"]["s1"],
                body=upload)[0] == 200
    for method, path, body in NAMING_ENDPOINTS:
        status, answer = call(hub["url"] + path, method, key=hub["keys"]["s1"], body=body)
        assert status == 403, (path, answer)
        assert "alpha" not in str(answer) and "beta" not in str(answer)
        assert call(hub["url"] + path, method, key=hub["keys"]["viewer"], body=body)[0] == 200, path
    # the page's sign-in form refuses a station key too (no cookie is set)
    login = urllib.request.Request(hub["url"] + "/leaderboard/login", method="POST",
                                   data=f"key={hub['keys']['s1']}".encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(login, timeout=10)
    assert refused.value.code == 403 and "Set-Cookie" not in refused.value.headers
    assert "only viewer keys" in refused.value.read().decode()
    # what a station may read names no policy
    status, counts = call(hub["url"] + "/v1/status", key=hub["keys"]["s1"])
    assert status == 200 and "alpha" not in json.dumps(counts)


def test_runner_ticket_resolves_exactly_once_under_concurrent_requests(hub: dict[str, Any]) -> None:
    """Runner tickets are single use: of eight simultaneous resolutions exactly one succeeds."""
    status, work = call(hub["url"] + "/v1/work", "POST", key=hub["keys"]["s1"])
    assert status == 200
    start = threading.Barrier(8)

    def resolve(_: int) -> int:
        start.wait(timeout=30)
        return call(hub["url"] + "/v1/tickets/resolve", "POST", key=hub["keys"]["s1"],
                    body={"ticket": work["runner_ticket"]}, timeout=30)[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(resolve, range(8)))
    assert statuses == [200] + [401] * 7
