#!/usr/bin/env python3
"""policy_runner's control loop: jitter at 15 Hz and per-step overhead excluding inference.

Runs :func:`evalstop_ros.runner.episode.run_episode` (the loop policy_runner runs) with the
``sim`` arm against a scripted policy on the project's policy server over loopback (real
WebSocket + msgpack frames), and, as the baseline measured in the same run, a bare loop that
only sleeps to the same absolute schedule. Reports, in ms:

* **jitter**: lateness of each step's start against its slot ``t0 + k / rate`` (p50, p99, max),
  for the runner and the bare loop, and their p99 ratio;
* **overhead**: the runner's own time per step, i.e. minus the policy query's latency and the
  robot's observe / act: request building (image resize, request map), action post-processing,
  scheduling (p50, p99), and as a fraction of the control period.

Run it on an idle machine: under load the OS scheduler dominates both loops.

Goals (printed as PASS/FAIL): runner p99 jitter <= bare-loop p99 + 5 ms; p99 overhead <= 10 %
of the period. ::

    python bench/runner_jitter.py --steps 150 --rate 15 [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import goal_verdicts  # bench/ is on sys.path when run as a script

from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.client import PolicyClient, ServerAddress
from evalstop_ros.runner.episode import EpisodeSettings, run_episode
from evalstop_ros.runner.server import PolicyServer


def bare_loop(rate: float, steps: int) -> np.ndarray:
    """Lateness (s) of a loop that only sleeps to the absolute schedule."""
    start = time.monotonic()
    late = []
    for k in range(steps):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        late.append(time.monotonic() - start - k / rate)
    return np.array(late)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=15.0)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    period = 1.0 / args.rate
    baseline = bare_loop(args.rate, args.steps)
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, SimArm(resolution=(180, 320)), EpisodeInfo("bench", 1, "t", "c"),
                             EpisodeSettings("bench", rate=args.rate, max_steps=args.steps))
    late = np.array(result.step_starts) - np.arange(result.steps) * period
    overhead = np.array(result.overheads)
    ms = {
        "runner_jitter_p50": 1e3 * float(np.percentile(late, 50)),
        "runner_jitter_p99": 1e3 * float(np.percentile(late, 99)),
        "runner_jitter_max": 1e3 * float(late.max()),
        "bare_jitter_p50": 1e3 * float(np.percentile(baseline, 50)),
        "bare_jitter_p99": 1e3 * float(np.percentile(baseline, 99)),
        "overhead_p50": 1e3 * float(np.percentile(overhead, 50)),
        "overhead_p99": 1e3 * float(np.percentile(overhead, 99)),
        "inference_p50": 1e3 * float(np.percentile(result.latencies, 50)),
    }
    goals = {"jitter": ms["runner_jitter_p99"] <= ms["bare_jitter_p99"] + 5.0,
             "overhead": ms["overhead_p99"] <= 0.1 * 1e3 * period}
    if args.json:
        print(json.dumps({"rate": args.rate, "steps": result.steps, **ms, "goals": goals}))
    else:
        print(f"{result.steps} steps at {args.rate:g} Hz (period {1e3 * period:.1f} ms), "
              f"camera 320x180 resized to 32x32, inference p50 {ms['inference_p50']:.2f} ms")
        print(f"  start jitter  runner p50 {ms['runner_jitter_p50']:.2f} p99 {ms['runner_jitter_p99']:.2f} "
              f"max {ms['runner_jitter_max']:.2f} ms | bare loop p50 {ms['bare_jitter_p50']:.2f} "
              f"p99 {ms['bare_jitter_p99']:.2f} ms | p99 ratio "
              f"{ms['runner_jitter_p99'] / max(ms['bare_jitter_p99'], 1e-6):.2f}")
        print(f"  overhead excl. inference  p50 {ms['overhead_p50']:.3f} p99 {ms['overhead_p99']:.3f} ms "
              f"({100 * ms['overhead_p99'] / (1e3 * period):.1f} % of the period)")
        return goal_verdicts(goals, indent="  ")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
