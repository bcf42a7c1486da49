"""The hub's relay of the policy protocol: a runner reaches its arms' policy servers through the
hub, so that no station ever learns a policy server's address (docs/hub.md, docs/hub_server.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections.abc import Callable
from typing import Any

from .errors import HubError

__all__ = ["CONNECT_TIMEOUT", "MAX_FRAME_SIZE", "RELAY_PATH", "RELAY_TOKEN_PREFIX", "relay", "upstream_uri"]

#: The relay's WebSocket endpoint.
RELAY_PATH = "/v1/relay"
#: Relay tokens start with this (station keys ``esk_``, runner tickets ``tkt_``).
RELAY_TOKEN_PREFIX = "rly_"
#: Seconds to reach the policy server; largest frame the relay takes from a policy server (the runner's bound).
CONNECT_TIMEOUT = 10.0
MAX_FRAME_SIZE = 32 * 2**20

LOG = logging.getLogger("evalstop.hub.relay")
_HOST_PORT = re.compile(r"^(?:tcp://)?([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})/?$")


def upstream_uri(address: str) -> str | None:
    """The WebSocket URI the hub opens for a policy server's ``address``; ``None`` for an address it
    cannot relay (a ``sim://`` simulation).

    >>> upstream_uri("tcp://10.0.0.5:8000"), upstream_uri("10.0.0.5:8000"), upstream_uri("wss://p.lab/pi0")
    ('ws://10.0.0.5:8000', 'ws://10.0.0.5:8000', 'wss://p.lab/pi0')
    >>> upstream_uri("sim://success=0.7") is None
    True
    """
    if address.startswith(("ws://", "wss://")):
        return address
    found = _HOST_PORT.match(address)
    if found and 0 < int(found.group(2)) < 65536:
        return f"ws://{found.group(1)}:{found.group(2)}"
    return None


def token_of(authorization: str | None) -> str | None:
    """The relay token of an ``Authorization: Api-Key <token>`` header (``Bearer`` also taken)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() not in ("api-key", "bearer") or not token.startswith(RELAY_TOKEN_PREFIX):
        return None
    return token


async def relay(ws: Any, target: Callable[[str], str]) -> None:
    """Serve one relayed connection on the Starlette WebSocket ``ws`` (not accepted yet).

    ``target(token)`` is the policy server's address for a live relay token (a blocking store
    call, run in a thread) or raises. A refused token or an unreachable policy server closes the
    handshake unaccepted (HTTP 403 to the runner, which reports the server unreachable); the reason
    goes to the hub's log only.
    """
    from websockets.asyncio.client import connect

    token = token_of(ws.headers.get("authorization"))
    try:
        if token is None:
            raise HubError("no relay token (send 'Authorization: Api-Key rly_...')", 401)
        uri = upstream_uri(await asyncio.to_thread(target, token))
        if uri is None:
            raise HubError("the policy's address cannot be relayed", 409)
        upstream = await connect(uri, open_timeout=CONNECT_TIMEOUT, max_size=MAX_FRAME_SIZE, compression=None)
    except (HubError, OSError, TimeoutError, ValueError) as err:
        LOG.warning("relay refused: %s", err)
        await ws.close(code=1008)
        return
    except Exception as err:  # the websockets handshake's errors (InvalidStatus, InvalidMessage, ...)
        LOG.warning("relay refused: the policy server did not accept the connection (%s)", err)
        await ws.close(code=1008)
        return
    await ws.accept()
    async with upstream:
        down = asyncio.create_task(_to_runner(upstream, ws))
        up = asyncio.create_task(_to_server(upstream, ws))
        await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        for task in (down, up):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    code = upstream.close_code if upstream.close_code not in (None, 1005, 1006) else 1011
    with contextlib.suppress(Exception):
        await ws.close(code=1000 if code == 1000 else 1011)


async def _to_runner(upstream: Any, ws: Any) -> None:
    """The policy server's frames to the runner (a TEXT error frame replaced, its text logged)."""
    async for frame in upstream:
        if isinstance(frame, str):
            ref = secrets.token_hex(4)
            LOG.warning("relay: policy server error frame (hub log %s): %s", ref, frame[:20000])
            await ws.send_text(f"policy server error (hub log {ref})")
        else:
            await ws.send_bytes(frame)


async def _to_server(upstream: Any, ws: Any) -> None:
    """The runner's frames to the policy server, until the runner closes."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        frame = message.get("bytes")
        await upstream.send(frame if frame is not None else message.get("text") or "")
