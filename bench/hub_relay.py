#!/usr/bin/env python3
"""Latency of one inference through the hub's relay (evalstop_ros/hub/relay.py), against the same
policy server reached directly, in the same run.

A policy server (``python -m evalstop_ros.runner.server``, its own process) and ``evalstop hub serve
--relay`` (its own process, SQLite); one client process leases, resolves the runner ticket (a relay
locator per arm) and sends ``--inferences`` observations (two 224x224 RGB images, joints, gripper:
what a DROID runner sends, about 300 kB) alternately to the server directly and through the relay,
so both see the same machine load. Reported per path: p50 / p99 / mean latency of one inference
(send to reply) and the relay's added latency (ratio and milliseconds) at p50 and p99.

    python bench/hub_relay.py [--inferences 400]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from hub_throughput import _pct, _port, _post, start_hub

from evalstop_ros.hub.store import open_store
from evalstop_ros.runner.client import PolicyClient, ServerAddress, relay_address


def observation(rng: np.random.Generator) -> dict[str, object]:
    return {"observation/exterior_image_1_left": rng.integers(0, 255, (224, 224, 3), dtype=np.uint8),
            "observation/wrist_image_left": rng.integers(0, 255, (224, 224, 3), dtype=np.uint8),
            "observation/joint_position": rng.uniform(-1, 1, 7), "observation/gripper_position": np.zeros(1),
            "prompt": "put the cup in the drawer"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inferences", type=int, default=400, help="inferences per path (default %(default)s)")
    args = parser.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-hub-relay-"))
    port = _port()
    server = subprocess.Popen([sys.executable, "-m", "evalstop_ros.runner.server", "--policy", "good", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    hub = None
    try:
        db = str(root / "hub.sqlite")
        store = open_store(db)
        store.add_policy("alpha", f"tcp://127.0.0.1:{port}")
        store.add_policy("beta", f"tcp://127.0.0.1:{port}")
        key, viewer = store.add_station("bench"), store.add_station("viewer", "viewer")
        store.close()
        hub, url = start_hub(db, root, "hub", viewer, extra=["--relay"])
        work, _ = _post(url + "/v1/work", key)
        locators, _ = _post(url + "/v1/tickets/resolve", key, {"ticket": work["runner_ticket"]})
        relayed = relay_address(locators["A"])
        assert relayed is not None, locators
        rng = np.random.default_rng(1)
        latency: dict[str, list[float]] = {"direct": [], "relay": []}
        deadline = time.monotonic() + 60
        while True:  # the server process starting
            try:
                direct_client = PolicyClient(ServerAddress("127.0.0.1", port))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with direct_client as direct, PolicyClient(relayed) as relay:
            clients = {"direct": direct, "relay": relay}
            for client in clients.values():  # warm both paths
                client.infer(observation(rng))
            for _ in range(args.inferences):
                for name, client in clients.items():
                    client.infer(observation(rng))
                    latency[name].append(client.last_latency)
        print(f"{args.inferences} inferences per path, observation of "
              f"{sum(np.asarray(v).nbytes for v in observation(rng).values() if isinstance(v, np.ndarray)) / 1e3:.0f} kB")
        for name, values in latency.items():
            print(f"  {name:6s}: p50 {_pct(values, 0.5):6.2f} ms  p99 {_pct(values, 0.99):6.2f} ms  "
                  f"mean {1000 * float(np.mean(values)):6.2f} ms")
        for q in (0.5, 0.99):
            d, r = _pct(latency["direct"], q), _pct(latency["relay"], q)
            print(f"  relay / direct at p{int(q * 100)}: {r / d:.2f} ({r - d:+.2f} ms per inference)")
    finally:
        if hub is not None:
            hub.terminate()
            hub.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
