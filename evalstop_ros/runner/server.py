"""The openpi protocol, server side: serves a scripted policy (tests, policy demo, the robosuite Panda).

    python -m evalstop_ros.runner.server --policy good --port 8001 [--api-key KEY]
"""

from __future__ import annotations

import argparse
import http
import logging
import signal
import sys
import threading
import time
import traceback
from typing import Any, Self

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from . import scripted_physics, wire
from .scripted import KINDS, ScriptedPolicy, metadata_for

__all__ = ["PolicyServer", "main"]


class PolicyServer:
    """A policy server on ``host:port`` (port 0: any free port, see :attr:`port`), in a thread or in the foreground."""

    def __init__(self, kind: str = "good", *, host: str = "127.0.0.1", port: int = 0, api_key: str = "",
                 metadata: dict[str, Any] | None = None, disconnect_after: int = 0, **policy: Any) -> None:
        self.kind, self.policy_options, self.api_key = kind, policy, api_key
        physics = kind in scripted_physics.KINDS  # a grasping policy for the robosuite Panda
        self.metadata = dict((scripted_physics.METADATA if physics else metadata_for(kind)) if metadata is None
                             else metadata)
        self._policy_class: Any = scripted_physics.GraspPolicy if physics else ScriptedPolicy
        self.disconnect_after = disconnect_after
        self.connections = 0
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=None,
                                     process_request=self._check_request)
        self.port: int = self._server.socket.getsockname()[1]
        self._thread: threading.Thread | None = None
        self._open: set[ServerConnection] = set()  # closed by close(): their threads then end
        self._lock = threading.Lock()

    def _check_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.api_key and request.headers.get("Authorization") != f"Api-Key {self.api_key}":
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "invalid API key\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        with self._lock:
            self.connections += 1
            self._open.add(ws)
        try:
            self._serve(ws)
        finally:
            with self._lock:
                self._open.discard(ws)

    def _serve(self, ws: ServerConnection) -> None:
        policy = self._policy_class(self.kind, **self.policy_options)
        ws.send(wire.pack(self.metadata))
        previous: float | None = None
        requests = 0
        while True:
            try:
                frame = ws.recv()
            except ConnectionClosed:
                return
            start = time.monotonic()
            requests += 1
            if self.disconnect_after and requests >= self.disconnect_after:
                ws.socket.close()  # the server "dies": no close frame
                return
            try:
                obs = wire.unpack(frame if isinstance(frame, bytes) else frame.encode())
                reply = policy.infer(obs)
                reply["server_timing"] = {"infer_ms": 1000 * (time.monotonic() - start)}
                if previous is not None:
                    reply["server_timing"]["prev_total_ms"] = 1000 * previous
                ws.send(wire.pack(reply))
            except ConnectionClosed:
                return
            except Exception:  # any policy error becomes openpi's error frame
                ws.send(traceback.format_exc())
                ws.close(code=1011, reason="Internal server error. Traceback included in previous frame.")
                return
            previous = time.monotonic() - start

    def start(self) -> Self:
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def close(self) -> None:
        """Stop listening and close every open connection (going-away close frames), so that no
        connection's thread keeps the process alive."""
        self._server.shutdown()
        with self._lock:
            open_now = list(self._open)
        for ws in open_now:
            ws.close(code=1001, reason="policy server shutting down")
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """Command line: serve one scripted policy until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m evalstop_ros.runner.server", description=__doc__.split("\n")[0])
    parser.add_argument("--policy", choices=KINDS + scripted_physics.KINDS, default="good")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--disconnect-after", type=int, default=0)
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in argv:  # started by ros2 launch as a Node: ignore the ROS arguments
        argv = argv[:argv.index("--ros-args")]
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    server = PolicyServer(args.policy, host=args.host, port=args.port, api_key=args.api_key,
                          disconnect_after=args.disconnect_after)
    print(f"serving scripted policy '{args.policy}' on ws://{args.host}:{server.port}", flush=True)
    # Ctrl-C (SIGINT, from the terminal and again from ros2 launch) or SIGTERM: close and exit 0
    stop = threading.Event()

    def stopping(*_: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # launch's own SIGINT follows the terminal's: not -2

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, stopping)
    server.start()
    while not stop.wait(0.5):
        pass
    server.close()
    print(f"policy server '{args.policy}' stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
