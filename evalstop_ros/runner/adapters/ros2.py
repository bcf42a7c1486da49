"""``ros2``: any ROS 2 arm through generic topics.

In: ``sensor_msgs/JointState`` (``joint_state_topic``; ``joint_names`` picks the 7 arm joints,
then the gripper joint, whose position is taken as 0 = open .. 1 = closed) and one
``sensor_msgs/Image`` (rgb8 / bgr8 / rgba8 / bgra8) per camera (``cameras``:
``"exterior_image_1_left=/cam/image_raw"``). Out on ``command_topic``: a
``trajectory_msgs/JointTrajectory`` with one point (positions for ``joint_position``, velocities
for ``joint_velocity``, reached after ``dt``), or a ``std_msgs/Float64MultiArray`` of the 8
action values (``command_type: array``). ``stop`` sends a hold (the last joint positions, zero
velocity); ``reset`` sends ``home`` (default all zeros) as a position command reached no faster
than the velocity limits allow (a trajectory point that far in time; with ``command_type: array``,
rate-limited steps of ``dt``). Whatever publishes (a rollout step, a hold, a home step), no two
commands are stamped closer than ``dt / 2``: the spacing is kept on the clock that stamps them, at
the moment of stamping, so a thread delayed between the rollout's own spacing and the publish
cannot bunch two commands. The node that owns the subscriptions must be spinning
(policy_runner's executor does that).

Limits (:class:`~..guard.CommandLimits`): given as ``limits`` (policy_runner builds them from its
``ros2.*`` limit parameters), or read from the ``<limit>`` tags of the URDF on the
``robot_description`` topic (``std_msgs/String``, transient local, as robot_state_publisher
publishes it) when ``limits`` is None; a rollout does not start before they are known.
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
from ..guard import CommandGuard, CommandLimits, limits_from_urdf
from .base import EpisodeInfo, Observation, Score

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

    action_spaces = ("joint_position", "joint_velocity")

    def __init__(self, *, node: Any, joint_state_topic: str = "joint_states", cameras: list[str] | None = None,
                 command_topic: str = "joint_command", command_type: str = "trajectory",
                 joint_names: list[str] | None = None, dt: float = 1.0 / 15.0, home: list[float] | None = None,
                 stale_after: float = 1.0, limits: CommandLimits | None = None,
                 robot_description_topic: str = "robot_description", gripper_range: tuple[float, float] = (0.0, 1.0),
                 ) -> None:
        if command_type not in ("trajectory", "array"):
            raise RunnerError(f"ros2.command_type must be 'trajectory' or 'array'; found {command_type!r}")
        self.joint_names = list(joint_names or [f"joint{i}" for i in range(1, 9)])
        if len(self.joint_names) != 8:
            raise RunnerError(f"ros2.joint_names needs 7 arm joints and the gripper (8); found {len(self.joint_names)}")
        self.dt, self.stale_after, self.command_type = dt, stale_after, command_type
        self.home = np.asarray(home if home is not None else np.zeros(8), dtype=np.float64)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()      # one publish at a time, spaced (module docstring)
        self._last_sent = -1 << 62              # ns on the node's clock
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
        positions = dict(zip(msg.name, msg.position))
        if all(n in positions for n in self.joint_names):
            with self._lock:
                self._joints = (time.monotonic(), np.array([positions[n] for n in self.joint_names]))

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
        deadline = time.monotonic() + 5.0
        while (self._joints is None or self.limits is None) and time.monotonic() < deadline:
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

    def _publish(self, values: np.ndarray, action_space: str, duration: float | None = None) -> None:
        with self._send_lock:
            clock = self._node.get_clock()
            wait = self._last_sent + int(self.dt * 5e8) - clock.now().nanoseconds
            if wait > 0:
                time.sleep(wait * 1e-9)
            now = clock.now()
            self._last_sent = now.nanoseconds
            self._publisher.publish(self._message(values, action_space, duration, now.to_msg()))

    def _message(self, values: np.ndarray, action_space: str, duration: float | None, stamp: Any) -> Any:
        if self.command_type == "array":
            return Float64MultiArray(data=[float(v) for v in values])
        point = JointTrajectoryPoint()
        if action_space == "joint_velocity":
            point.velocities = [float(v) for v in values]
        else:
            point.positions = [float(v) for v in values]
        duration = self.dt if duration is None else duration
        seconds = int(duration)
        point.time_from_start = Duration(sec=seconds, nanosec=int((duration - seconds) * 1e9))
        trajectory = JointTrajectory(joint_names=self.joint_names, points=[point])
        trajectory.header.stamp = stamp   # when it was sent
        return trajectory

    def act(self, action: np.ndarray, action_space: str) -> None:
        self._publish(np.asarray(action, dtype=np.float64), action_space)

    def reset(self) -> None:
        """Home, no faster than the limits allow (see the module docstring)."""
        with self._lock:
            joints = self._joints
        if joints is None or self.limits is None:
            raise RunnerError("cannot go home: no joint state or no limits")
        start = joints[1]
        if self.command_type == "trajectory":
            speed = np.asarray(self.limits.velocity)
            duration = max(self.dt, float(np.max(np.abs(self.home[:7] - start[:7]) / speed)) * 1.5)
            self._publish(self.home, "joint_position", duration)
            return
        guard = CommandGuard(self.limits, self.dt)
        guard.start(start[:7])
        for _ in range(100000):
            command = guard.command(self.home, "joint_position")
            self._publish(command, "joint_position")
            if np.allclose(command[:7], self.home[:7], atol=1e-9):
                return
            time.sleep(self.dt)

    def stop(self) -> None:
        with self._lock:
            joints = self._joints
        if joints is not None:
            self._publish(joints[1], "joint_position")
        elif self.command_type == "array":
            self._publish(np.zeros(8), "joint_velocity")

    def score(self) -> Score | None:
        return None
