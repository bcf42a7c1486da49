"""A station's HTTP client against a hub that dies in the middle of its answer or never answers.

A hub killed with SIGKILL while it writes an answer leaves the station a torn status line, a
body shorter than its ``Content-Length`` or a cut JSON document; a hung hub accepts and says
nothing; a load balancer in front of a killed hub process answers 502. The real hub cannot be killed at such a byte on purpose, so a TCP server sends exactly
those bytes. Each is "hub unreachable" (:class:`HubError` 503, retried), never a crash of the
station and never a wait longer than the client's timeout; a result journaled meanwhile stays
pending for the next sync.
"""

from __future__ import annotations

import pathlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from evalstop_ros.hub.errors import HubError
from evalstop_ros.station.client import StationClient

TORN = {
    "status line": b"HTTP/1.1 20",
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"assignment_id\": \"a1\"",
    "json": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"status\":",
    "nothing": b"",
    # a load balancer in front of two hub processes, one of them killed
    "502": b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: 11\r\n\r\nbad gateway",
}


@pytest.fixture
def dying_hub(request: pytest.FixtureRequest) -> Iterator[str]:
    """A server that reads each request, writes ``request.param``'s bytes and closes (``None``:
    holds the connection open without a word until the test ends)."""
    answer: bytes | None = request.param
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.recv(65536)
            if answer is None:
                held.append(conn)
                continue
            conn.sendall(answer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("dying_hub", list(TORN.values()), ids=list(TORN), indirect=True)
def test_a_torn_answer_is_an_unreachable_hub(dying_hub: str, tmp_path: pathlib.Path) -> None:
    client = StationClient(dying_hub, "key", tmp_path, timeout=5.0)
    with pytest.raises(HubError, match="unreachable|unavailable") as err:
        client.lease()
    assert err.value.status == 503
    upload = client.record_result("a1", 1.0, 0.0)
    assert client.sync() == 1
    assert [r["upload_id"] for r in client.pending()] == [upload]


@pytest.mark.parametrize("dying_hub", [None], ids=["silent"], indirect=True)
def test_a_silent_hub_is_unreachable_after_the_timeout(dying_hub: str, tmp_path: pathlib.Path) -> None:
    client = StationClient(dying_hub, "key", tmp_path, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(HubError, match="unreachable") as err:
        client.lease()
    assert err.value.status == 503
    assert time.monotonic() - start < 30  # bounded by the timeout (0.5 s), with room for a loaded machine
    client.renew("a1")  # renewing is best effort: an unreachable hub is no error there
