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
from evalstop_ros.runner.scripted import KINDS, ScriptedPolicy, metadata_for


class _Served(BasePolicy):  # type: ignore[misc]
    def __init__(self, kind: str, leak: str = "", **options: object) -> None:
        physics = kind in scripted_physics.KINDS  # a grasping policy for the robosuite Panda (no options)
        self.policy = scripted_physics.GraspPolicy(kind) if physics else ScriptedPolicy(kind, **options)
        self.leak = leak

    def infer(self, obs: dict) -> dict:  # type: ignore[type-arg]
        reply = self.policy.infer(obs)
        return {**reply, "policy_name": self.leak} if self.leak else reply

    def reset(self) -> None:
        self.policy.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", choices=KINDS + scripted_physics.KINDS, default="good")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail-after", type=int, default=3, help="request from which a failure kind fails")
    parser.add_argument("--delay", type=float, default=5.0, help="seconds a slow / stall policy sleeps")
    parser.add_argument("--error-text", default="scripted policy failure", help="what an error policy raises")
    parser.add_argument("--frame-bytes", type=int, default=300 * 10**6, help="reply size of a huge policy")
    parser.add_argument("--leak", default="", help="a text (the policy's name, its checkpoint) the server puts in its "
                        "metadata and every reply, as real servers do")
    args = parser.parse_args()
    options = {"fail_after": args.fail_after, "delay": args.delay, "error_text": args.error_text,
               "frame_bytes": args.frame_bytes}
    metadata = scripted_physics.METADATA if args.policy in scripted_physics.KINDS else metadata_for(args.policy)
    if args.leak:
        metadata = {**metadata, "policy_name": args.leak, "checkpoint": f"{args.leak}/checkpoints/30000"}
    logging.basicConfig(level=logging.WARNING)
    print(f"openpi WebsocketPolicyServer: scripted '{args.policy}' on {args.host}:{args.port}", flush=True)
    try:
        WebsocketPolicyServer(_Served(args.policy, args.leak, **options), host=args.host, port=args.port,
                              metadata=metadata).serve_forever()
    except KeyboardInterrupt:  # Ctrl-C / SIGINT from the demo: a normal end
        pass


if __name__ == "__main__":
    main()
