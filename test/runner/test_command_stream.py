"""The command stream of every adapter: random runner lives checked command by command against the limits.

The hardware cannot exist here: DROID's ``RobotEnv`` and Bridge's ``WidowXClient`` are fakes that
move as their controllers would (a DROID arm lags behind its position targets), and a lagging arm
with a ``home`` pose stands in for a ROS arm (the ``ros2`` adapter itself is checked over DDS in
test/nodes/test_command_stream_ros2.py). The sim arm is the project's own.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from command_check import Recorded, drive, violations

from evalstop_ros.runner.adapters import make_adapter
from evalstop_ros.runner.adapters.base import EpisodeInfo, JointReading, Observation
from evalstop_ros.runner.adapters.droid import FRANKA_LIMITS
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.errors import Category, RunnerError
from evalstop_ros.runner.stream import CommandStream, Sent, StreamSettings

PANDA = FRANKA_LIMITS["panda"]
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])   # DROID's reset pose
RATE = 200.0   # a fast control rate: the random lives take a second or two each


class LaggingRobotEnv:
    """DROID's ``RobotEnv``: each step a position target is reached only by 60 % (a controller that lags),
    a velocity action moves 0.2 rad per unit (DROID's IK solver); ``reset`` homes the arm (blocking)."""

    joints = READY.copy()   # one arm, whichever action space its environment was built for

    def __init__(self, action_space: str, gripper_action_space: str) -> None:
        self.action_space = action_space

    def get_observation(self) -> dict[str, Any]:
        return {"robot_state": {"joint_positions": LaggingRobotEnv.joints.copy(), "cartesian_position": np.zeros(6),
                                "gripper_position": 0.0},
                "image": {"cam_left": np.zeros((8, 8, 3), np.uint8)}}

    def step(self, action: np.ndarray) -> None:
        if self.action_space == "joint_position":
            LaggingRobotEnv.joints = LaggingRobotEnv.joints + 0.6 * (np.asarray(action[:7]) - LaggingRobotEnv.joints)
        else:
            LaggingRobotEnv.joints = LaggingRobotEnv.joints + 0.2 * np.asarray(action[:7])

    def reset(self) -> None:
        LaggingRobotEnv.joints = READY.copy()


class MovingWidowXClient:
    """Bridge's ``WidowXClient``: the end effector moves by each delta; ``reset`` puts it back."""

    def __init__(self, host: str, port: int) -> None:
        self.state = np.array([0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0])

    def init(self, params: dict[str, Any]) -> None:
        pass

    def get_observation(self) -> dict[str, Any]:
        return {"full_image": np.zeros((8, 8, 3), np.uint8), "state": self.state.copy()}

    def step_action(self, action: np.ndarray) -> None:
        self.state[:6] += np.asarray(action[:6])
        self.state[6] = action[6]

    def reset(self) -> None:
        self.state = np.array([0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0])


class LaggingArm:
    """An arm with a ``home`` pose that the stream homes itself (as the ``ros2`` adapter): it follows its
    position targets by ``follow`` per command and integrates velocities; ``age`` is its joint state's age."""

    action_spaces = ("joint_position", "joint_velocity")
    limits = PANDA

    def __init__(self, follow: float = 0.6, start: np.ndarray | None = None) -> None:
        self.home = np.append(READY, 0.0)
        self.joints = (READY + 0.5 if start is None else start).copy()
        self.follow, self.age, self.sent = follow, 0.0, 0

    def begin(self, episode: EpisodeInfo) -> None:
        pass

    def observe(self) -> Observation:
        return Observation({}, self.joints.copy(), np.zeros(6), np.zeros(1))

    def joint_state(self) -> JointReading:
        return JointReading(self.joints.copy(), 0.0, self.age)

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        self.sent += 1
        if action_space == "joint_position":
            self.joints = self.joints + self.follow * (np.asarray(action[:7]) - self.joints)
        else:
            self.joints = self.joints + np.asarray(action[:7]) * (duration or 0.0)

    def score(self) -> None:
        return None


@pytest.fixture
def fake_stacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, attr, cls in (("droid.robot_env", "RobotEnv", LaggingRobotEnv),
                            ("widowx_envs.widowx_env_service", "WidowXClient", MovingWidowXClient)):
        module = types.ModuleType(name)
        setattr(module, attr, cls)
        monkeypatch.setitem(sys.modules, name.split(".")[0], types.ModuleType(name.split(".")[0]))
        monkeypatch.setitem(sys.modules, name, module)
    LaggingRobotEnv.joints = READY.copy()
    yield


def _robot(name: str) -> Any:
    if name == "sim":
        return SimArm(end_on_success=False)
    if name == "droid":
        return make_adapter("droid", cameras={"cam_left": "exterior_image_1_left"})
    if name == "widowx":
        return make_adapter("widowx")
    if name == "robosuite":
        if importlib.util.find_spec("robosuite") is None:
            if os.environ.get("EVALSTOP_PHYSICS_REQUIRED"):
                pytest.fail("robosuite is missing but EVALSTOP_PHYSICS_REQUIRED is set; run tools/install_physics.sh")
            pytest.skip("robosuite not installed; run tools/install_physics.sh (make test does)")
        # no camera rendered: the commands never depend on the images (the random lives send their own
        # actions), and rendering was most of each life's CPU; the cameras: test_robosuite_adapter.py
        return make_adapter("robosuite", rate=RATE, cameras=[])
    return LaggingArm()


@pytest.mark.parametrize(("name", "space", "seed"), [
    ("sim", "joint_position", 1), ("sim", "joint_velocity", 2),
    ("droid", "joint_position", 3), ("droid", "joint_velocity", 4),
    ("widowx", "cartesian_velocity", 5),
    # MuJoCo's physics: several seconds each on a 2-core machine
    *(pytest.param("robosuite", space, seed, marks=pytest.mark.slow)
      for space, seed in (("joint_position", 6), ("joint_velocity", 7), ("cartesian_velocity", 8))),
    ("homed arm", "joint_position", 9), ("homed arm", "joint_velocity", 10),
])
def test_no_command_of_a_random_runner_life_exceeds_a_limit(fake_stacks: None, name: str, space: str,
                                                            seed: int) -> None:
    robot = Recorded(_robot(name))
    stream = CommandStream(robot, StreamSettings(period=1.0 / RATE, home_timeout=10.0))
    done = drive(stream, space, np.random.default_rng(seed), operations=30, late=5.0 / RATE)
    assert done["steps"] > 100 and done["episode"] > 5, done
    assert robot.commands, "something was sent"
    assert violations(robot.commands, robot.limits) == []


def test_the_check_finds_a_stale_reference_after_a_hold() -> None:
    """The check itself: a hold at the lagging arm's pose, then a step from the last target (the stale
    reference this stream no longer uses) is a violation; from the held pose it is not."""
    from command_check import Command

    limits = dataclasses.replace(PANDA, acceleration=None)   # speeds only: the steps below start at full speed
    period, speed = 0.1, np.array(PANDA.velocity)
    target = READY + speed * period            # one full-speed step
    held = READY + 0.6 * speed * period        # where the lagging arm got to
    stale = [Command("joint_position", READY, period, READY), Command("joint_position", target, period, READY),
             Command("joint_position", held, period, held),
             Command("joint_position", target + speed * period, period, held)]
    assert len(violations(stale, limits)) == 1
    fresh = [*stale[:3], Command("joint_position", held + 0.9 * speed * period, period, held)]
    assert violations(fresh, limits) == []


def test_holds_are_in_the_command_space_in_use_at_the_measured_pose() -> None:
    arm, sent = LaggingArm(follow=0.5), []
    stream = CommandStream(arm, StreamSettings(period=0.01), listener=sent.append)
    stream.hold()
    assert sent == [], "nothing commanded yet: nothing to hold"
    stream.begin(EpisodeInfo("s", 1, "t", "c"))
    stream.step(np.append(arm.joints + 0.5, 1.0), "joint_position")
    measured = arm.joints.copy()
    stream.hold()
    assert sent[-1].kind == "hold" and sent[-1].command.tolist() == [*measured, 1.0], "the measured pose, gripper kept"
    assert stream.guard.reference.tolist() == measured.tolist(), "the reference re-synced to the held pose"
    stream.step(np.append(arm.joints, 0.0), "joint_velocity")
    stream.hold()
    assert sent[-1].command.tolist() == [0.0] * 7 + [0.0], "zero velocity after velocity commands"


def test_nothing_is_published_without_a_fresh_joint_state_and_the_fault_says_why() -> None:
    arm = LaggingArm()
    stream = CommandStream(arm, StreamSettings(period=0.01, max_state_age=0.05))
    stream.begin(EpisodeInfo("s", 1, "t", "c"))
    stream.step(np.append(arm.joints, 0.0), "joint_position")
    arm.age, before = 0.3, arm.sent
    with pytest.raises(RunnerError, match=r"no joint state fresher than 0.05 s to hold the robot \(the last is 0.30 s "
                                          r"old\); nothing was sent to the robot") as err:
        stream.hold()
    assert err.value.category is Category.ROBOT and err.value.detail, "the operator sees why"
    assert stream.stop().startswith("no joint state fresher than 0.05 s") and arm.sent == before
    with pytest.raises(RunnerError, match=r"no joint state fresher than 0.05 s to home the robot"):
        CommandStream(arm, StreamSettings(period=0.01, max_state_age=0.05, state_timeout=0.1)).begin(
            EpisodeInfo("s", 2, "t", "c"))


@pytest.mark.parametrize("space", ["joint_position", "joint_velocity"])
def test_homing_completes_before_the_next_rollout_starts(space: str) -> None:
    arm, sent = LaggingArm(follow=0.3), []
    stream = CommandStream(arm, StreamSettings(period=0.005, home_tolerance=0.005), listener=sent.append)
    stream.begin(EpisodeInfo("s", 1, "t", "c"))   # not known to be home: homed first
    assert np.abs(arm.joints - READY).max() <= 0.005 and sent and {s.kind for s in sent} == {"home"}
    first = len(sent)
    for _ in range(20):
        stream.step(np.append(arm.joints + (0.5 if space == "joint_position" else 1.0), 1.0), space)
    stream.home()
    assert np.abs(arm.joints - READY).max() <= 0.005, "home, as measured"
    assert stream.guard.reference.tolist() == arm.joints.tolist(), "re-synced to the measured pose"
    homing = [s for s in sent[first:] if s.kind == "home"]
    assert {s.action_space for s in homing} == {space}, "in the command space in use"
    stream.begin(EpisodeInfo("s", 2, "t", "c"))
    assert sent[-1].kind == "home", "at home already: the next rollout starts without moving"


def test_homing_that_cannot_finish_fails_with_a_clear_fault() -> None:
    arm = LaggingArm(follow=0.0)   # the brakes are on
    stream = CommandStream(arm, StreamSettings(period=0.01, home_timeout=0.5))
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"homing: the arm did not reach home within 0.5 s \(panda_joint\d 0.5 rad "
                                          r"away\)") as err:
        stream.begin(EpisodeInfo("s", 1, "t", "c"))
    assert err.value.category is Category.ROBOT and time.monotonic() - start < 5.0


def test_each_command_lasts_its_spacing_and_never_less_than_half_a_period() -> None:
    arm, sent = LaggingArm(follow=1.0), []
    period = 0.02
    stream = CommandStream(arm, StreamSettings(period=period), listener=sent.append)
    stream.begin(EpisodeInfo("s", 1, "t", "c"))
    start = len(sent)
    for k in range(30):
        if k % 10 == 9:
            time.sleep(3 * period)   # a late chunk: its first command lasts one period, not the gap
        stream.step(np.append(READY + 2.0, 0.0), "joint_position")
    steps: list[Sent] = sent[start:]
    gaps = np.diff([s.time for s in steps])
    assert gaps.min() >= period / 2
    durations = np.array([s.duration for s in steps[1:]])
    assert np.all(durations <= np.minimum(gaps, period) + 1e-9) and durations.max() == pytest.approx(period)
    moves = np.abs(np.diff([s.command[:7] for s in steps], axis=0))
    assert np.all(moves <= np.array(PANDA.velocity) * durations[:, None] * (1 + 1e-9))
