"""``widowx``: a WidowX 250 through the Bridge ``WidowXClient`` (``widowx_envs.widowx_env_service``).

The client is imported when the adapter is built (only where the Bridge stack is installed).
Bridge policies (Octo, OpenVLA) act in end-effector deltas: the adapter executes the protocol's
``cartesian_velocity`` action space (6 deltas + gripper, 7 values) with ``step_action``; the
third-person camera (``full_image``) is ``exterior_image_1_left``; ``state`` (x, y, z, roll,
pitch, yaw, gripper) gives the cartesian position and gripper; the arm has no 7-joint reading,
so ``joint_position`` is the state's first six values padded with a zero.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..errors import RunnerError
from .base import EpisodeInfo, Observation, Score

__all__ = ["WidowXArm"]


class WidowXArm:
    """The ``widowx`` robot adapter (see the module docstring)."""

    action_spaces = ("cartesian_velocity",)

    def __init__(self, *, host: str = "localhost", port: int = 5556,
                 module: str = "widowx_envs.widowx_env_service", env_params: dict[str, Any] | None = None) -> None:
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

    def act(self, action: np.ndarray, action_space: str) -> None:
        self._client.step_action(np.asarray(action, dtype=np.float64))

    def reset(self) -> None:
        self._client.reset()

    def stop(self) -> None:
        """Hold: a zero end-effector delta with the gripper where it is."""
        obs = self._client.get_observation()
        gripper = float(obs["state"][6]) if obs is not None else 0.0
        self._client.step_action(np.concatenate([np.zeros(6), [gripper]]))

    def score(self) -> Score | None:
        return None
