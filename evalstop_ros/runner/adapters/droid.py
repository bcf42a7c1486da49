"""``droid``: a DROID station (Franka + Robotiq, ZED cameras) through DROID's ``RobotEnv``.

``droid.robot_env.RobotEnv`` is imported when the adapter is built (only on a DROID station).
As in RoboArena's evaluation client, the environment is built with the policy server's action
space (``joint_position`` or ``joint_velocity``) and ``gripper_action_space="position"``; one
environment per action space is kept. Cameras are mapped from DROID's image keys (a ZED serial
plus ``_left`` / ``_right``) to the protocol's names by ``cameras``
(``{"<serial>_left": "exterior_image_1_left", ...}``); DROID frames are BGR(A) and are converted
to RGB.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..errors import RunnerError
from .base import EpisodeInfo, Observation, Score

__all__ = ["CAMERA_NAMES", "DroidArm", "parse_cameras"]

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

    def __init__(self, *, cameras: dict[str, str] | None = None, module: str = "droid.robot_env") -> None:
        try:
            self._env_class: Any = importlib.import_module(module).RobotEnv
        except ImportError as err:
            raise RunnerError(f"the droid adapter needs DROID's RobotEnv ({module}): {err}") from err
        self.cameras = dict(cameras or {})
        self._envs: dict[str, Any] = {}
        self._space = "joint_velocity"
        self._last: dict[str, Any] = {}

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
        self._last = state
        return Observation(images=images,
                           joint_position=np.asarray(state["joint_positions"], dtype=np.float64),
                           cartesian_position=np.asarray(state["cartesian_position"], dtype=np.float64),
                           gripper_position=np.atleast_1d(np.asarray(state["gripper_position"], dtype=np.float64)))

    def act(self, action: np.ndarray, action_space: str) -> None:
        self._env(action_space).step(np.asarray(action, dtype=np.float64))

    def reset(self) -> None:
        self._env(self._space).reset()

    def stop(self) -> None:
        """Hold: zero joint velocity (or the last joint position), gripper unchanged."""
        if not self._envs:
            return
        gripper = float(np.atleast_1d(self._last.get("gripper_position", [0.0]))[0])
        if self._space == "joint_velocity" or "joint_positions" not in self._last:
            hold = np.zeros(8)
            env = self._env("joint_velocity")
        else:
            hold = np.asarray(self._last["joint_positions"], dtype=np.float64)
            env = self._env("joint_position")
        hold = np.concatenate([hold[:7], [gripper]])
        env.step(hold)

    def score(self) -> Score | None:
        return None
