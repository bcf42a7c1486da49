"""The command stream: one per robot, owned by the command guard, for the runner's whole life.

Every command that reaches a robot adapter passes here: rollout steps (:meth:`CommandStream.step`),
watchdog holds (:meth:`~CommandStream.hold`), stops after a failure or an emergency stop
(:meth:`~CommandStream.stop`) and the move home between episodes (:meth:`~CommandStream.home`).
One :class:`~.guard.CommandGuard` limits them all; its reference is the pose commanded last, re-synced
to the measured joint state at every transition (the start of an episode, after a hold, after homing,
after a fault), and only to a joint state younger than ``max_state_age``.

The invariants (docs/deploying.md, "One command stream"):

* No command exceeds a joint's position, velocity or acceleration limit relative to the previous
  command *as the controller executes it*: every command is sent with the time it lasts
  (``duration``, a ``JointTrajectory``'s ``time_from_start``): the spacing to the previous command,
  at most one control period, and the guard limits it for that time. Two commands are never closer
  than half a period; homing steps are a full period apart.
* A hold is in the command space of the last command: the measured pose for position commands, zero
  velocity for velocity commands, zero end-effector motion for Cartesian ones; the gripper stays
  where it was last commanded. Without a fresh joint state nothing is published and the fault says
  why. Before the first command nothing is held (the robot has no command of ours to hold).
* Homing completes before a rollout starts. A robot with a ``home`` pose is homed here: guarded
  steps toward it (in the command space in use), then a wait until the measured pose is within
  ``home_tolerance`` of it, re-stepping from the measured pose while it is not, and a clear fault
  after ``home_timeout``. A robot without one homes itself (``reset()``, blocking), and the stream
  re-syncs to where it ended. A robot with a ``home`` pose that is not known to be at home (the
  first episode, or after a failed rollout) is homed before the next episode starts.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .adapters.base import EpisodeInfo, JointReading, RobotAdapter
from .errors import Category, RunnerError
from .guard import GUARD_MODES, CommandGuard

__all__ = ["CommandStream", "Sent", "StreamSettings"]

_JOINT_SPACES = ("joint_position", "joint_velocity")


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """How the stream paces and re-syncs; checked on construction (``ValueError``).

    ``period``: the control period (s, 1 / rate); ``guard_mode``: "refuse" or "clamp"
    (:mod:`.guard`); ``max_state_age``: the freshness bound (s) of a joint state a transition
    re-syncs to or a hold publishes; ``state_timeout``: how long the start of an episode waits for
    a fresh joint state (s); ``home_tolerance`` (rad, every joint) and ``home_timeout`` (s) of homing.
    """

    period: float = 1.0 / 15.0
    guard_mode: str = "refuse"
    max_state_age: float = 0.2
    state_timeout: float = 5.0
    home_tolerance: float = 0.01
    home_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("period", "max_state_age", "state_timeout", "home_tolerance", "home_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0; found {value!r}")
        if self.guard_mode not in GUARD_MODES:
            raise ValueError(f"guard mode must be one of {GUARD_MODES}; found {self.guard_mode!r}")


class Sent(NamedTuple):
    """One command as sent: when (monotonic s), why ("step", "hold", "stop", "home"), its space, values and
    how long it lasts (s)."""

    time: float
    kind: str
    action_space: str
    command: np.ndarray
    duration: float


def _fault(text: str) -> RunnerError:
    return RunnerError(text, category=Category.ROBOT, detail=text)


class CommandStream:
    """The one command stream of ``robot`` (see the module docstring).

    :param robot: The robot adapter; nothing else may call its ``act``.
    :param settings: Pacing, freshness and homing settings.
    :param listener: Told of every command sent (a :class:`Sent`), in the sending thread.
    """

    def __init__(self, robot: RobotAdapter, settings: StreamSettings | None = None, *,
                 listener: Callable[[Sent], None] | None = None) -> None:
        self.robot, self.settings, self.listener = robot, settings or StreamSettings(), listener
        self.lock = threading.RLock()
        self._guard: CommandGuard | None = None
        self._space: str | None = None          # the command space of the last command
        self._gripper: float | None = None      # the gripper as last commanded
        self._last_sent = -math.inf             # monotonic s
        self._homed = False
        self._stops = 0                         # bumped by every stop: homing in progress gives up
        self._simulated = bool(getattr(robot, "simulated_time", False))
        #: The last command sent.
        self.last: Sent | None = None

    # -- state --------------------------------------------------------------------------------
    @property
    def guard(self) -> CommandGuard:
        """The robot's guard (built once its limits are known: ``ros2`` may learn them in ``begin``)."""
        if self._guard is None:
            limits = getattr(self.robot, "limits", None)
            if limits is None:
                raise _fault("the robot's joint limits are not known")
            period = getattr(self.robot, "control_period", None) or self.settings.period
            self._guard = CommandGuard(limits, period, self.settings.guard_mode)
        return self._guard

    def _read(self) -> JointReading | None:
        joint_state = getattr(self.robot, "joint_state", None)
        if callable(joint_state):
            reading: JointReading | None = joint_state()
            return reading
        observation = self.robot.observe()   # a synchronous read: fresh
        gripper = np.asarray(observation.gripper_position, dtype=np.float64).ravel()
        return JointReading(np.asarray(observation.joint_position, dtype=np.float64),
                            float(gripper[0]) if gripper.size else 0.0, 0.0, observation.cartesian_position)

    def measure(self, why: str, wait: float = 0.0) -> JointReading:
        """The measured joint state, no older than ``max_state_age`` (waiting up to ``wait`` s for one);
        :class:`RunnerError` (robot fault, saying ``why`` it was needed) if there is none."""
        deadline = time.monotonic() + wait
        while True:
            reading = self._read()
            if reading is not None and reading.age <= self.settings.max_state_age:
                return reading
            if time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        last = "none received" if reading is None else f"the last is {reading.age:.2f} s old"
        raise _fault(f"no joint state fresher than {self.settings.max_state_age:g} s to {why} ({last}); "
                     "nothing was sent to the robot")

    def _resync(self, reading: JointReading) -> None:
        self.guard.start(reading.position, reading.cartesian)

    # -- sending ------------------------------------------------------------------------------
    def _spaced(self, gap: float) -> float:
        """Wait until ``gap`` s after the last command; the duration of the next one (module docstring)."""
        guard = self.guard
        if self._simulated:
            return guard.period
        wait = self._last_sent + gap - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if getattr(self.robot, "control_period", None):   # a simulated arm paced by the wall clock
            return guard.period
        return min(time.monotonic() - self._last_sent, guard.period)

    def _send(self, kind: str, command: np.ndarray, action_space: str, duration: float) -> None:
        self._last_sent = time.monotonic()
        self.robot.act(command, action_space, duration)
        self._space, self._gripper = action_space, float(command[-1])
        self.last = Sent(self._last_sent, kind, action_space, command.copy(), duration)
        if self.listener is not None:
            self.listener(self.last)

    def begin(self, episode: EpisodeInfo) -> CommandGuard:
        """Prepare a rollout: the robot's ``begin``, homing if the robot is not known to be home, and the
        guard re-synced to the measured pose (the rollout starts at rest where the robot is)."""
        self.robot.begin(episode)
        if getattr(self.robot, "home", None) is not None and not self._homed:
            self.home()
        with self.lock:
            self._resync(self.measure("start the episode", self.settings.state_timeout))
            return self.guard

    def step(self, action: np.ndarray, action_space: str) -> np.ndarray:
        """One rollout command: ``action`` (of a chunk the guard checked) rate-limited and sent; returned."""
        with self.lock:
            duration = self._spaced(self.settings.period / 2)
            command = self.guard.command(action, action_space, duration)
            self._homed = False
            self._send("step", command, action_space, duration)
            return command

    def hold(self, kind: str = "hold") -> None:
        """Hold the robot where it is, in the command space of the last command (module docstring), and
        re-sync to the measured pose. :class:`RunnerError` without a fresh joint state (nothing sent)."""
        with self.lock:
            space = self._space
            if space is None:
                return
            reading = self.measure("hold the robot", self.settings.max_state_age)
            n = len(self.guard.limits.joint_names)
            gripper = self._gripper if self._gripper is not None else reading.gripper
            if space == "joint_position":
                values = np.asarray(reading.position, dtype=np.float64)[:n]
            else:
                values = np.zeros(n if space == "joint_velocity" else 6)
            duration = self._spaced(self.settings.period / 2)
            self._send(kind, np.append(values, gripper), space, duration)
            self._resync(reading)

    def stop(self) -> str:
        """Hold now (a failure, an emergency stop, shutdown); never raises: "" or why nothing was sent."""
        self._stops += 1
        try:
            self.hold("stop")
        except RunnerError as err:
            return str(err)
        except Exception as err:  # an adapter's own failure: the caller logs it
            return f"{type(err).__name__}: {err}"
        return ""

    # -- homing -------------------------------------------------------------------------------
    def home(self) -> None:
        """Move home (module docstring); returns once the measured pose is there. :class:`RunnerError`
        (robot fault) after ``home_timeout``, without a fresh joint state, or when a stop interrupts it."""
        target = getattr(self.robot, "home", None)
        self._homed = False
        if target is None:
            with self.lock:
                reset = getattr(self.robot, "reset", None)
                if callable(reset):
                    reset()
                self._resync(self.measure("re-sync after homing", self.settings.state_timeout))
                self._homed = True
            return
        target = np.asarray(target, dtype=np.float64)
        n = len(self.guard.limits.joint_names)
        gripper = float(target[n]) if target.size > n else (self._gripper or 0.0)
        space = self._space if self._space in _JOINT_SPACES else "joint_position"
        stops, deadline = self._stops, time.monotonic() + self.settings.home_timeout
        settle = max(0.5, 5 * self.settings.period)
        while True:
            with self.lock:
                self._interrupted(stops)
                reading = self.measure("home the robot", self.settings.max_state_age)
                self._resync(reading)
            if self._at(reading, target[:n]):
                break
            self._step_home(target[:n], gripper, space, stops, deadline)
            arrived = self._wait_home(target[:n], min(time.monotonic() + settle, deadline))
            if arrived is not None:
                with self.lock:
                    self._interrupted(stops)
                    self._resync(arrived)
                break
            if time.monotonic() >= deadline:
                self._give_up(target[:n])
        self._homed = True

    def _at(self, reading: JointReading, target: np.ndarray) -> bool:
        error = np.abs(np.asarray(reading.position, dtype=np.float64)[:target.size] - target)
        return bool(np.all(error <= self.settings.home_tolerance))

    def _interrupted(self, stops: int) -> None:
        if self._stops != stops:
            raise _fault("homing interrupted by a stop")

    def _step_home(self, target: np.ndarray, gripper: float, space: str, stops: int, deadline: float) -> None:
        """Guarded steps until the reference is at ``target``; then zero velocity (velocity commands)."""
        n = target.size
        while True:
            with self.lock:
                self._interrupted(stops)
                guard = self.guard
                if np.allclose(guard.reference, target, rtol=0.0, atol=1e-9):
                    break
                duration = self._spaced(self.settings.period)
                self._send("home", guard.toward(target, gripper, space, duration), space, duration)
            if time.monotonic() >= deadline:
                self._give_up(target)
        while space == "joint_velocity":
            with self.lock:
                self._interrupted(stops)
                guard = self.guard
                duration = self._spaced(self.settings.period)
                command = guard.command(np.append(np.zeros(n), gripper), space, duration)
                self._send("home", command, space, duration)
                if not np.any(command[:n]):
                    break

    def _wait_home(self, target: np.ndarray, until: float) -> JointReading | None:
        """The fresh measured pose once it is within tolerance of ``target``; None at ``until``."""
        while True:
            reading = self._read()
            if reading is not None and reading.age <= self.settings.max_state_age and self._at(reading, target):
                return reading
            if time.monotonic() >= until:
                return None
            time.sleep(0.01)

    def _give_up(self, target: np.ndarray) -> None:
        self.stop()
        reading = self._read()
        where = ""
        if reading is not None:
            error = np.abs(np.asarray(reading.position, dtype=np.float64)[:target.size] - target)
            j = int(np.argmax(error))
            where = f" ({self.guard.limits.joint_names[j]} {error[j]:.3g} rad away)"
        raise _fault(f"homing: the arm did not reach home within {self.settings.home_timeout:g} s{where}")
