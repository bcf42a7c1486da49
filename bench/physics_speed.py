#!/usr/bin/env python3
"""The robosuite Panda (physics extra): simulated steps per second, rendering per frame, trial time.

Measures, with the ``robosuite`` adapter on Lift (tools/install_physics.sh installs it):

* **physics**: control steps per second of the adapter's ``act`` (robosuite's controller plus
  MuJoCo's substeps of one 1/15 s period, no rendering), for the joint and the end-effector
  controllers; as the baseline measured in the same run, bare ``mujoco.mj_step`` over the same
  simulated time on the same model (what robosuite's controllers and bookkeeping add);
  real-time factor = simulated seconds per wall second;
* **rendering**: ms of the adapter's ``observe`` (both cameras rendered offscreen through EGL and
  read back, plus proprioception) at 96x96 (the scripted policies' resolution) and 224x224 (pi0's);
* **end to end**: one trial of the served ``grasp`` policy (project's policy server over
  loopback, real openpi frames) through :func:`~evalstop_ros.runner.episode.run_episode`:
  wall time per trial of 75 actions (5 s simulated), and its share of inference.

Goals (PASS/FAIL): physics alone at least real time (>= 15 control steps/s); a trial within 60 s
on two loaded cores. ::

    MUJOCO_GL=egl python bench/physics_speed.py [--steps 150] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time

import numpy as np
from _common import goal_verdicts  # bench/ is on sys.path when run as a script


def _per_second(call: object, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        call()  # type: ignore[operator]
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="control steps per physics measurement")
    parser.add_argument("--frames", type=int, default=20, help="frames per rendering measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("robosuite") is None:
        print("physics_speed: robosuite is not installed (tools/install_physics.sh); skipped")
        return 0
    from evalstop_ros.runner.adapters.base import EpisodeInfo
    from evalstop_ros.runner.adapters.robosuite import RobosuiteArm
    from evalstop_ros.runner.client import PolicyClient, ServerAddress
    from evalstop_ros.runner.episode import EpisodeSettings, run_episode
    from evalstop_ros.runner.server import PolicyServer

    rate = 15.0
    arm = RobosuiteArm(task="Lift", rate=rate, spread=0.1)
    out: dict[str, float] = {}
    for space, action in (("joint_velocity", np.array([0, 0, 0, 0, 0, 0, 0.2, 0.0])),
                          ("cartesian_velocity", np.array([0.0, 0.0, 0.02, 0, 0, 0, 0.0]))):
        arm.begin(EpisodeInfo("bench", 1, "lift", "c", space, (96, 96)))
        arm.act(action, space)  # first step compiles robosuite's numba kernels
        out[f"physics_steps_per_s_{space}"] = _per_second(lambda: arm.act(action, space), args.steps)
    # baseline: bare MuJoCo over the same simulated time (control period / model timestep substeps)
    env = arm.env
    import mujoco

    model, data = env.sim.model._model, env.sim.data._data
    substeps = int(round(1.0 / rate / model.opt.timestep))
    out["mujoco_steps_per_s"] = _per_second(lambda: [mujoco.mj_step(model, data) for _ in range(substeps)], args.steps)
    for size in (96, 224):  # rendering dominates observe: two cameras read back through EGL
        arm._camera_size = (size, size)
        arm.observe()
        out[f"observe_ms_{size}"] = 1000.0 / _per_second(arm.observe, args.frames)
    arm._camera_size = (96, 96)
    settings = EpisodeSettings("Pick up the red cube and lift it.", rate=rate, max_steps=75, timeout=600.0)
    with PolicyServer("grasp") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        start = time.perf_counter()
        result = run_episode(client, arm, EpisodeInfo("bench", 1, "lift", "scene_a"), settings,
                             policy_session="bench-1")
        out["trial_s"] = time.perf_counter() - start
    out["trial_inference_s"] = float(np.sum(result.latencies))
    out["trial_success"] = float(bool(result.score and result.score.success))
    arm.close()
    ratio = out["mujoco_steps_per_s"] / out["physics_steps_per_s_cartesian_velocity"]
    goals = {"physics at least real time (>= 15 steps/s)": min(out["physics_steps_per_s_joint_velocity"],
                                                               out["physics_steps_per_s_cartesian_velocity"]) >= rate,
             "a 75-action trial within 60 s": out["trial_s"] <= 60.0}
    if args.json:
        print(json.dumps({**out, "goals": goals}))
    else:
        for space in ("joint_velocity", "cartesian_velocity"):
            steps = out[f"physics_steps_per_s_{space}"]
            print(f"physics ({space}): {steps:7.1f} control steps/s, real-time factor {steps / rate:5.2f}")
        print(f"bare MuJoCo, same simulated time: {out['mujoco_steps_per_s']:7.1f} control periods/s "
              f"(robosuite's controller and bookkeeping: {ratio:.1f}x slower)")
        print(f"observe (two cameras rendered through EGL, proprioception): {out['observe_ms_96']:.1f} ms at 96x96, "
              f"{out['observe_ms_224']:.1f} ms at 224x224, i.e. {out['observe_ms_96'] / 2:.1f} and "
              f"{out['observe_ms_224'] / 2:.1f} ms per frame")
        print(f"end to end: a 75-action trial (5 s simulated) in {out['trial_s']:.1f} s, "
              f"{out['trial_inference_s']:.2f} s of it inference; success {int(out['trial_success'])}")
        return goal_verdicts(goals)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
