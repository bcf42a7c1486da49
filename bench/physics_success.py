#!/usr/bin/env python3
"""Success rates of the scripted physics policies on robosuite Lift, with their standard errors.

Runs ``--rollouts`` seeded rollouts per policy kind (evalstop_ros/runner/scripted_physics.py)
as ``make demo-physics`` runs them: the ``robosuite`` adapter (Lift, the cube placed in a 20 cm
square, 15 Hz, 75 actions), the project's policy server over loopback, the runner's per-rollout
``<session>-<trial>`` id (which seeds each policy's grasp-height error) and the scenes cycling
through the preset's three initial conditions; every kind sees the same scenes (paired). Prints
a line per rollout, then per kind: successes / rollouts, the rate and its binomial SE
sqrt(p (1 - p) / n), the mean progress. ``--error M`` fixes the grasp-height error (m above the
cube's centre) instead of drawing it: where a grasp starts to slip. ::

    nice -n 10 env MUJOCO_GL=egl python bench/physics_success.py --rollouts 15 [--first 16] [--kinds grasp,sloppy]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time

import numpy as np

SCENES = ("scene_a", "scene_b", "scene_c")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="grasp,sloppy", help="comma-separated policy kinds")
    parser.add_argument("--rollouts", type=int, default=10,
                        help="rollouts per kind (default %(default)s, what make bench runs; the docs' rates: 30, as 15 and 15 from --first 16)")
    parser.add_argument("--first", type=int, default=1, help="trial number of the first rollout")
    parser.add_argument("--session", default="rates", help="session id (seeds the scenes and the policies' errors)")
    parser.add_argument("--seed", type=int, default=0, help="the adapter's scene seed (robosuite.seed)")
    parser.add_argument("--error", type=float, default=None, help="fixed grasp-height error (m) instead of drawn")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("robosuite") is None:
        print("physics_success: robosuite is not installed (tools/install_physics.sh); skipped")
        return 0
    from evalstop_ros.runner.adapters.base import EpisodeInfo
    from evalstop_ros.runner.adapters.robosuite import RobosuiteArm
    from evalstop_ros.runner.client import PolicyClient, ServerAddress
    from evalstop_ros.runner.episode import EpisodeSettings, run_episode
    from evalstop_ros.runner.server import PolicyServer

    kinds = args.kinds.split(",")
    arm = RobosuiteArm(task="Lift", seed=args.seed, rate=15.0, spread=0.1)
    settings = EpisodeSettings("Pick up the red cube and lift it.", rate=15.0, max_steps=75, timeout=600.0)
    outcomes: dict[str, list[tuple[bool, float]]] = {kind: [] for kind in kinds}
    options = {} if args.error is None else {"error": args.error}
    start = time.perf_counter()
    for i in range(args.rollouts):
        trial = args.first + i
        episode = EpisodeInfo(args.session, trial, "lift_cube", SCENES[trial % len(SCENES)])
        for kind in kinds:
            with PolicyServer(kind, **options) as server, \
                    PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
                result = run_episode(client, arm, episode, settings, policy_session=f"{args.session}-{trial}")
            score = result.score
            outcomes[kind].append((bool(score and score.success), float(score.progress if score else 0.0)))
        done = i + 1
        left = (time.perf_counter() - start) / done * (args.rollouts - done)
        print(f"rollout {done}/{args.rollouts} (trial {trial}, {episode.initial_condition}): "
              + ", ".join(f"{k} {'lifted' if outcomes[k][-1][0] else 'failed'}" for k in kinds)
              + f"; about {left / 60:.0f} min left", flush=True)
    arm.close()
    summary = {}
    for kind, runs in outcomes.items():
        n = len(runs)
        rate = sum(success for success, _ in runs) / n
        summary[kind] = {"rollouts": n, "successes": sum(success for success, _ in runs), "rate": rate,
                         "se": float(np.sqrt(rate * (1 - rate) / n)),
                         "progress": float(np.mean([progress for _, progress in runs]))}
    if args.json:
        print(json.dumps(summary))
    else:
        for kind, row in summary.items():
            print(f"{kind}: {row['successes']}/{row['rollouts']} lifted, rate {row['rate']:.3f} "
                  f"(SE {row['se']:.3f}), mean progress {row['progress']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
