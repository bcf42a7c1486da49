"""A robot's command stream checked against its limits, every consecutive pair, as the controller executes it.

Shared by the property test of every adapter (test/runner/test_command_stream.py) and the ROS tests
(test/nodes): :func:`violations` reads a list of :class:`Command` (what reached the robot, how long
each lasts, where the arm measured itself when it arrived); :func:`drive` runs random sequences of
episodes, huge legal steps, late chunks, holds, refusals, faults, resets and stops through a
:class:`~evalstop_ros.runner.stream.CommandStream`.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any

import numpy as np

from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.errors import RunnerError
from evalstop_ros.runner.guard import CommandLimits
from evalstop_ros.runner.stream import CommandStream

#: Relative slack of the checks (floating point; a JointTrajectory's time_from_start is whole nanoseconds).
TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class Command:
    """One command as the robot got it: its space, its values without the gripper (rad, rad/s in the
    robot's units, or 6 end-effector values), how long the controller executes it (s), and the arm's
    measured joint pose when it arrived (None: unknown; several rows: the poses the arm reported within
    the runner's freshness bound, the pose at arrival last)."""

    space: str
    values: np.ndarray
    duration: float
    measured: np.ndarray | None = None


def _within(value: np.ndarray, bound: np.ndarray) -> bool:
    return bool(np.all(np.abs(value) <= bound * (1 + TOLERANCE) + 1e-12))


def violations(commands: list[Command], limits: CommandLimits) -> list[str]:
    """Every command that exceeds a position, velocity or acceleration limit both relative to the
    previous command and relative to the measured pose at rest; [] when there is none.

    Position commands move from the previous target to theirs in ``duration``; velocity commands run
    for ``duration``; a hold at the measured pose or at zero velocity is a command from rest.
    """
    n = len(limits.joint_names)
    vmax = np.asarray(limits.velocity)
    amax = None if limits.acceleration is None else np.asarray(limits.acceleration)
    lower = np.asarray(limits.position_lower) if limits.position_lower is not None else np.full(n, -np.inf)
    upper = np.asarray(limits.position_upper) if limits.position_upper is not None else np.full(n, np.inf)
    found: list[str] = []
    previous_q: np.ndarray | None = None     # the previous position target
    previous_v = [np.zeros(n)]               # the velocities the previous command may have had

    def accelerates_ok(v: np.ndarray, before: np.ndarray, duration: float) -> bool:
        return amax is None or _within(v - before, amax * duration)

    for i, command in enumerate(commands):
        t = command.duration
        if not t > 0:
            found.append(f"command {i}: duration {t}")
            continue
        if command.space == "cartesian_velocity":
            per = t if limits.cartesian_unit == "delta" else 1.0   # deltas (m, rad) or speeds (m/s, rad/s)
            for part, speed, what in ((command.values[:3], limits.linear_speed, "moves"),
                                      (command.values[3:6], limits.angular_speed, "turns")):
                if speed is not None and np.linalg.norm(part) > speed * per * (1 + TOLERANCE):
                    found.append(f"command {i}: the end effector {what} faster than {speed} per s")
            continue
        values = np.asarray(command.values, dtype=np.float64)[:n]
        poses = None if command.measured is None else np.atleast_2d(np.asarray(command.measured, dtype=np.float64))[:, :n]
        if command.space == "joint_position":
            if np.any(values < lower - 1e-9) or np.any(values > upper + 1e-9):
                found.append(f"command {i}: target outside the position limits")
            # the velocities this command may have started (several: the pose the stream re-synced to is
            # one of the poses the arm reported); the next command is checked against each
            started = []
            if previous_q is not None:
                v = (values - previous_q) / t
                if _within(v, vmax) and any(accelerates_ok(v, before, t) for before in previous_v):
                    started.append(v)
            for pose in poses if poses is not None else []:
                v = (values - pose) / t
                if _within(v, vmax) and accelerates_ok(v, np.zeros(n), t):
                    started.append(v)
            if not started:
                step = np.abs(values - (previous_q if previous_q is not None else poses[-1] if poses is not None
                                        else values)).max()
                found.append(f"command {i}: position step beyond the limits ({step:.4g} rad in {t:.4g} s)")
            previous_q, previous_v = values, started or [np.zeros(n)]
        else:  # joint_velocity, in rad/s
            v = values * limits.velocity_unit
            if not _within(v, vmax):
                found.append(f"command {i}: velocity beyond the limits ({np.abs(v).max():.4g} rad/s)")
            if not any(accelerates_ok(v, before, t) for before in [*previous_v, np.zeros(n)]):
                found.append(f"command {i}: acceleration beyond the limits")
            if poses is not None:
                reach = poses[-1] + v * t
                if np.any(reach < lower - 1e-6) or np.any(reach > upper + 1e-6):
                    found.append(f"command {i}: velocity runs out of the position limits")
            previous_q, previous_v = None, [v]
    return found


class Recorded:
    """A robot adapter whose every ``act`` is noted with the measured pose before it (the stream's view of
    the arm, exact for the simulated arm and the fakes); everything else is the adapter's."""

    def __init__(self, robot: Any) -> None:
        self._robot = robot
        self.commands: list[Command] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._robot, name)

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        reading = self._robot.joint_state() if hasattr(self._robot, "joint_state") else None
        values = np.asarray(action, dtype=np.float64)[:-1].copy()
        self.commands.append(Command(action_space, values, float(duration or 0.0),
                                     None if reading is None else np.asarray(reading.position).copy()))
        self._robot.act(action, action_space, duration)


def random_chunk(limits: CommandLimits, space: str, rng: np.random.Generator, size: int) -> np.ndarray:
    """An adversarial but legal chunk: position targets anywhere in the range (steps no tick can make),
    velocities anywhere in [-1, 1], end-effector deltas up to a few cm; the gripper 0 or 1."""
    n = len(limits.joint_names)
    if space == "joint_position":
        assert limits.position_lower is not None and limits.position_upper is not None
        joints = rng.uniform(limits.position_lower, limits.position_upper, (size, n))
    elif space == "joint_velocity":
        joints = rng.uniform(-1.0, 1.0, (size, n))
    else:
        joints = np.hstack([rng.uniform(-0.05, 0.05, (size, 3)), rng.uniform(-0.3, 0.3, (size, 3))])
    return np.hstack([joints, rng.integers(0, 2, (size, 1)).astype(np.float64)])


def drive(stream: CommandStream, space: str, rng: np.random.Generator, *, operations: int = 30,
          late: float = 0.05) -> collections.Counter[str]:
    """Random sequences of what a runner lives through, on ``stream``; how often each happened.

    Episodes run chunks of huge legal steps (:func:`random_chunk`), now and then late (``late`` s) or
    after a watchdog hold; a refused chunk (out of range) is a fault the stream stops after; resets
    home the robot (``home()``), stops hold it, back to back in any order.
    """
    done: collections.Counter[str] = collections.Counter()
    for trial in range(operations):
        op = rng.choice(["episode", "hold", "fault", "reset", "stop"], p=[0.5, 0.1, 0.1, 0.2, 0.1])
        done[op] += 1
        if op == "hold":
            stream.hold()
        elif op == "stop":
            assert stream.stop() == ""
        elif op == "reset":
            stream.home()
        elif op in ("episode", "fault"):
            guard = stream.begin(EpisodeInfo("property", trial, "t", "c", action_space=space))
            for _ in range(int(rng.integers(1, 6))):
                roll = rng.random()
                if roll < 0.2:                # a late chunk: the ticks in between coast, as the runner's loop does
                    deadline = time.monotonic() + late
                    while time.monotonic() < deadline:
                        stream.coast()
                        time.sleep(stream.settings.period)
                    done["late"] += 1
                elif roll < 0.35:
                    stream.hold()             # the watchdog, then a late chunk
                    done["watchdog"] += 1
                observation = stream.robot.observe()
                stream.observed(observation.joint_position, observation.cartesian_position, space)
                chunk = random_chunk(guard.limits, space, rng, int(rng.integers(1, 8)))
                if op == "fault":
                    chunk[-1, 0] = np.nan     # refused whole: the stream stops
                try:
                    checked = guard.check_chunk(chunk, space)
                except RunnerError:
                    assert stream.stop() == ""
                    done["refused"] += 1
                    break
                for action in checked:
                    stream.step(action, space)
                    done["steps"] += 1
    return done
