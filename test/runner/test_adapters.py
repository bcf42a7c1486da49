"""The ``droid`` and ``widowx`` adapters against fakes of their Python APIs (the hardware cannot exist here).

The fakes record what DROID's ``RobotEnv`` and Bridge's ``WidowXClient`` would have been asked
to do; the policy side is the real protocol (the project's server on loopback).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

from evalstop_ros.runner.adapters import make_adapter
from evalstop_ros.runner.adapters.base import EpisodeInfo, RobotAdapter
from evalstop_ros.runner.client import PolicyClient, ServerAddress
from evalstop_ros.runner.episode import EpisodeSettings, run_episode
from evalstop_ros.runner.errors import RunnerError
from evalstop_ros.runner.scripted import METADATA
from evalstop_ros.runner.server import PolicyServer
from evalstop_ros.runner.stream import CommandStream, StreamSettings

SETTINGS = EpisodeSettings("put the marker in the cup", rate=500.0, max_steps=12)


class FakeRobotEnv:
    """DROID's ``droid.robot_env.RobotEnv``: get_observation / step / reset."""

    made: ClassVar[list[FakeRobotEnv]] = []

    def __init__(self, action_space: str, gripper_action_space: str) -> None:
        self.action_space, self.gripper_action_space = action_space, gripper_action_space
        self.steps: list[np.ndarray] = []
        self.resets = 0
        FakeRobotEnv.made.append(self)

    def get_observation(self) -> dict[str, Any]:
        bgra = np.zeros((48, 64, 4), np.uint8)
        bgra[..., 0], bgra[..., 2] = 200, 10   # blue 200, red 10 in DROID's BGR(A) order
        return {"robot_state": {"joint_positions": [0.1] * 7, "cartesian_position": [0.0] * 6,
                                "gripper_position": 0.25},
                "image": {"24259877_left": bgra, "24259877_right": bgra, "13062452_left": bgra}}

    def step(self, action: np.ndarray) -> None:
        self.steps.append(np.array(action))

    def reset(self) -> None:
        self.resets += 1


class FakeWidowXClient:
    """Bridge's ``widowx_envs.widowx_env_service.WidowXClient``."""

    made: ClassVar[list[FakeWidowXClient]] = []

    def __init__(self, host: str, port: int) -> None:
        self.address, self.actions, self.resets, self.params = (host, port), [], 0, None
        FakeWidowXClient.made.append(self)

    def init(self, params: dict[str, Any]) -> None:
        self.params = params

    def get_observation(self) -> dict[str, Any]:
        return {"full_image": np.full((256, 256, 3), 128, np.uint8), "state": np.array([0.3, 0, 0.1, 0, 0, 0, 1.0])}

    def step_action(self, action: np.ndarray) -> None:
        self.actions.append(np.array(action))

    def reset(self) -> None:
        self.resets += 1


@pytest.fixture
def fake_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, attr, cls in (("droid.robot_env", "RobotEnv", FakeRobotEnv),
                            ("widowx_envs.widowx_env_service", "WidowXClient", FakeWidowXClient)):
        parent = types.ModuleType(name.split(".")[0])
        module = types.ModuleType(name)
        setattr(module, attr, cls)
        monkeypatch.setitem(sys.modules, name.split(".")[0], parent)
        monkeypatch.setitem(sys.modules, name, module)
    FakeRobotEnv.made.clear()
    FakeWidowXClient.made.clear()
    yield


def _run(robot: RobotAdapter, kind: str = "good", stream: CommandStream | None = None, **server: Any) -> Any:
    with PolicyServer(kind, **server) as policy, PolicyClient(ServerAddress("127.0.0.1", policy.port)) as client:
        return run_episode(client, robot, EpisodeInfo("s", 1, "marker_in_cup", "c"), SETTINGS, stream=stream)


def test_droid_adapter_drives_robot_env(fake_modules: None) -> None:
    robot = make_adapter("droid", cameras={"24259877_left": "exterior_image_1_left",
                                           "13062452_left": "wrist_image_left"})
    observation = robot.observe()
    assert sorted(observation.images) == ["exterior_image_1_left", "wrist_image_left"]
    assert observation.images["exterior_image_1_left"].shape == (48, 64, 3)
    assert observation.images["exterior_image_1_left"][0, 0].tolist() == [10, 0, 200], "BGR(A) -> RGB"
    assert observation.gripper_position.tolist() == [0.25]
    result = _run(robot)
    (env,) = FakeRobotEnv.made
    assert (env.action_space, env.gripper_action_space) == ("joint_velocity", "position")
    steps = np.array(env.steps)
    assert steps.shape == (12, 8) and set(np.unique(steps[:, 7])) <= {0.0, 1.0}
    assert np.abs(steps[:, :7]).max() <= 1.0
    assert env.resets == 1 and result.steps == 12 and result.score is None


