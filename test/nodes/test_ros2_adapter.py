"""The generic ``ros2`` adapter over real rclpy/DDS: JointState + Image in, JointTrajectory / Float64MultiArray out."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("ros_env")

NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["gripper"]


#: The test arm's limits: +-2 rad, 1 rad/s per joint.
LIMITS = {"position_lower": (-2.0,) * 7, "position_upper": (2.0,) * 7, "velocity": (1.0,) * 7}


def _arm(probe: Any, command_type: str, *, from_urdf: bool = False, array_space: str = "joint_position") -> Any:
    from evalstop_ros.runner.adapters import make_adapter
    from evalstop_ros.runner.guard import CommandLimits

    limits = None if from_urdf else CommandLimits(tuple(NAMES[:7]), **LIMITS)  # type: ignore[arg-type]
    return make_adapter("ros2", node=probe.node, joint_state_topic="joint_states", command_topic="command",
                        cameras=["exterior_image_1_left=cam/image_raw", "wrist_image_left=wrist/image_raw"],
                        command_type=command_type, joint_names=NAMES, dt=0.1, limits=limits, array_space=array_space)


def _feed(probe: Any) -> Any:
    """Publish a joint state and two bgr8 images every 20 ms from a timer of the probe."""
    from sensor_msgs.msg import Image, JointState

    joints = probe.node.create_publisher(JointState, "joint_states", 10)
    cams = [probe.node.create_publisher(Image, topic, 10) for topic in ("cam/image_raw", "wrist/image_raw")]
    pixels = np.zeros((4, 6, 3), np.uint8)
    pixels[..., 0] = 9   # blue in bgr8

    def tick() -> None:
        # names in another order than the adapter's, plus an extra joint it must ignore
        names = list(reversed(NAMES)) + ["head_pan"]
        joints.publish(JointState(name=names, position=[0.5] + [0.1 * i for i in range(7, 0, -1)] + [3.0]))
        for pub in cams:
            pub.publish(Image(height=4, width=6, encoding="bgr8", step=18, data=pixels.tobytes()))

    return probe.node.create_timer(0.02, tick)


def test_observe_and_commands_as_joint_trajectories(probe: Any) -> None:
    from trajectory_msgs.msg import JointTrajectory

    from evalstop_ros.runner.stream import CommandStream

    commands = probe.collect(JointTrajectory, "command", 10)
    arm = _arm(probe, "trajectory")
    _feed(probe)
    probe.spin_until(lambda: arm._joints is not None and len(arm._images) == 2, 20.0, "joint state and images")
    obs = arm.observe()
    assert obs.joint_position.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    assert obs.gripper_position.tolist() == [0.5]
    assert obs.images["exterior_image_1_left"][0, 0].tolist() == [0, 0, 9], "bgr8 -> RGB"
    reading = arm.joint_state()
    assert reading.position.tolist() == pytest.approx(obs.joint_position.tolist()) and reading.gripper == 0.5
    assert 0.0 <= reading.age < 1.0, "unstamped: aged from its arrival"
    arm.act(np.array([0.5] * 7 + [1.0]), "joint_velocity")
    first = probe.spin_until(lambda: commands and commands[0], 20.0, "a trajectory command")
    assert list(first.joint_names) == NAMES and list(first.points[0].velocities) == [0.5] * 7 + [1.0]
    assert first.points[0].time_from_start.nanosec == 100_000_000, "one period dt by default"
    assert first.header.stamp.sec > 0, "stamped when sent"
    arm.act(np.array([0.2] * 7 + [0.0]), "joint_position", 0.0625)
    second = probe.spin_until(lambda: len(commands) >= 2 and commands[1], 20.0, "a position command")
    assert list(second.points[0].positions) == [0.2] * 7 + [0.0]
    assert second.points[0].time_from_start.nanosec == 62_500_000, "as long as the stream says it lasts"
    # holds are the stream's: after position commands, the measured pose with the gripper as commanded
    stream, held = CommandStream(arm), threading.Event()

    def step_and_hold() -> None:   # (in another thread: the probe spins here, the joint states keep coming)
        stream.step(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0]), "joint_position")
        stream.hold()
        held.set()

    threading.Thread(target=step_and_hold).start()
    probe.spin_until(held.is_set, 20.0, "the hold")
    hold = probe.spin_until(lambda: len(commands) >= 4 and commands[3], 20.0, "a hold command")
    assert list(hold.points[0].positions) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0])


def test_an_episode_drives_the_arm_through_float64_arrays_and_homes_it(probe: Any) -> None:
    from standin_arm import StandInArm

    from evalstop_ros.runner.adapters.base import EpisodeInfo
    from evalstop_ros.runner.client import PolicyClient, ServerAddress
    from evalstop_ros.runner.episode import EpisodeSettings, run_episode
    from evalstop_ros.runner.server import PolicyServer
    from evalstop_ros.runner.stream import CommandStream, StreamSettings

    start = np.array([0.1 * i for i in range(1, 8)] + [0.5])
    stand_in = StandInArm(probe.node, NAMES, "array", start=start, dt=0.02, array_space="joint_velocity",
                          command_topic="command", camera_topics=("cam/image_raw", "wrist/image_raw"))
    arm = _arm(probe, "array", array_space="joint_velocity")
    probe.spin_until(lambda: arm._joints is not None and len(arm._images) == 2, 20.0, "joint state and images")
    assert arm.action_spaces == ("joint_velocity",), "a velocity controller takes velocities only"
    done: list[Any] = []
    settings = EpisodeSettings("p", rate=50.0, max_steps=10)
    stream = CommandStream(arm, StreamSettings(period=1.0 / settings.rate, home_tolerance=0.01, max_state_age=0.5))
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        thread = threading.Thread(target=lambda: done.append(run_episode(
            client, arm, EpisodeInfo("s", 1, "t", "c"), settings, stream=stream)))
        thread.start()
        probe.spin_until(lambda: done, 60.0, "the episode")
        thread.join()
    assert done[0].steps == 10 and done[0].home_error == ""
    assert np.abs(stand_in.pose()[:7]).max() <= 0.01, "home (all zeros), as measured, when the episode returns"
    velocities = np.array([c.values for c in stand_in.commands])
    assert np.abs(velocities).max() <= 1.0 + 1e-9 and set(stand_in.kinds) == {"joint_velocity"}
    assert len(velocities) > 10 and np.all(velocities[-1] == 0.0), "homed by velocities, ending at rest"


def test_limits_come_from_the_robot_description_urdf(probe: Any) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    from evalstop_ros.runner.adapters.base import EpisodeInfo
    from evalstop_ros.runner.errors import RunnerError

    arm = _arm(probe, "trajectory", from_urdf=True)
    with pytest.raises(RunnerError, match="no joint limits: no robot_description received"):
        arm.begin(EpisodeInfo("s", 1, "t", "c"))
    urdf = "<robot name='panda'>" + "".join(
        f"<joint name='{n}' type='revolute'><limit lower='-{i}' upper='{i}' velocity='{i / 2}' effort='1'/></joint>"
        for i, n in enumerate(NAMES[:7], start=1)) + "</robot>"
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    probe.node.create_publisher(String, "robot_description", latched).publish(String(data=urdf))
    probe.spin_until(lambda: arm.limits is not None, 20.0, "limits from the URDF")
    assert arm.limits.position_upper == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
    assert arm.limits.velocity[0] == 0.5 and arm.limits.source == "robot_description URDF"


def test_stale_joint_states_fail_the_rollout(probe: Any) -> None:
    from evalstop_ros.runner.errors import RunnerError

    arm = _arm(probe, "trajectory")
    with pytest.raises(RunnerError, match="no joint state for 1 s"):
        arm.observe()
