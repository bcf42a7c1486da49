"""A stand-in for a ROS arm (the hardware cannot exist here): a controller that moves as commanded.

It lives on the test's probe node: it subscribes to the runner's commands and publishes
``sensor_msgs/JointState`` (and a camera image, uniformly ``brightness``: the sim policies read a goal of
-0.5 rad from it, away from the joint limits) every 10 ms. A ``JointTrajectory`` point moves it
like a trajectory controller: linearly from where it is to the positions over ``time_from_start``,
or at the velocities for that long. A ``Float64MultiArray`` moves it like a forward controller of
``array_space``: to the positions over one period ``dt`` (the runner spaces them so), or at the
velocities until the next command or for at most ``velocity_timeout`` s (the command timeout a
velocity interface should have: the runner cannot stop an arm while it is starved itself). Its
joint states are stamped. Every command is recorded (:class:`command_check.Command`) with the poses the arm reported
in the ``fresh`` s before it arrived (what the runner may have re-synced to) and the pose it found.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np
from command_check import Command
from rclpy.duration import Duration


class StandInArm:
    """See the module docstring. ``start``: the 7 joints and the gripper at the start."""

    def __init__(self, node: Any, names: list[str], command_type: str, *, start: np.ndarray, dt: float,
                 array_space: str = "joint_position", command_topic: str = "joint_command",
                 camera_topics: tuple[str, ...] = ("camera/image_raw",), fresh: float = 0.6,
                 velocity_timeout: float = 0.2, brightness: int = 78) -> None:
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        self.names, self.command_type, self.dt, self.array_space = names, command_type, dt, array_space
        self.fresh, self.velocity_timeout, self.brightness = fresh, velocity_timeout, brightness
        self._reported: collections.deque[tuple[float, np.ndarray]] = collections.deque(maxlen=200)
        self.lock = threading.Lock()
        self.q = np.asarray(start, dtype=np.float64).copy()
        self._origin, self._velocity, self._since, self._until = self.q.copy(), np.zeros(8), time.monotonic(), 0.0
        #: Every command as it arrived, and its stamp (trajectories: header.stamp; arrays: arrival).
        self.commands: list[Command] = []
        self.stamps: list[float] = []
        self.kinds: list[str] = []
        self.grippers: list[float] = []
        self._state, self._image, self._clock = JointState, Image, node.get_clock()
        self._silent_after: int | None = None   # commands after which the joint states stop (a driver dropout)
        self._joints = node.create_publisher(JointState, "joint_states", 10)
        self._cameras = [node.create_publisher(Image, topic, 10) for topic in camera_topics]
        msg_type = JointTrajectory if command_type == "trajectory" else Float64MultiArray
        node.create_subscription(msg_type, command_topic, self._on_command, 1000)
        node.create_timer(0.01, self._tick)

    def pose(self, now: float | None = None) -> np.ndarray:
        """Where the arm is (7 joints and the gripper)."""
        with self.lock:
            return self._at(time.monotonic() if now is None else now)

    def _at(self, now: float) -> np.ndarray:
        moving = max(0.0, min(now, self._until) - self._since)
        return self._origin + self._velocity * moving

    def fall_silent_after(self, commands: int | None) -> None:
        """Stop publishing joint states once ``commands`` more commands arrived (None: publish again)."""
        with self.lock:
            self._silent_after = None if commands is None else len(self.commands) + commands

    @property
    def silent(self) -> bool:
        """Whether the joint states have stopped."""
        with self.lock:
            return self._silent_after is not None and len(self.commands) >= self._silent_after

    def _on_command(self, msg: Any) -> None:
        now = time.monotonic()
        with self.lock:
            here = self._at(now)
            if self.command_type == "trajectory":
                point = msg.points[0]
                duration = point.time_from_start.sec + 1e-9 * point.time_from_start.nanosec
                stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
                if len(point.positions):
                    space, values = "joint_position", np.asarray(point.positions, dtype=np.float64)
                    velocity = (values - here) / duration if duration > 0 else np.zeros(8)
                else:
                    space, values = "joint_velocity", np.asarray(point.velocities, dtype=np.float64)
                    velocity = values.copy()
                until = now + duration
            else:
                space, values, stamp, duration = self.array_space, np.asarray(msg.data, dtype=np.float64), now, self.dt
                if space == "joint_position":
                    velocity, until = (values - here) / duration, now + duration
                else:
                    velocity, until = values.copy(), now + self.velocity_timeout
            velocity[7] = 0.0
            here[7] = values[7]                       # the gripper follows at once
            self._origin, self._velocity, self._since, self._until = here, velocity, now, until
            recent = [q[:7] for t, q in self._reported if now - t <= self.fresh]
            self.commands.append(Command(space, values[:7].copy(), duration, np.array([*recent, here[:7]])))
            self.stamps.append(stamp)
            self.kinds.append(space)
            self.grippers.append(float(values[7]))

    def _tick(self) -> None:
        if self.silent:
            return
        now = time.monotonic()
        with self.lock:
            q = self._at(now)
            self._reported.append((now, q.copy()))
        state = self._state(name=list(self.names), position=[float(v) for v in q])
        # stamped when the pose was taken (this thread may have been held up since)
        state.header.stamp = (self._clock.now() - Duration(nanoseconds=int((time.monotonic() - now) * 1e9))).to_msg()
        self._joints.publish(state)
        image = self._image(height=32, width=32, encoding="rgb8", step=96, data=bytes([self.brightness]) * (32 * 32 * 3))
        for camera in self._cameras:
            camera.publish(image)
