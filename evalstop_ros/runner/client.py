"""A client of one openpi / RoboArena policy server (WebSocket + :mod:`.wire`; seed 001 §4.1).

Every failure is a :class:`~.errors.RunnerError` with a fixed category; frames are bounded
(docs/policy_runner.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Any, Self

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI, PayloadTooBig
from websockets.sync.client import ClientConnection, connect

from . import wire
from .errors import Category, RunnerError

__all__ = ["ACTION_DIMS", "MAX_FRAME_SIZE", "MAX_METADATA_SIZE", "PolicyClient", "ServerAddress", "ServerBook",
           "ServerConfig", "relay_address"]

#: Default bounds of a reply frame (32 MiB: a chunk of actions, or a traceback) and of the metadata frame (64 KiB).
MAX_FRAME_SIZE = 32 * 2**20
MAX_METADATA_SIZE = 64 * 2**10

#: Action spaces and their action length (robot values + gripper).
ACTION_DIMS = {"joint_position": 8, "joint_velocity": 8, "cartesian_velocity": 7}


@dataclasses.dataclass(frozen=True)
class ServerAddress:
    """Where a policy is served: ``ws://host:port`` and an optional API key (never logged)."""

    host: str
    port: int
    api_key: str = ""

    @property
    def uri(self) -> str:
        return self.host if self.host.startswith(("ws://", "wss://")) else f"ws://{self.host}:{self.port}"


#: A hub's relay locator (evalstop_ros/hub/relay.py): the relay's URL, then the arm's token.
_RELAY = re.compile(r"^(wss?://[^/?#\s]+(?:/[^?#\s]*)?/v1/relay)/(rly_[A-Za-z0-9_-]{16,128})$")


def relay_address(locator: str) -> ServerAddress | None:
    """The relay endpoint of a hub's relay locator (``ws://HUB/v1/relay/<token>``), with its token
    as the API key (sent as ``Authorization: Api-Key``, never in the URL); ``None`` for anything else.

    >>> relay_address("ws://hub.lab:8765/v1/relay/rly_" + "x" * 43).uri
    'ws://hub.lab:8765/v1/relay'
    >>> relay_address("tcp://10.0.0.5:8000") is None
    True
    """
    found = _RELAY.match(locator)
    return ServerAddress(found.group(1), 0, api_key=found.group(2)) if found else None


