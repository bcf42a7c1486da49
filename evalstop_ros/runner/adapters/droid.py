"""``droid``: a DROID station (Franka + Robotiq, ZED cameras) through DROID's ``RobotEnv`` (docs/policy_runner.md).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..errors import RunnerError
from ..guard import CommandLimits
from .base import EpisodeInfo, JointReading, Observation, Score

__all__ = ["CAMERA_NAMES", "DROID_VELOCITY_UNIT", "FRANKA_LIMITS", "DroidArm", "parse_cameras"]

#: rad/s of one unit of a DROID ``joint_velocity`` action: DROID's ``RobotIKSolver`` turns a
#: normalised joint velocity into a joint delta of ``max_joint_delta`` = 0.2 rad per step at its
#: ``control_hz`` = 15 (droid/robot_ik/robot_ik_solver.py, droid/robot_env.py), i.e. 3 rad/s.
DROID_VELOCITY_UNIT = 0.2 * 15.0

_PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
_FR3_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))

#: Franka's published joint limits, from the Franka Control Interface documentation, "Robot and
#: interface specifications" (https://frankaemika.github.io/docs/control_parameters.html; the
#: same numbers as libfranka's rate_limiting.h): q_min / q_max (rad), dq_max (rad/s), ddq_max
#: (rad/s^2), for the Panda (Franka Emika Robot, the arm of the original DROID platform) and the
#: FR3 (Franka Research 3, later DROID stations). The gripper command is DROID's normalised
#: position in [0, 1].
FRANKA_LIMITS = {
    "panda": CommandLimits(
        _PANDA_JOINTS,
        position_lower=(-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
        position_upper=(2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
        velocity=(2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100),
        acceleration=(15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
        velocity_unit=DROID_VELOCITY_UNIT,
        source="Franka FCI docs, Robot and interface specifications: Panda"),
    "fr3": CommandLimits(
        _FR3_JOINTS,
        position_lower=(-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
        position_upper=(2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
        velocity=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
        acceleration=(10.0,) * 7,
        velocity_unit=DROID_VELOCITY_UNIT,
        source="Franka FCI docs, Robot and interface specifications: FR3"),
}

#: The protocol's camera names (the observation keys without ``observation/``).
CAMERA_NAMES = ("exterior_image_1_left", "exterior_image_1_right", "exterior_image_2_left", "exterior_image_2_right",
                "wrist_image_left", "wrist_image_right")


def parse_cameras(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The ``droid.cameras`` parameter (``"<DROID image key>=<protocol camera name>"`` per camera) as a map.

    >>> parse_cameras(["24259877_left=exterior_image_1_left", "13062452_left=wrist_image_left"])
    {'24259877_left': 'exterior_image_1_left', '13062452_left': 'wrist_image_left'}

    Raises
    ------
    RunnerError
        For an entry without ``=``, an empty key, an unknown camera name, or a key or name given twice.
    """
    cameras: dict[str, str] = {}
    for pair in pairs:
        key, sep, name = (part.strip() for part in str(pair).partition("="))
        if not sep or not key:
            raise RunnerError(f"droid.cameras: expected '<image key>=<camera name>', found {pair!r}")
        if name not in CAMERA_NAMES:
            raise RunnerError(f"droid.cameras: {name!r} is not a camera of the protocol ({', '.join(CAMERA_NAMES)})")
        if key in cameras or name in cameras.values():
            raise RunnerError(f"droid.cameras: {key!r} or {name!r} is mapped twice")
        cameras[key] = name
    return cameras


class DroidArm:
    """The ``droid`` robot adapter (see the module docstring)."""

    action_spaces = ("joint_position", "joint_velocity")
    #: One action lasts one period of DROID's 15 Hz control loop (``control_hz``), whatever the runner's rate:
    #: a joint-velocity action moves ``DROID_VELOCITY_UNIT / 15`` rad per unit. The guard's period.
    control_period = 1.0 / 15.0

    def __init__(self, *, cameras: dict[str, str] | None = None, module: str = "droid.robot_env",
                 arm: str = "panda") -> None:
        if arm not in FRANKA_LIMITS:
            raise RunnerError(f"droid.arm must be one of {', '.join(FRANKA_LIMITS)}; found {arm!r}")
        self.limits = FRANKA_LIMITS[arm]
        try:
            self._env_class: Any = importlib.import_module(module).RobotEnv
        except ImportError as err:
            raise RunnerError(f"the droid adapter needs DROID's RobotEnv ({module}): {err}") from err
        self.cameras = dict(cameras or {})
        self._envs: dict[str, Any] = {}
        self._space = "joint_velocity"

    def _env(self, space: str) -> Any:
        if space not in self._envs:
            self._envs[space] = self._env_class(action_space=space, gripper_action_space="position")
        self._space = space
        return self._envs[space]

    def begin(self, episode: EpisodeInfo) -> None:
        self._env(self._space)

    def observe(self) -> Observation:
        raw = self._env(self._space).get_observation()
        state = raw["robot_state"]
        images: dict[str, np.ndarray] = {}
        for key, frame in raw.get("image", {}).items():
            name = self.cameras.get(key)
            if name is not None:
                images[name] = np.ascontiguousarray(np.asarray(frame)[..., :3][..., ::-1])
        return Observation(images=images,
                           joint_position=np.asarray(state["joint_positions"], dtype=np.float64),
                           cartesian_position=np.asarray(state["cartesian_position"], dtype=np.float64),
                           gripper_position=np.atleast_1d(np.asarray(state["gripper_position"], dtype=np.float64)))

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """One ``RobotEnv.step`` (DROID's controller runs each action for one of its 15 Hz periods)."""
        self._env(action_space).step(np.asarray(action, dtype=np.float64))

    def joint_state(self) -> JointReading:
        """The arm's joints and gripper, read now (the robot state of ``RobotEnv.get_observation``)."""
        state = self._env(self._space).get_observation()["robot_state"]
        return JointReading(np.asarray(state["joint_positions"], dtype=np.float64),
                            float(np.atleast_1d(state["gripper_position"])[0]), 0.0,
                            np.asarray(state["cartesian_position"], dtype=np.float64))

    def reset(self) -> None:
        """DROID's own way home (``RobotEnv.reset``: blocks until the arm is there)."""
        self._env(self._space).reset()

    def score(self) -> Score | None:
        return None