def test_droid_adapter_holds_on_failure(fake_modules: None) -> None:
    robot = make_adapter("droid", cameras={"24259877_left": "exterior_image_1_left",
                                           "13062452_left": "wrist_image_left"})
    with pytest.raises(RunnerError, match="expected \\(N, 8\\)"):
        _run(robot, "wrong_shape")
    (env,) = FakeRobotEnv.made
    assert env.steps[-1].tolist() == [0.0] * 7 + [env.steps[-2][7]], "zero joint velocity, gripper as commanded"
    assert env.resets == 0, "a failed rollout does not move the arm home"


def test_droid_adapter_reports_missing_cameras(fake_modules: None) -> None:
    robot = make_adapter("droid", cameras={"24259877_left": "exterior_image_1_left"})
    with pytest.raises(RunnerError, match="needs camera 'wrist_image_left', which this robot does not provide"):
        _run(robot)


def test_widowx_adapter_drives_the_bridge_client(fake_modules: None) -> None:
    robot = make_adapter("widowx", host="widowx.local", port=5556)
    (client,) = FakeWidowXClient.made
    assert client.address == ("widowx.local", 5556) and client.params == {}
    metadata = {**METADATA, "needs_wrist_camera": False, "action_space": "cartesian_velocity"}
    stream = CommandStream(robot, StreamSettings(period=1.0 / SETTINGS.rate))
    result = _run(robot, metadata=metadata, action_dim=7, stream=stream)
    actions = np.array(client.actions)
    assert actions.shape == (12, 7) and set(np.unique(actions[:, 6])) <= {0.0, 1.0}
    assert client.resets == 1 and result.steps == 12
    assert stream.stop() == ""
    assert client.actions[-1].tolist() == [0.0] * 6 + [actions[-1, 6]], "no end-effector motion, gripper as commanded"


def test_widowx_adapter_refuses_joint_policies(fake_modules: None) -> None:
    with pytest.raises(RunnerError, match="cannot execute action space 'joint_velocity'"):
        _run(make_adapter("widowx"))


def test_missing_robot_stack_is_a_clear_error() -> None:
    with pytest.raises(RunnerError, match="the droid adapter needs DROID's RobotEnv"):
        make_adapter("droid", module="no_such_droid.robot_env")
    with pytest.raises(RunnerError, match="unknown robot adapter 'ur5'"):
        make_adapter("ur5")


def test_droid_commands_stay_within_the_published_franka_limits(fake_modules: None) -> None:
    from evalstop_ros.runner.adapters.droid import DROID_VELOCITY_UNIT, FRANKA_LIMITS

    robot = make_adapter("droid", cameras={"24259877_left": "exterior_image_1_left",
                                           "13062452_left": "wrist_image_left"})
    assert robot.limits is FRANKA_LIMITS["panda"]
    _run(robot)
    (env,) = FakeRobotEnv.made
    speeds = np.array(env.steps)[:, :7] * DROID_VELOCITY_UNIT   # rad/s
    assert np.all(np.abs(speeds) <= np.array(robot.limits.velocity) + 1e-9)
    # the fake arm's joint 4 reads 0.1 rad, above the Panda's upper limit -0.0698: it may only go down
    assert speeds[:, 3].max() <= 0.0
    assert make_adapter("droid", arm="fr3").limits is FRANKA_LIMITS["fr3"]
    with pytest.raises(RunnerError, match="droid.arm must be one of panda, fr3"):
        make_adapter("droid", arm="ur5e")


def test_widowx_end_effector_speed_and_workspace(fake_modules: None) -> None:
    robot = make_adapter("widowx", workspace=((0.0, -0.5, 0.0), (0.6, 0.5, 0.5)))
    assert robot.limits.workspace_upper == (0.6, 0.5, 0.5) and robot.limits.source == "widowx.workspace"
    metadata = {**METADATA, "needs_wrist_camera": False, "action_space": "cartesian_velocity"}
    _run(robot, metadata=metadata, action_dim=7)
    deltas = np.array(FakeWidowXClient.made[0].actions)[:12, :6]
    period = 1.0 / SETTINGS.rate
    assert np.linalg.norm(deltas[:, :3], axis=1).max() <= 0.5 * period + 1e-12
    assert np.linalg.norm(deltas[:, 3:], axis=1).max() <= 2.0 * period + 1e-12
    with pytest.raises(RunnerError, match="widowx.workspace"):
        make_adapter("widowx", workspace=((0.0, 0.0), (1.0, 1.0, 1.0)))