class ServerBook(dict[str, ServerAddress]):
    """A runner's servers by policy id (its servers file), which also takes the relay locators
    (:func:`relay_address`) of the hubs ``relays`` (``ws://HOST:PORT``), and of no other hub: a
    goal cannot send the runner to a server of its choosing.

    >>> book = ServerBook(["ws://hub.lab:8765"])
    >>> ("ws://hub.lab:8765/v1/relay/rly_" + "x" * 43) in book, ("ws://evil:1/v1/relay/rly_" + "x" * 43) in book
    (True, False)
    """

    def __init__(self, relays: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__()
        self.relays = tuple(r.rstrip("/") + "/v1/relay" for r in relays)

    def _relayed(self, key: object) -> ServerAddress | None:
        address = relay_address(key) if isinstance(key, str) else None
        return address if address is not None and address.host in self.relays else None

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or self._relayed(key) is not None

    def __getitem__(self, key: str) -> ServerAddress:
        if super().__contains__(key):
            return super().__getitem__(key)
        address = self._relayed(key)
        if address is None:
            raise KeyError(key)
        return address

    def get(self, key: str, default: ServerAddress | None = None) -> ServerAddress | None:  # type: ignore[override]
        return self[key] if key in self else default


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """What the server's metadata frame asks for (RoboArena's PolicyServerConfig; defaults as there).

    ``roboarena`` is true when the metadata carries any RoboArena key: the client then sends
    ``endpoint`` in every request and calls ``reset`` after each episode.
    """

    image_resolution: tuple[int, int] | None = (224, 224)
    needs_wrist_camera: bool = True
    n_external_cameras: int = 1
    needs_stereo_camera: bool = False
    needs_session_id: bool = False
    action_space: str = "joint_position"
    roboarena: bool = False

    @classmethod
    def from_metadata(cls, metadata: Any) -> ServerConfig:
        """Parse the metadata frame; raise :class:`RunnerError` on values the runner cannot serve.

        >>> ServerConfig.from_metadata({"image_resolution": [64, 48], "action_space": "joint_velocity"})
        ServerConfig(image_resolution=(64, 48), needs_wrist_camera=True, n_external_cameras=1, \
needs_stereo_camera=False, needs_session_id=False, action_space='joint_velocity', roboarena=True)
        """
        if not isinstance(metadata, dict):
            raise RunnerError("the policy server's metadata frame is not a map", category=Category.PROTOCOL)
        keys = {f.name for f in dataclasses.fields(cls)} - {"roboarena"}
        values: dict[str, Any] = {k: metadata[k] for k in keys if k in metadata}
        try:
            config = cls(**values, roboarena=bool(values))
            if config.image_resolution is not None:
                height, width = (int(v) for v in config.image_resolution)
                if height <= 0 or width <= 0:
                    raise ValueError
                config = dataclasses.replace(config, image_resolution=(height, width))
        except (TypeError, ValueError) as err:
            raise RunnerError(f"the policy server's metadata is invalid: {metadata!r}",
                              category=Category.PROTOCOL) from err
        if config.action_space not in ACTION_DIMS:
            raise RunnerError(f"the policy server asks for action space {config.action_space!r} "
                              f"(supported: {', '.join(ACTION_DIMS)})", category=Category.PROTOCOL)
        if config.n_external_cameras not in (0, 1, 2):
            raise RunnerError(f"the policy server asks for {config.n_external_cameras} external cameras (0-2)",
                              category=Category.PROTOCOL)
        return config


class PolicyClient:
    """One connection to a policy server; use as a context manager.

    :param address: The server.
    :param connect_timeout: Seconds to open the connection and receive the metadata frame.
    :param infer_timeout: Seconds to wait for each reply (a slower server fails the rollout).
    :param max_frame_size: Largest reply frame (bytes).
    :param max_metadata_size: Largest metadata frame (bytes).
    """

    def __init__(self, address: ServerAddress, *, connect_timeout: float = 10.0, infer_timeout: float = 10.0,
                 max_frame_size: int = MAX_FRAME_SIZE, max_metadata_size: int = MAX_METADATA_SIZE) -> None:
        self.infer_timeout = infer_timeout
        self._limit = max_metadata_size
        headers = {"Authorization": f"Api-Key {address.api_key}"} if address.api_key else None
        self._stack = contextlib.ExitStack()
        try:
            self._ws: ClientConnection = self._stack.enter_context(connect(
                address.uri, open_timeout=connect_timeout, compression=None, max_size=max_metadata_size,
                additional_headers=headers))
        except TimeoutError as err:
            raise RunnerError(f"policy server {address.uri} too slow to connect", category=Category.TOO_SLOW) from err
        except (OSError, InvalidHandshake, InvalidURI) as err:
            raise RunnerError(f"policy server {address.uri} unreachable ({type(err).__name__}: {err})",
                              category=Category.UNREACHABLE) from err
        try:
            self.metadata: dict[str, Any] = self._receive(connect_timeout, "metadata")
            self.config = ServerConfig.from_metadata(self.metadata)
        except RunnerError:
            self.close()
            raise
        # every later frame: the reply bound (websockets reads it per frame, before the payload)
        self._limit = self._ws.protocol.max_message_size = max_frame_size
        #: Seconds the last :meth:`infer` took (send to reply).
        self.last_latency = 0.0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._stack.close()

    def _receive(self, timeout: float, what: str) -> Any:
        try:
            frame = self._ws.recv(timeout=timeout)
        except TimeoutError as err:
            raise RunnerError(f"policy server too slow: no {what} within {timeout:g} s",
                              category=Category.TOO_SLOW) from err
        except ConnectionClosed as err:
            if isinstance(err.__cause__, PayloadTooBig) or (err.sent is not None and err.sent.code == 1009):
                raise RunnerError(f"policy server sent a {what} frame larger than {self._limit} bytes "
                                  f"({err.__cause__ or err}); refused before reading it",
                                  category=Category.PROTOCOL) from err
            raise RunnerError(f"policy server closed the connection (waiting for {what})",
                              category=Category.SERVER) from err
        if isinstance(frame, str):
            raise RunnerError(f"policy server error frame: {frame.strip()[:20000]}", category=Category.SERVER)
        message = wire.unpack(frame)
        if not isinstance(message, dict):
            raise RunnerError(f"policy server sent a {type(message).__name__} instead of a map ({what})",
                              category=Category.PROTOCOL)
        return message

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._ws.send(wire.pack(message))
        except ConnectionClosed as err:
            raise RunnerError("policy server closed the connection", category=Category.SERVER) from err

    def infer(self, observation: dict[str, Any]) -> dict[str, Any]:
        """Send one observation, return the server's reply map."""
        start = time.monotonic()
        self._send({"endpoint": "infer", **observation} if self.config.roboarena else observation)
        reply: dict[str, Any] = self._receive(self.infer_timeout, "action chunk")
        self.last_latency = time.monotonic() - start
        return reply

    def action_chunk(self, observation: dict[str, Any], action_dim: int) -> np.ndarray:
        """:meth:`infer`, then the reply's chunk as a float64 ``(N, action_dim)`` array.

        RoboArena clients read ``"actions"`` and its server documentation says ``"action"``: both
        are accepted; a single action ``(action_dim,)`` is a chunk of one.
        """
        reply = self.infer(observation)
        raw = reply.get("actions", reply.get("action"))
        if raw is None:
            raise RunnerError(f"policy server reply has no 'actions' (keys: {sorted(map(str, reply))})",
                              category=Category.PROTOCOL)
        try:
            chunk = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise RunnerError(f"policy server actions are not numbers ({err})", category=Category.PROTOCOL) from err
        if chunk.ndim == 1:
            chunk = chunk[None, :]
        if chunk.ndim != 2 or chunk.shape[0] == 0 or chunk.shape[1] != action_dim:
            raise RunnerError(f"policy server returned actions of shape {tuple(np.shape(raw))}; "
                              f"expected (N, {action_dim})", category=Category.PROTOCOL)
        return chunk  # non-finite values are the command guard's to refuse

    def reset(self, session_id: str) -> None:
        """RoboArena's ``reset`` request after an episode (only to servers that speak RoboArena)."""
        if self.config.roboarena:
            self._send({"endpoint": "reset", "session_id": session_id})
            try:  # RoboArena servers need not answer a reset; an error frame still fails it
                frame = self._ws.recv(timeout=min(self.infer_timeout, 1.0))
            except (TimeoutError, ConnectionClosed):
                return
            if isinstance(frame, str):
                raise RunnerError(f"policy server error on reset: {frame.strip()[:20000]}", category=Category.SERVER)
