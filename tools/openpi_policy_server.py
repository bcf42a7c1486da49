"""Serve a scripted policy with openpi's OWN server (``openpi_server.WebsocketPolicyServer``).

Runs in the separate venv of tools/openpi_venv.sh (numpy < 2, openpi-server, openpi-client);
imports only :mod:`evalstop_ros.runner.scripted` and :mod:`evalstop_ros.runner.scripted_physics`
(the robosuite Panda's grasping policies ``grasp`` and ``sloppy``) from this repository (numpy only).

    $(tools/openpi_venv.sh) tools/openpi_policy_server.py --policy good --port 8001
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from openpi_client.base_policy import BasePolicy
from openpi_server import WebsocketPolicyServer

from evalstop_ros.runner import scripted_physics
from evalstop_ros.runner.scripted import KINDS, METADATA, ScriptedPolicy


class _Served(BasePolicy):  # type: ignore[misc]
    def __init__(self, kind: str) -> None:
        self.policy = scripted_physics.GraspPolicy(kind) if kind in scripted_physics.KINDS else ScriptedPolicy(kind)

    def infer(self, obs: dict) -> dict:  # type: ignore[type-arg]
        return self.policy.infer(obs)

    def reset(self) -> None:
        self.policy.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", choices=KINDS + scripted_physics.KINDS, default="good")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"openpi WebsocketPolicyServer: scripted '{args.policy}' on {args.host}:{args.port}", flush=True)
    metadata = scripted_physics.METADATA if args.policy in scripted_physics.KINDS else METADATA
    try:
        WebsocketPolicyServer(_Served(args.policy), host=args.host, port=args.port, metadata=metadata).serve_forever()
    except KeyboardInterrupt:  # Ctrl-C / SIGINT from the demo: a normal end
        pass


if __name__ == "__main__":
    main()
