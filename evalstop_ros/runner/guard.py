"""The command guard: every action a policy returns passes here before it reaches a robot adapter.

An adapter declares a :class:`CommandLimits`; chunks outside them are refused (or clamped), every
tick is rate-limited.  How to declare limits, and what is checked: docs/policy_runner.md, docs/deploying.md.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import numpy as np

from .errors import Category, RunnerError

__all__ = ["GUARD_MODES", "CommandGuard", "CommandLimits", "limits_from_urdf"]

#: ``guard_mode`` values: refuse a chunk with an out-of-limit value, or clamp it into the limits.
GUARD_MODES = ("refuse", "clamp")

_JOINT_SPACES = ("joint_position", "joint_velocity")


def _floats(values: Sequence[float] | None, n: int | None, what: str, positive: bool = False) -> None:
    if values is None:
        return
    if n is not None and len(values) != n:
        raise ValueError(f"{what}: {len(values)} values for {n} joints")
    for v in values:
        if not math.isfinite(v) or (positive and v <= 0):
            raise ValueError(f"{what}: {v!r} is not a finite{' positive' if positive else ''} number")


@dataclasses.dataclass(frozen=True)
class CommandLimits:
    """What a robot may be commanded (see the module docstring); checked on construction (``ValueError``).

    >>> CommandLimits(("a", "b"), (-1.0, -1.0), (1.0, 1.0), (0.5, 0.5)).velocity
    (0.5, 0.5)
    """

    #: Arm joint names, in action order (the gripper is the last action value, not listed here).
    joint_names: tuple[str, ...]
    #: Joint position range (rad); None: the guard cannot check positions (end-effector-only robots).
    position_lower: tuple[float, ...] | None
    position_upper: tuple[float, ...] | None
    #: Largest joint speed (rad/s).
    velocity: tuple[float, ...]
    #: Largest joint acceleration (rad/s^2); None: only the speed is limited.
    acceleration: tuple[float, ...] | None = None
    #: Range of the gripper command the adapter gets (after the runner's 0.5 threshold).
    gripper: tuple[float, float] = (0.0, 1.0)
    #: rad/s of one unit of a ``joint_velocity`` action (1 if actions are in rad/s).
    velocity_unit: float = 1.0
    #: End-effector box (m, x y z in the robot's base frame); None: no box.
    workspace_lower: tuple[float, float, float] | None = None
    workspace_upper: tuple[float, float, float] | None = None
    #: Largest end-effector linear (m/s) and angular (rad/s) speed; None: not limited.
    linear_speed: float | None = None
    angular_speed: float | None = None
    #: ``cartesian_velocity`` actions are "velocity" (m/s, rad/s) or "delta" (m, rad per action).
    cartesian_unit: str = "velocity"
    #: Where the numbers come from (a datasheet, a URDF, parameters).
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        object.__setattr__(self, "joint_names", tuple(str(j) for j in self.joint_names))
        for name in ("position_lower", "position_upper", "velocity", "acceleration", "gripper", "workspace_lower",
                     "workspace_upper"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(float(v) for v in value))
        _floats(self.position_lower, n, "position_lower")
        _floats(self.position_upper, n, "position_upper")
        _floats(self.velocity, n, "velocity", positive=True)
        _floats(self.acceleration, n, "acceleration", positive=True)
        _floats(self.gripper, 2, "gripper")
        _floats((self.velocity_unit,), 1, "velocity_unit", positive=True)
        _floats(self.workspace_lower, 3, "workspace_lower")
        _floats(self.workspace_upper, 3, "workspace_upper")
        for name in ("linear_speed", "angular_speed"):
            if getattr(self, name) is not None:
                _floats((getattr(self, name),), 1, name, positive=True)
        if (self.position_lower is None) != (self.position_upper is None):
            raise ValueError("position_lower and position_upper go together")
        if self.position_lower is not None and self.position_upper is not None and any(
                lo > hi for lo, hi in zip(self.position_lower, self.position_upper)):
            raise ValueError("position_lower above position_upper")
        if self.gripper[0] > self.gripper[1]:
            raise ValueError("gripper range is empty")
        if (self.workspace_lower is None) != (self.workspace_upper is None):
            raise ValueError("workspace_lower and workspace_upper go together")
        if self.workspace_lower is not None and self.workspace_upper is not None and any(
                lo > hi for lo, hi in zip(self.workspace_lower, self.workspace_upper)):
            raise ValueError("workspace_lower above workspace_upper")
        if self.cartesian_unit not in ("velocity", "delta"):
            raise ValueError(f"cartesian_unit must be 'velocity' or 'delta'; found {self.cartesian_unit!r}")

    def describe(self) -> str:
        """One line for the runner's start-up log."""
        parts = [f"{len(self.joint_names)} joints"]
        if self.position_lower is not None:
            parts.append("position ranges")
        parts.append(f"velocity <= {max(self.velocity):g} rad/s")
        if self.acceleration is not None:
            parts.append(f"acceleration <= {max(self.acceleration):g} rad/s^2")
        if self.workspace_lower is not None:
            parts.append("workspace box")
        if self.linear_speed is not None:
            parts.append(f"linear speed <= {self.linear_speed:g} m/s")
        return ", ".join(parts) + (f" ({self.source})" if self.source else "")


