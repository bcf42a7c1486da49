"""One sim-eval rollout as a worker runs it: the cameras it renders and where its time went.

The worker runs in this process (no Ray: :class:`RolloutWorker` is plain Python), on a real
robosuite Lift, against the project's policy server over the openpi protocol.
"""

from __future__ import annotations

import pytest
from runner_support import require_robosuite

from evalstop_ros.parallel.rollout import RolloutRequest, RolloutWorker, _cameras
from evalstop_ros.parallel.sim_config import SimulationConfig
from evalstop_ros.parallel.sim_eval import served_policies
from evalstop_ros.runner.client import ServerConfig
from evalstop_ros.runner.scripted_physics import height_error, hesitation


@pytest.mark.parametrize(("config", "cameras"), [
    (ServerConfig(needs_wrist_camera=False), ["agentview"]),  # the scripted physics policies as sim-eval serves them
    (ServerConfig(needs_wrist_camera=True), ["agentview", "robot0_eye_in_hand"]),  # DROID-style policies
    (ServerConfig(needs_wrist_camera=True, n_external_cameras=0), ["robot0_eye_in_hand"]),
])
def test_a_rollout_renders_the_cameras_its_policy_reads(config: ServerConfig, cameras: list[str]) -> None:
    assert _cameras(config) == cameras


@pytest.mark.slow  # an environment built and one rollout: 8 s on the quiet machine, 40 s at load 27
def test_a_hesitating_policy_lifts_the_cube_after_its_wait_and_the_rollout_says_where_its_time_went() -> None:
    require_robosuite()
    # a rollout whose drawn wait is about 1 s (15 actions) and whose grasp holds (under 4 mm too high)
    trial = next(t for t in range(500) if 0.9 < hesitation("steady", f"s-{t}") < 1.2
                 and height_error("steady", f"s-{t}") < 0.004)
    simulation = SimulationConfig.model_validate({"tasks": {"lift": {"spread": 0.02, "max_steps": 90}},
                                                  "policies": {"steady_vla": {"serve": "steady"}}})
    worker = RolloutWorker()
    try:
        with served_policies(simulation) as addresses:
            request = RolloutRequest("s", trial, 1, "lift", "scene_a", "Lift the cube.", addresses["steady_vla"],
                                     "Lift", 0.02, 0, 90, 15.0)
            outcome = worker.run(request)
        arm = next(iter(worker._arms.values()))
        assert arm.cameras == ["agentview"], "the served policy reads no wrist camera: it is not rendered"
    finally:
        worker.close()
    assert outcome.ok and outcome.success, outcome
    waited = round(hesitation("steady", f"s-{trial}") * 15.0)
    assert waited + 20 <= outcome.steps < 90, (waited, outcome.steps)  # the wait, then about 27 actions to a lift
    assert outcome.cpu_s > 0 and outcome.policy_s > 0 and outcome.setup_s > 0, outcome
    assert outcome.policy_s + outcome.setup_s < outcome.duration_s, outcome
