"""A client of one openpi / RoboArena policy server (WebSocket + :mod:`.wire`).

Protocol (openpi ``websocket_client_policy.py`` / ``websocket_policy_server.py``; RoboArena,
seed ``001_*`` §4.1): the client connects (optional header ``Authorization: Api-Key <key>``),
the server's first frame is its metadata map, then each binary request frame (an observation)
gets one binary reply frame (the action chunk). A TEXT frame is a server-side error (a
traceback), after which the server closes the connection. RoboArena servers also take
``{"endpoint": "reset"}`` after an episode; plain openpi servers have no reset and would try to
infer on it, so :meth:`PolicyClient.reset` is sent only to servers whose metadata asks for the
RoboArena request format.

Every failure raises :class:`~.errors.RunnerError` with a message that names neither the policy
nor its address (the operator reads it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Self

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from . import wire
from .errors import RunnerError

__all__ = ["ACTION_DIMS", "PolicyClient", "ServerAddress", "ServerConfig"]

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
            raise RunnerError("the policy server's metadata frame is not a map")
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
            raise RunnerError(f"the policy server's metadata is invalid: {metadata!r}") from err
        if config.action_space not in ACTION_DIMS:
            raise RunnerError(f"the policy server asks for action space {config.action_space!r} "
                              f"(supported: {', '.join(ACTION_DIMS)})")
        if config.n_external_cameras not in (0, 1, 2):
            raise RunnerError(f"the policy server asks for {config.n_external_cameras} external cameras (0-2)")
        return config


class PolicyClient:
    """One connection to a policy server; use as a context manager.

    :param address: The server.
    :param connect_timeout: Seconds to open the connection and receive the metadata frame.
    :param infer_timeout: Seconds to wait for each reply (a slower server fails the rollout).
    """

    def __init__(self, address: ServerAddress, *, connect_timeout: float = 10.0, infer_timeout: float = 10.0) -> None:
        self.infer_timeout = infer_timeout
        headers = {"Authorization": f"Api-Key {address.api_key}"} if address.api_key else None
        self._stack = contextlib.ExitStack()
        try:
            self._ws: ClientConnection = self._stack.enter_context(connect(
                address.uri, open_timeout=connect_timeout, compression=None, max_size=None,
                additional_headers=headers))
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as err:
            raise RunnerError(f"policy server unreachable ({type(err).__name__})") from err
        try:
            self.metadata: dict[str, Any] = self._receive(connect_timeout, "metadata")
        except RunnerError:
            self.close()
            raise
        self.config = ServerConfig.from_metadata(self.metadata)
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
            raise RunnerError(f"policy server too slow: no {what} within {timeout:g} s") from err
        except ConnectionClosed as err:
            raise RunnerError(f"policy server closed the connection (waiting for {what})") from err
        if isinstance(frame, str):
            last = frame.strip().splitlines()[-1:] or [""]
            raise RunnerError(f"policy server error: {last[0][:200]}")
        message = wire.unpack(frame)
        if not isinstance(message, dict):
            raise RunnerError(f"policy server sent a {type(message).__name__} instead of a map ({what})")
        return message

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._ws.send(wire.pack(message))
        except ConnectionClosed as err:
            raise RunnerError("policy server closed the connection") from err

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
            raise RunnerError(f"policy server reply has no 'actions' (keys: {sorted(map(str, reply))})")
        chunk = np.asarray(raw, dtype=np.float64)
        if chunk.ndim == 1:
            chunk = chunk[None, :]
        if chunk.ndim != 2 or chunk.shape[0] == 0 or chunk.shape[1] != action_dim:
            raise RunnerError(f"policy server returned actions of shape {tuple(np.shape(raw))}; "
                              f"expected (N, {action_dim})")
        if not np.all(np.isfinite(chunk)):
            raise RunnerError("policy server returned non-finite actions")
        return chunk

    def reset(self, session_id: str) -> None:
        """RoboArena's ``reset`` request after an episode (only to servers that speak RoboArena)."""
        if self.config.roboarena:
            self._send({"endpoint": "reset", "session_id": session_id})
            try:  # RoboArena servers need not answer a reset; an error frame still fails it
                frame = self._ws.recv(timeout=min(self.infer_timeout, 1.0))
            except (TimeoutError, ConnectionClosed):
                return
            if isinstance(frame, str):
                raise RunnerError("policy server error on reset")