def limits_from_urdf(urdf: str, joint_names: Sequence[str], *, gripper: tuple[float, float] = (0.0, 1.0),
                     source: str = "robot_description URDF") -> CommandLimits:
    """Joint limits from the ``<limit lower upper velocity>`` tags of a URDF (``robot_description``).

    Continuous joints (no position range) get +-``inf``... which the guard cannot use: they are
    given +-1e9 rad, i.e. no position check. Raises ``ValueError`` for a joint the URDF lacks or
    without a velocity limit.

    >>> urdf = '<robot name="r"><joint name="j" type="revolute"><limit lower="-1" upper="2" velocity="3" effort="1"/>'
    >>> limits_from_urdf(urdf + '</joint></robot>', ["j"]).position_upper
    (2.0,)
    """

    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as err:
        raise ValueError(f"robot_description is not valid XML: {err}") from err
    joints = {j.get("name"): j for j in root.iter("joint")}
    lower, upper, velocity = [], [], []
    for name in joint_names:
        joint = joints.get(name)
        if joint is None:
            raise ValueError(f"robot_description has no joint {name!r}")
        limit = joint.find("limit")
        if limit is None or limit.get("velocity") is None:
            raise ValueError(f"robot_description: joint {name!r} has no <limit velocity=...>")
        continuous = joint.get("type") == "continuous"
        lower.append(-1e9 if continuous else float(limit.get("lower", "0")))
        upper.append(1e9 if continuous else float(limit.get("upper", "0")))
        velocity.append(float(limit.get("velocity", "0")))
    return CommandLimits(tuple(joint_names), tuple(lower), tuple(upper), tuple(velocity), gripper=gripper,
                         source=source)


def _refuse(detail: str) -> RunnerError:
    return RunnerError(f"command guard: {detail}", category=Category.GUARD, detail=detail)


