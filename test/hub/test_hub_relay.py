"""The hub's relay of the policy protocol: a station key obtains no policy server's address, and
the runner still runs its episodes -- against openpi's own WebsocketPolicyServer (separate venv),
through the real HTTP API and WebSocket relay of a hub process.

The policy servers leak: one answers with a traceback naming its checkpoint and address. What a
station can read -- every answer to its key, the relayed frames, its socket's peer -- names no
policy, no checkpoint and no address.
"""

from __future__ import annotations

import json
import pathlib
import re
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hub_support import HubProcess, call
from runner_support import free_port, start_openpi_server, stop

from evalstop_ros.hub.store import open_store
from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.client import PolicyClient, ServerAddress, relay_address
from evalstop_ros.runner.episode import EpisodeSettings, run_episode
from evalstop_ros.runner.errors import Category, RunnerError
from evalstop_ros.runner.scripted import METADATA
from evalstop_ros.runner.trials import load_servers

CHECKPOINT = "pi0-secret-ckpt-7731"


@pytest.fixture(scope="module")
def openpi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """openpi's server: a good policy, and one whose second request raises a traceback naming its
    checkpoint and its own address (a leaking server)."""
    ports = {"good": free_port(), "error": free_port()}
    logs = tmp_path_factory.mktemp("openpi")
    processes = [start_openpi_server("good", ports["good"], logs / "good.log"),
                 start_openpi_server("error", ports["error"], logs / "error.log", "--fail-after", "2", "--error-text",
                                     f"{CHECKPOINT} on 127.0.0.1:{ports['error']} failed")]
    yield ports
    for process in processes:
        stop(process)


@pytest.fixture(params=["postgresql", "sqlite --relay"])
def relay_hub(request: pytest.FixtureRequest, openpi_servers: dict[str, int],
              tmp_path: pathlib.Path) -> Iterator[dict[str, Any]]:
    """A hub process relaying the policy protocol: on PostgreSQL by default, on SQLite by ``--relay``."""
    if request.param == "postgresql":
        db, extra = request.getfixturevalue("postgres").new_database(), []
    else:
        db, extra = str(tmp_path / "hub.sqlite"), ["--relay"]
    store = open_store(db)
    store.add_policy("alpha", f"tcp://127.0.0.1:{openpi_servers['good']}")
    store.add_policy("beta", f"127.0.0.1:{openpi_servers['error']}")
    keys = {"s1": store.add_station("s1"), "viewer": store.add_station("viewer", "viewer")}
    store.close()
    hub = HubProcess(db, keys["viewer"], tmp_path, extra)
    hub.start()
    try:
        yield {"hub": hub, "keys": keys, "ports": openpi_servers}
    finally:
        hub.stop()


def _secrets(ports: dict[str, int]) -> list[str]:
    return ["alpha", "beta", CHECKPOINT, *(str(port) for port in ports.values())]


def _leaks(text: str, ports: dict[str, int]) -> list[str]:
    return [secret for secret in _secrets(ports) if secret in text]


def _episode(locator: str, trial: int) -> tuple[Any, int]:
    """One episode through the relay, the server found as policy_runner finds it (its servers file,
    listing the hub's relay); the result and the peer port of the runner's socket."""
    servers_file = pathlib.Path(tempfile.mkdtemp()) / "servers.yaml"
    hub = locator.split("/v1/relay/")[0]
    servers_file.write_text(f"hub_relays: [{hub}]\n")
    servers = load_servers(servers_file)
    assert locator in servers, locator
    with PolicyClient(servers[locator]) as client:
        peer = client._ws.socket.getpeername()[1]
        assert client.metadata == METADATA | {"image_resolution": [32, 32]}  # the server's own, relayed
        result = run_episode(client, SimArm(seed=trial), EpisodeInfo("s", trial, "t", "c"),
                             EpisodeSettings("p", rate=500.0, max_steps=30), policy_session=f"s-{trial}")
    return result, peer


