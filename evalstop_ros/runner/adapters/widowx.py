"""``widowx``: a WidowX 250 through the Bridge ``WidowXClient`` (docs/policy_runner.md)."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import numpy as np

from ..errors import RunnerError
from ..guard import CommandLimits
from .base import EpisodeInfo, Observation, Score

__all__ = ["WIDOWX_LIMITS", "WidowXArm"]

_DEG = float(np.pi / 180.0)

#: The WidowX 250 6DOF's published joint limits (Trossen Robotics, "WidowX 250 6DOF
#: specifications", https://docs.trossenrobotics.com/interbotix_xsarms_docs/specifications/wx250s.html:
#: waist +-180 deg, shoulder -108..114, elbow -123..92, forearm roll +-180, wrist angle -100..123,
#: wrist rotate +-180) and the joint speed of Interbotix's wx250s URDF (pi rad/s). The Bridge
#: adapter commands the end effector, so what the guard checks is the workspace box (Bridge's
#: ``widowx_envs`` default ``workspace_boundaries``, x 0.1..0.45 m, y -0.25..0.25 m, z -0.1..0.25
#: m; override with ``workspace`` for another table) and the end-effector speed: at most 0.5 m/s
#: and 2 rad/s (the runner's choice, well under what the arm can do), per action delta.
WIDOWX_LIMITS = CommandLimits(
    ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"),
    position_lower=tuple(d * _DEG for d in (-180.0, -108.0, -123.0, -180.0, -100.0, -180.0)),
    position_upper=tuple(d * _DEG for d in (180.0, 114.0, 92.0, 180.0, 123.0, 180.0)),
    velocity=(float(np.pi),) * 6,
    workspace_lower=(0.1, -0.25, -0.1), workspace_upper=(0.45, 0.25, 0.25),
    linear_speed=0.5, angular_speed=2.0, cartesian_unit="delta",
    source="Trossen WidowX 250 6DOF specifications; Bridge widowx_envs workspace")


class WidowXArm:
    """The ``widowx`` robot adapter (see the module docstring)."""

    action_spaces = ("cartesian_velocity",)

    def __init__(self, *, host: str = "localhost", port: int = 5556,
                 module: str = "widowx_envs.widowx_env_service", env_params: dict[str, Any] | None = None,
                 workspace: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None) -> None:
        self.limits = WIDOWX_LIMITS
        if workspace is not None:
            try:
                low, high = ((float(v[0]), float(v[1]), float(v[2])) for v in workspace)
                self.limits = dataclasses.replace(WIDOWX_LIMITS, workspace_lower=low, workspace_upper=high,
                                                  source="widowx.workspace")
            except (ValueError, TypeError, IndexError) as err:
                raise RunnerError(f"widowx.workspace: {err}") from err
        try:
            client_class = importlib.import_module(module).WidowXClient
        except ImportError as err:
            raise RunnerError(f"the widowx adapter needs the Bridge WidowXClient ({module}): {err}") from err
        self._client: Any = client_class(host=host, port=port)
        self._client.init(env_params or {})

    def begin(self, episode: EpisodeInfo) -> None:
        pass

    def observe(self) -> Observation:
        raw = self._client.get_observation()
        if raw is None:
            raise RunnerError("the WidowX server returned no observation")
        state = np.asarray(raw["state"], dtype=np.float64)
        return Observation(images={"exterior_image_1_left": np.asarray(raw["full_image"], dtype=np.uint8)},
                           joint_position=np.concatenate([state[:6], [0.0]]),
                           cartesian_position=state[:6], gripper_position=state[6:7])

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """One ``step_action`` (an end-effector delta and the gripper)."""
        self._client.step_action(np.asarray(action, dtype=np.float64))

    def reset(self) -> None:
        """Bridge's own way home (``WidowXClient.reset``)."""
        self._client.reset()

    def score(self) -> Score | None:
        return None