class CommandGuard:
    """The guard of one robot's command stream (see the module docstring).

    :param limits: The robot's limits.
    :param period: Control period (s): the time one command lasts.
    :param mode: "refuse" (default) or "clamp".
    """

    def __init__(self, limits: CommandLimits, period: float, mode: str = "refuse") -> None:
        if mode not in GUARD_MODES:
            raise ValueError(f"guard mode must be one of {GUARD_MODES}; found {mode!r}")
        if not (math.isfinite(period) and period > 0):
            raise ValueError(f"control period must be > 0 s; found {period!r}")
        self.limits, self.period, self.mode = limits, period, mode
        n = len(limits.joint_names)
        self._lower = np.asarray(limits.position_lower if limits.position_lower is not None else [-np.inf] * n)
        self._upper = np.asarray(limits.position_upper if limits.position_upper is not None else [np.inf] * n)
        self._vmax = np.asarray(limits.velocity, dtype=np.float64)
        self._amax = None if limits.acceleration is None else np.asarray(limits.acceleration, dtype=np.float64)
        self._q = np.zeros(n)         # the reference joint position: the last command (or the observation)
        self._v = np.zeros(n)         # joint velocity of the last command
        self._ee = np.zeros(3)        # the reference end-effector position
        #: Commands whose target the rate limit shortened (for the episode's result).
        self.limited = 0

    # -- state ------------------------------------------------------------------------------
    def start(self, joint_position: np.ndarray, cartesian_position: np.ndarray | None = None) -> None:
        """Re-sync to a measured pose at rest: the reference becomes ``joint_position``, the velocity zero.

        The command stream (:mod:`.stream`) calls it at every transition: the start of an episode, after a
        hold, after homing, after a fault.
        """
        self._q = self._observed(joint_position)
        self._v = np.zeros_like(self._q)
        if cartesian_position is not None:
            self._ee = np.asarray(cartesian_position, dtype=np.float64)[:3].copy()

    def observed(self, joint_position: np.ndarray, cartesian_position: np.ndarray | None = None,
                 action_space: str = "joint_position") -> None:
        """A new observation (a chunk is about to be queried): integrated references re-sync to it.

        Joint-position commands keep their own reference (the last target, so the motion stays smooth);
        velocity commands are integrated, so their reference follows the robot.
        """
        if action_space == "joint_velocity":
            self._q = self._observed(joint_position)
        if cartesian_position is not None:
            self._ee = np.asarray(cartesian_position, dtype=np.float64)[:3].copy()

    def overran(self, seconds: float) -> None:
        """The last (velocity) command lasted ``seconds`` longer than its tick: the reference moves on with it."""
        self._q = self._q + self._v * max(0.0, float(seconds))

    @property
    def reference(self) -> np.ndarray:
        """The joint position the next command is limited against (rad; a copy)."""
        return self._q.copy()

    @property
    def velocity(self) -> np.ndarray:
        """The joint velocity of the last command (rad/s; a copy): zero at rest."""
        return self._v.copy()

    def _observed(self, joint_position: np.ndarray) -> np.ndarray:
        q = np.asarray(joint_position, dtype=np.float64).ravel()[:len(self.limits.joint_names)]
        if q.size != len(self.limits.joint_names) or not np.all(np.isfinite(q)):
            q = np.resize(np.nan_to_num(q), len(self.limits.joint_names))
        return q.copy()

    # -- per chunk --------------------------------------------------------------------------
    def check_finite(self, chunk: np.ndarray, action_space: str) -> None:
        """Refuse a chunk holding a NaN or an infinity (in both modes; before any thresholding hides it)."""
        values = np.asarray(chunk, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            bad = int(np.argwhere(~np.isfinite(values))[0][-1])
            raise _refuse(f"non-finite value for {self._axis_name(bad, action_space)}")

    def check_chunk(self, chunk: np.ndarray, action_space: str) -> np.ndarray:
        """The chunk checked whole: refused (:class:`RunnerError`) or, in clamp mode, clamped copy."""
        chunk = np.array(chunk, dtype=np.float64)
        self.check_finite(chunk, action_space)
        lim = self.limits
        if action_space in _JOINT_SPACES and chunk.shape[1] != len(lim.joint_names) + 1:
            raise RunnerError(f"the robot has {len(lim.joint_names)} joints and a gripper; the action has "
                              f"{chunk.shape[1]} values", category=Category.ROBOT)
        grip = chunk[:, -1]
        if np.any((grip < lim.gripper[0]) | (grip > lim.gripper[1])):
            if self.mode == "refuse":
                raise _refuse(f"gripper outside its range [{lim.gripper[0]:g}, {lim.gripper[1]:g}]")
            chunk[:, -1] = np.clip(grip, *lim.gripper)
        if action_space == "joint_position":
            targets = chunk[:, :-1]
            low, high = targets < self._lower, targets > self._upper
            if np.any(low | high):
                if self.mode == "refuse":
                    j = int(np.argwhere(low | high)[0][1])
                    side, bound = ("below", self._lower[j]) if np.any(low[:, j]) else ("above", self._upper[j])
                    raise _refuse(f"{lim.joint_names[j]} {side} its position limit {bound:.4g} rad")
                chunk[:, :-1] = np.clip(targets, self._lower, self._upper)
        elif action_space == "cartesian_velocity" and lim.workspace_lower is not None:
            self._check_workspace(chunk)
        return chunk

    def _axis_name(self, index: int, action_space: str) -> str:
        if index == (len(self.limits.joint_names) if action_space in _JOINT_SPACES else 6):
            return "the gripper"
        if action_space in _JOINT_SPACES:
            return self.limits.joint_names[index] if index < len(self.limits.joint_names) else f"value {index}"
        return ("x", "y", "z", "roll", "pitch", "yaw")[index] if index < 6 else f"value {index}"

    def _check_workspace(self, chunk: np.ndarray) -> None:
        """Predict the end effector over the chunk (speed-limited); refuse or clamp at the box."""
        assert self.limits.workspace_lower is not None and self.limits.workspace_upper is not None
        low, high = np.asarray(self.limits.workspace_lower), np.asarray(self.limits.workspace_upper)
        position = self._ee.copy()
        for row in chunk:
            step = self._cartesian_step(row[:3], self.limits.linear_speed)
            target = position + step
            outside = (target < low) | (target > high)
            if np.any(outside):
                axis = int(np.argmax(outside))
                if self.mode == "refuse":
                    side, bound = ("below", low[axis]) if target[axis] < low[axis] else ("above", high[axis])
                    raise _refuse(f"end effector {'xyz'[axis]} {side} the workspace limit {bound:.4g} m")
                target = np.clip(target, low, high)
                row[:3] = self._from_step(target - position)
            position = target

    def _cartesian_step(self, values: np.ndarray, speed: float | None, period: float | None = None) -> np.ndarray:
        """Displacement (m or rad) of one action's three values over ``period`` s, scaled down to ``speed``."""
        period = self.period if period is None else period
        step = np.asarray(values, dtype=np.float64) * (period if self.limits.cartesian_unit == "velocity" else 1.0)
        if speed is not None:
            norm, allowed = float(np.linalg.norm(step)), speed * period
            if norm > allowed:
                step = step * (allowed / norm)
        return step

    def _from_step(self, step: np.ndarray, period: float | None = None) -> np.ndarray:
        return step / (self.period if period is None else period) if self.limits.cartesian_unit == "velocity" else step

    # -- per tick ---------------------------------------------------------------------------
    def command(self, action: np.ndarray, action_space: str, period: float | None = None) -> np.ndarray:
        """The rate-limited command of one action of a checked chunk (updates the guard's state).

        :param period: How long this command lasts (s) as the controller executes it: the spacing to the
            previous command when that is shorter than the control period (at most the control period).
        """
        tick = self.period if period is None else min(max(float(period), 1e-6), self.period)
        out = np.array(action, dtype=np.float64)
        if action_space in _JOINT_SPACES:
            n = len(self.limits.joint_names)
            if action_space == "joint_position":
                desired = (out[:n] - self._q) / tick
            else:
                desired = out[:n] * self.limits.velocity_unit
            velocity = self._limit_velocity(desired, out[:n] if action_space == "joint_position" else None, tick)
            if not np.allclose(velocity, desired, rtol=1e-9, atol=1e-12):
                self.limited += 1
            self._q = np.clip(self._q + velocity * tick, self._lower, self._upper)
            self._v = velocity
            out[:n] = self._q if action_space == "joint_position" else velocity / self.limits.velocity_unit
        elif action_space == "cartesian_velocity":
            lin = self._cartesian_step(out[:3], self.limits.linear_speed, tick)
            ang = self._cartesian_step(out[3:6], self.limits.angular_speed, tick)
            if self.limits.workspace_lower is not None and self.limits.workspace_upper is not None:
                lin = np.clip(self._ee + lin, self.limits.workspace_lower, self.limits.workspace_upper) - self._ee
            self._ee = self._ee + lin
            new = np.concatenate([self._from_step(lin, tick), self._from_step(ang, tick)])
            if not np.allclose(new, out[:6], rtol=1e-9, atol=1e-12):
                self.limited += 1
            out[:6] = new
        return out

    def toward(self, target: np.ndarray, gripper: float, action_space: str, period: float | None = None) -> np.ndarray:
        """One tick toward joint positions ``target`` (rate-limited, braking into it), as a command of
        ``action_space``: the position reached, or the joint velocity that reaches it (homing)."""
        n = len(self.limits.joint_names)
        out = self.command(np.append(np.asarray(target, dtype=np.float64)[:n], gripper), "joint_position", period)
        if action_space == "joint_velocity":
            out[:n] = self._v / self.limits.velocity_unit
        return out

    def _limit_velocity(self, desired: np.ndarray, target: np.ndarray | None, period: float) -> np.ndarray:
        """Speed, acceleration and braking limits of one tick of ``period`` s (see the module docstring)."""
        v = np.clip(desired, -self._vmax, self._vmax)
        if target is not None:  # brake into the target (a new target may still be overshot: acceleration wins)
            ahead = target - self._q
            v = np.where(ahead >= 0, np.minimum(v, self._braking(ahead, period)),
                         np.maximum(v, -self._braking(-ahead, period)))
        if self._amax is not None:
            v = np.clip(v, self._v - self._amax * period, self._v + self._amax * period)
        # the position limits win over everything: brake in time to stop at them
        limited: np.ndarray = np.clip(v, -self._braking(self._q - self._lower, period),
                                      self._braking(self._upper - self._q, period))
        return limited

    def _braking(self, distance: np.ndarray, period: float) -> np.ndarray:
        """Largest speed (>= 0) from which the joint still stops within ``distance`` (ticks of ``period`` s)."""
        d = np.maximum(np.asarray(distance, dtype=np.float64), 0.0)
        if self._amax is None:
            return d / period
        a = self._amax
        return np.maximum(np.sqrt(2.0 * a * d) - a * period, np.minimum(d / period, a * period))