def test_a_station_key_obtains_no_policy_address(relay_hub: dict[str, Any]) -> None:
    hub, key, ports = relay_hub["hub"], relay_hub["keys"]["s1"], relay_hub["ports"]
    seen: list[str] = []
    for trial in range(2):
        status, work = call(hub.url + "/v1/work", "POST", key=key)
        assert status == 200
        status, locators = call(hub.url + "/v1/tickets/resolve", "POST", key=key, body={"ticket": work["runner_ticket"]})
        assert status == 200 and set(locators) == {"A", "B"}
        seen += [json.dumps(work), json.dumps(locators)]
        for locator in locators.values():
            assert re.fullmatch(rf"ws://127\.0\.0\.1:{hub.port}/v1/relay/rly_[A-Za-z0-9_-]+", locator), locator
        # the runner runs both arms through the relay: its socket's peer is the hub (what /proc/net/tcp shows)
        outcomes = {}
        for arm, locator in locators.items():
            try:
                result, peer = _episode(locator, trial)
            except RunnerError as err:
                outcomes[arm] = err
                seen.append(str(err))
            else:
                outcomes[arm] = result
                assert peer == hub.port and result.score is not None
        errors = [o for o in outcomes.values() if isinstance(o, RunnerError)]
        assert len(errors) == 1 and errors[0].category is Category.SERVER  # beta's traceback, replaced
        assert re.search(r"policy server error frame: policy server error \(hub log [0-9a-f]{8}\)", str(errors[0]))
        upload = {"upload_id": f"upload-{trial:04d}", "score_a": 1.0, "score_b": 0.0}
        status, answer = call(hub.url + f"/v1/assignments/{work['assignment_id']}/result", "POST", key=key, body=upload)
        assert status == 200, answer
        # the lease is over: its relay tokens reach nothing any more
        with pytest.raises(RunnerError) as refused:
            _episode(locators["A"], trial)
        assert refused.value.category is Category.UNREACHABLE
    # everything else a station key can ask for
    for method, path in (("GET", "/v1/status"), ("GET", "/v1/leaderboard"), ("GET", "/v1/journal"),
                         ("GET", "/leaderboard"), ("POST", "/v1/work")):
        seen.append(json.dumps(call(hub.url + path, method, key=key)))
    assert not [(text, _leaks(text, ports)) for text in seen if _leaks(text, ports)]
    # a station key, a made-up token or none at all opens no relay
    for token in (key, "rly_" + "x" * 43, ""):
        with pytest.raises(RunnerError) as refused:
            PolicyClient(ServerAddress(f"ws://127.0.0.1:{hub.port}/v1/relay", 0, api_key=token))
        assert refused.value.category is Category.UNREACHABLE
    # positive control: the hub does hold the addresses and the leaked text (its log), a viewer reads the names
    logs = hub.logs(tail=10**6)
    assert CHECKPOINT in logs and "hub log" in logs
    assert "alpha" in json.dumps(call(hub.url + "/v1/journal", key=relay_hub["keys"]["viewer"])[1])


def test_a_runner_takes_relay_locators_of_its_listed_hubs_only(tmp_path: pathlib.Path) -> None:
    token = "rly_" + "k" * 43
    servers_file = tmp_path / "servers.yaml"
    servers_file.write_text("hub_relays: [ws://hub.lab:8765]\npolicy_servers: {good: {host: 127.0.0.1, port: 8001}}\n")
    servers = load_servers(servers_file)
    address = servers[f"ws://hub.lab:8765/v1/relay/{token}"]
    assert (address.uri, address.api_key) == ("ws://hub.lab:8765/v1/relay", token)  # the token never in the URL
    assert servers["good"].uri == "ws://127.0.0.1:8001"
    for other in (f"ws://evil.lab:8765/v1/relay/{token}", f"ws://hub.lab:8765/v1/relay/{token}/x",
                  "ws://hub.lab:8765/v1/relay/esk_not-a-relay-token", "tcp://10.0.0.5:8000"):
        assert other not in servers and servers.get(other) is None, other
    assert relay_address(f"wss://hub.lab/v1/relay/{token}") == ServerAddress("wss://hub.lab/v1/relay", 0, token)
    servers_file.write_text("hub_relays: [http://hub.lab:8765]\n")
    with pytest.raises(RunnerError, match="hub_relays"):
        load_servers(servers_file)
    servers_file.write_text("hub_relays: [ws://hub.lab:8765]\n")  # a relay-only runner needs no policy_servers
    assert f"ws://hub.lab:8765/v1/relay/{token}" in load_servers(servers_file)
