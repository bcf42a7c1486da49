"""``ros2``: any ROS 2 arm through generic topics (``JointState`` and images in, ``JointTrajectory`` or an array out).

Topics, timing and limits (parameters or the URDF): docs/policy_runner.md.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..errors import RunnerError
from ..guard import CommandLimits, limits_from_urdf
from .base import EpisodeInfo, JointReading, Observation, Score

__all__ = ["Ros2Arm", "image_to_rgb"]

_CHANNELS = {"rgb8": (3, False), "bgr8": (3, True), "rgba8": (4, False), "bgra8": (4, True)}


def image_to_rgb(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/Image`` as an (H, W, 3) RGB uint8 array."""
    if msg.encoding not in _CHANNELS:
        raise RunnerError(f"camera image encoding {msg.encoding!r} is not supported ({', '.join(_CHANNELS)})")
    channels, bgr = _CHANNELS[msg.encoding]
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    image = rows[:, :msg.width * channels].reshape(msg.height, msg.width, channels)[..., :3]
    return np.ascontiguousarray(image[..., ::-1] if bgr else image)


class Ros2Arm:
    """The ``ros2`` robot adapter (see the module docstring)."""

    action_spaces: tuple[str, ...] = ("joint_position", "joint_velocity")

    def __init__(self, *, node: Any, joint_state_topic: str = "joint_states", cameras: list[str] | None = None,
                 command_topic: str = "joint_command", command_type: str = "trajectory",
                 joint_names: list[str] | None = None, dt: float = 1.0 / 15.0, home: list[float] | None = None,
                 stale_after: float = 1.0, limits: CommandLimits | None = None,
                 robot_description_topic: str = "robot_description", gripper_range: tuple[float, float] = (0.0, 1.0),
                 array_space: str = "joint_position") -> None:
        if command_type not in ("trajectory", "array"):
            raise RunnerError(f"ros2.command_type must be 'trajectory' or 'array'; found {command_type!r}")
        if array_space not in self.action_spaces:
            raise RunnerError(f"ros2.array_space must be joint_position or joint_velocity; found {array_space!r}")
        if command_type == "array":  # a forward controller takes one command space
            self.action_spaces = (array_space,)
        #: A trajectory point says how long it lasts (``time_from_start``); an array does not: the command
        #: stream then spaces commands a full period apart.
        self.timed_commands = command_type == "trajectory"
        self.joint_names = list(joint_names or [f"joint{i}" for i in range(1, 9)])
        if len(self.joint_names) != 8:
            raise RunnerError(f"ros2.joint_names needs 7 arm joints and the gripper (8); found {len(self.joint_names)}")
        self.dt, self.stale_after, self.command_type = dt, stale_after, command_type
        self.home = np.asarray(home if home is not None else np.zeros(8), dtype=np.float64)
        self._lock = threading.Lock()
        self._joints: tuple[float, np.ndarray] | None = None
        self._images: dict[str, np.ndarray] = {}
        self._node = node
        node.create_subscription(JointState, joint_state_topic, self._on_joints, 10)
        for spec in cameras or []:
            name, _, topic = spec.partition("=")
            if not topic:
                raise RunnerError(f"ros2.cameras entries are 'camera_name=topic'; found {spec!r}")
            node.create_subscription(Image, topic, lambda msg, n=name: self._on_image(n, msg), 2)
        msg_type = JointTrajectory if command_type == "trajectory" else Float64MultiArray
        self._publisher = node.create_publisher(msg_type, command_topic, 10)
        self.gripper_range = (float(gripper_range[0]), float(gripper_range[1]))
        self.limits: CommandLimits | None = None
        self.limits_problem = ""
        if limits is not None:
            self._set_limits(limits)
        else:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            node.create_subscription(String, robot_description_topic, self._on_description, latched)

    def _set_limits(self, limits: CommandLimits) -> None:
        if len(limits.joint_names) != 7:
            raise RunnerError(f"ros2 limits: 7 arm joints needed; found {len(limits.joint_names)}")
        lower, upper = limits.position_lower, limits.position_upper
        arm_home = self.home[:7]
        if lower is not None and upper is not None and any(
                not lo <= h <= hi for lo, h, hi in zip(lower, arm_home, upper)):
            raise RunnerError("ros2.home lies outside the joint position limits")
        self.limits = limits

    def _on_description(self, msg: Any) -> None:
        try:
            self._set_limits(limits_from_urdf(msg.data, self.joint_names[:7], gripper=self.gripper_range))
        except (ValueError, RunnerError) as err:
            self.limits_problem = str(err)

    def _on_joints(self, msg: Any) -> None:
        """A joint state, timed when it was measured (its header stamp; unstamped: when it arrived)."""
        positions = dict(zip(msg.name, msg.position))
        if all(n in positions for n in self.joint_names):
            measured = time.monotonic()
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            if stamp > 0:
                measured -= min(max(0.0, (self._node.get_clock().now().nanoseconds - stamp) * 1e-9), 3600.0)
            with self._lock:
                self._joints = (measured, np.array([positions[n] for n in self.joint_names]))

    def _on_image(self, name: str, msg: Any) -> None:
        image = image_to_rgb(msg)
        with self._lock:
            self._images[name] = image

    def _state(self) -> np.ndarray:
        with self._lock:
            joints = self._joints
        if joints is None or time.monotonic() - joints[0] > self.stale_after:
            raise RunnerError(f"no joint state for {self.stale_after:g} s (is the arm driver running?)")
        return joints[1]

    def begin(self, episode: EpisodeInfo) -> None:
        """Wait (up to 5 s) for the limits and a joint state no older than ``stale_after``."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and (self.limits is None or (reading := self.joint_state()) is None
                                               or reading.age > self.stale_after):
            time.sleep(0.02)
        if self.limits is None:
            raise RunnerError(f"no joint limits: {self.limits_problem or 'no robot_description received'}")
        self._state()

    def observe(self) -> Observation:
        state = self._state()
        with self._lock:
            images = dict(self._images)
        return Observation(images=images, joint_position=state[:7], cartesian_position=np.zeros(6),
                           gripper_position=state[7:8])

    def joint_state(self) -> JointReading | None:
        """The last joint state received (arm joints, gripper) and its age (s), or None."""
        with self._lock:
            joints = self._joints
        if joints is None:
            return None
        return JointReading(joints[1][:7].copy(), float(joints[1][7]), time.monotonic() - joints[0])

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """Publish one command, stamped now, lasting ``duration`` s (``time_from_start``; None: ``dt``)."""
        values = np.asarray(action, dtype=np.float64)
        if self.command_type == "array":
            self._publisher.publish(Float64MultiArray(data=[float(v) for v in values]))
            return
        point = JointTrajectoryPoint()
        if action_space == "joint_velocity":
            point.velocities = [float(v) for v in values]
        else:
            point.positions = [float(v) for v in values]
        seconds = self.dt if duration is None else float(duration)
        whole = int(seconds)
        point.time_from_start = Duration(sec=whole, nanosec=min(int((seconds - whole) * 1e9), 999_999_999))
        trajectory = JointTrajectory(joint_names=self.joint_names, points=[point])
        trajectory.header.stamp = self._node.get_clock().now().to_msg()   # when it was sent
        self._publisher.publish(trajectory)

    def score(self) -> Score | None:
        return None
