"""The ``ros2`` adapter's command stream over real rclpy/DDS: random runner lives, both command types.

A stand-in arm (:mod:`standin_arm`, a mock of the hardware) moves as its controller would and
records every command with the pose it found; each consecutive pair is checked against the limits
as the controller executes it (:func:`command_check.violations`; a trajectory's own
``time_from_start``; an array, which carries no timing, one period: the stream spaces them so).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
import pytest
from command_check import drive, violations
from standin_arm import StandInArm

pytestmark = pytest.mark.usefixtures("ros_env")

NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["gripper"]
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.0])
RATE = 30.0


def _limits() -> Any:
    from evalstop_ros.runner.adapters.droid import FRANKA_LIMITS

    return dataclasses.replace(FRANKA_LIMITS["panda"], joint_names=tuple(NAMES[:7]), velocity_unit=1.0,
                               source="the Panda's published limits")


def _life(probe: Any, command_type: str, space: str, seed: int) -> tuple[StandInArm, Any, Any]:
    from evalstop_ros.runner.adapters import make_adapter
    from evalstop_ros.runner.stream import CommandStream, StreamSettings

    arm = StandInArm(probe.node, NAMES, command_type, start=READY + np.append(np.full(7, 0.3), 0.0), dt=1.0 / RATE,
                     array_space=space)
    robot = make_adapter("ros2", node=probe.node, cameras=["exterior_image_1_left=camera/image_raw"],
                         command_type=command_type, joint_names=NAMES, dt=1.0 / RATE, home=list(READY),
                         limits=_limits(), array_space=space)
    sent: list[Any] = []
    stream = CommandStream(robot, StreamSettings(period=1.0 / RATE, home_timeout=60.0, max_state_age=0.5),  # (a loaded machine)
                           listener=sent.append)
    done: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(drive(stream, space, np.random.default_rng(seed), operations=12, late=0.3))
        except BaseException as err:  # reported in the test's thread
            failed.append(err)

    probe.spin_until(lambda: robot.joint_state() is not None, 20.0, "the stand-in arm's joint state")
    thread = threading.Thread(target=run)
    thread.start()
    probe.spin_until(lambda: done or failed, 600.0, "the random life")
    thread.join()
    if failed:
        raise failed[0]
    probe.spin_until(lambda: len(arm.commands) >= len(sent), 20.0, "every command at the arm")
    assert len(arm.commands) == len(sent), "none lost (reliable, depth 1000), none from elsewhere"
    if command_type == "array":   # no timing in a Float64MultiArray: a full period apart, each lasts one
        assert np.diff([s.time for s in sent]).min() >= 1.0 / RATE - 1e-3 and {s.duration for s in sent} == {1 / RATE}
    return arm, robot, done[0]


@pytest.mark.parametrize(("command_type", "space", "seed"), [
    ("trajectory", "joint_position", 1), ("trajectory", "joint_velocity", 2),
    ("array", "joint_position", 3), ("array", "joint_velocity", 4),
])
def test_no_command_of_a_random_runner_life_exceeds_a_limit_over_dds(probe: Any, command_type: str, space: str,
                                                                      seed: int) -> None:
    arm, robot, done = _life(probe, command_type, space, seed)
    assert done["steps"] > 30 and done["episode"] >= 3, done
    assert violations(arm.commands, robot.limits) == []
    if command_type == "trajectory":
        durations = np.array([c.duration for c in arm.commands])
        assert durations.max() <= 1.0 / RATE + 1e-9 and durations.min() >= 0.5 / RATE - 1e-9
        gaps = np.diff(arm.stamps)
        assert gaps.min() >= 0.5 / RATE - 1e-3, "no two commands stamped closer than half a period"
        assert np.all(durations[1:] <= gaps + 1e-3), "each lasts no longer than the time since the previous one"
