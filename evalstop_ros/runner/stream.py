"""The command stream: one per robot, owned by the command guard, for the runner's whole life.

Rollout steps, holds, stops and homing all pass here; its invariants are in docs/deploying.md
("One command stream") and docs/policy_runner.md.
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

    def measure(self, why: str, wait: float = 0.0, *, after: float = -math.inf) -> JointReading:
        """The measured joint state, no older than ``max_state_age`` and measured after ``after`` (monotonic
        s), waiting up to ``wait`` s for one; :class:`RunnerError` (robot fault, saying ``why`` it was
        needed) if there is none.

        After a position command (``after`` given), a reading with the arm at its target (within
        ``home_tolerance``) is waited for a little longer (at most five periods, at least 0.5 s): the
        command reaches the arm later than it was sent.
        """
        now = time.monotonic()
        deadline = now + max(wait, after - now + self.settings.max_state_age)
        target = None
        if after > -math.inf and self.last is not None and self.last.action_space == "joint_position" \
                and not (self._simulated or getattr(self.robot, "control_period", None)):   # (those read exactly)
            target = self.last.command[:len(self.guard.limits.joint_names)]
        arrival = after + max(0.5, 5 * self.settings.period)
        while True:
            reading, now = self._read(), time.monotonic()
            if reading is not None and reading.age <= min(self.settings.max_state_age, now - after) and (
                    target is None or now >= arrival or self._near(reading, target)):
                return reading
            if now >= (max(deadline, arrival) if target is not None else deadline):
                break
            time.sleep(0.005)
        last = "none received" if reading is None else f"the last is {reading.age:.2f} s old"
        raise _fault(f"no joint state fresher than {self.settings.max_state_age:g} s to {why} ({last}); "
                     "nothing was sent to the robot")

    def _near(self, reading: JointReading, target: np.ndarray) -> bool:
        error = np.abs(np.asarray(reading.position, dtype=np.float64)[:target.size] - target)
        return bool(np.all(error <= self.settings.home_tolerance))

    def _resync(self, reading: JointReading) -> None:
        self.guard.start(reading.position, reading.cartesian)

    def _lasting(self, action_space: str | None) -> bool:
        """Whether a command of ``action_space`` lasts until the next: velocities without timing (a forward
        velocity controller keeps executing the last one)."""
        return action_space == "joint_velocity" and not getattr(self.robot, "timed_commands", True)

    def _brake(self, kind: str) -> None:
        """A velocity command without timing lasts until the next (a forward velocity controller): ramp the
        commanded velocity down to zero within the acceleration limits, one period apart, before a
        transition. (A timed command, or a simulated arm's, ends by itself.)"""
        if not self._lasting(self._space) or self._guard is None:
            return
        rest = np.append(np.zeros(len(self._guard.limits.joint_names)), self._gripper or 0.0)
        while np.any(self._guard.velocity):
            duration = self._spaced(self.settings.period)
            self._send(kind, self._guard.command(rest, "joint_velocity", duration), "joint_velocity", duration)

    def _settled(self) -> float:
        """Wait until the last command has run its course (a transition starts from rest); that moment."""
        if self.last is None or self._simulated:
            return -math.inf
        end = self.last.time + self.last.duration + min(0.01, self.settings.period / 4)
        wait = end - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return end

    # -- sending ------------------------------------------------------------------------------
    def _spaced(self, gap: float) -> float:
        """Wait until ``gap`` s after the last command; the duration of the next one (module docstring)."""
        guard = self.guard
        if self._simulated:
            return guard.period
        timed = getattr(self.robot, "timed_commands", True)   # False: a command cannot say how long it lasts
        wait = self._last_sent + (gap if timed else max(gap, guard.period)) - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if self._lasting(self._space) and self.last is not None:   # it ran until now, not one tick
            guard.overran(time.monotonic() - self.last.time - self.last.duration)
        if getattr(self.robot, "control_period", None) or not timed:   # each command lasts one period
            return guard.period
        return min(time.monotonic() - self._last_sent, guard.period)

    def _send(self, kind: str, command: np.ndarray, action_space: str, duration: float) -> None:
        sending = time.monotonic()
        self.robot.act(command, action_space, duration)
        self._last_sent = time.monotonic()   # spacing counts from the end of the send: the stamp lies before it
        self._space, self._gripper = action_space, float(command[-1])
        self.last = Sent(sending, kind, action_space, command.copy(), duration)
        if self.listener is not None:
            self.listener(self.last)

    def begin(self, episode: EpisodeInfo) -> CommandGuard:
        """Prepare a rollout: the robot's ``begin``, homing if the robot is not known to be home, and the
        guard re-synced to the measured pose (the rollout starts at rest where the robot is)."""
        self.robot.begin(episode)
        if getattr(self.robot, "home", None) is not None and not self._homed:
            self.home()
        with self.lock:
            self._brake("hold")
            self._resync(self.measure("start the episode", self.settings.state_timeout, after=self._settled()))
            return self.guard

    def step(self, action: np.ndarray, action_space: str) -> np.ndarray:
        """One rollout command: ``action`` (of a chunk the guard checked) rate-limited and sent; returned."""
        with self.lock:
            duration = self._spaced(self.settings.period / 2)
            command = self.guard.command(action, action_space, duration)
            self._homed = False
            self._send("step", command, action_space, duration)
            return command

    def observed(self, joint_position: np.ndarray, cartesian_position: np.ndarray | None, action_space: str) -> None:
        """A rollout's new observation (:meth:`.guard.CommandGuard.observed`); a velocity that lasts until the
        next command keeps its integrated reference instead (the observation may be older than the motion)."""
        with self.lock:
            if not self._lasting(action_space):
                self.guard.observed(joint_position, cartesian_position, action_space)

    def coast(self) -> None:
        """A tick without an action (waiting for a chunk): a velocity that lasts until the next command is
        ramped one step toward zero, within the acceleration limits; nothing else is sent."""
        with self.lock:
            if self._lasting(self._space) and self._guard is not None and np.any(self._guard.velocity):
                duration = self._spaced(self.settings.period / 2)
                rest = np.append(np.zeros(len(self._guard.limits.joint_names)), self._gripper or 0.0)
                self._send("hold", self._guard.command(rest, "joint_velocity", duration), "joint_velocity", duration)

    def hold(self, kind: str = "hold") -> None:
        """Hold the robot where it is, in the command space of the last command (module docstring), and
        re-sync to the measured pose. :class:`RunnerError` without a fresh joint state (nothing sent).

        A hold (the watchdog's) first lets the last command run its course (at most one period: the
        watchdog fires later than that); a stop (``kind="stop"``) holds at once.
        """
        with self.lock:
            space = self._space
            if space is None:
                return
            if kind == "hold":
                self._brake(kind)
            after = self._settled() if kind == "hold" else -math.inf
            reading = self.measure("hold the robot", self.settings.max_state_age, after=after)
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
                self._resync(self.measure("re-sync after homing", self.settings.state_timeout, after=self._settled()))
                self._homed = True
            return
        target = np.asarray(target, dtype=np.float64)
        n = len(self.guard.limits.joint_names)
        gripper = float(target[n]) if target.size > n else (self._gripper or 0.0)
        joint_spaces = [s for s in self.robot.action_spaces if s in _JOINT_SPACES] or ["joint_position"]
        space = self._space if self._space in joint_spaces else joint_spaces[0]   # the robot's own, if unused yet
        stops, deadline = self._stops, time.monotonic() + self.settings.home_timeout
        settle = max(0.5, 5 * self.settings.period)
        while True:
            with self.lock:
                self._interrupted(stops)
                self._brake("home")
                reading = self.measure("home the robot", self.settings.state_timeout, after=self._settled())
                self._resync(reading)
            if self._near(reading, target[:n]):
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


    def _interrupted(self, stops: int) -> None:
        if self._stops != stops:
            raise _fault("homing interrupted by a stop")

    def _step_home(self, target: np.ndarray, gripper: float, space: str, stops: int, deadline: float) -> None:
        """Guarded steps until the reference is at ``target``; then zero velocity (velocity commands)."""
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
        with self.lock:
            self._brake("home")

    def _wait_home(self, target: np.ndarray, until: float) -> JointReading | None:
        """The fresh measured pose, measured after the last command ran its course, once it is within
        tolerance of ``target``; None at ``until``."""
        after = self._settled()
        while True:
            reading = self._read()
            if reading is not None and reading.age <= min(self.settings.max_state_age, time.monotonic() - after) \
                    and self._near(reading, target):
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
