"""Scripted policies for the ``sim`` arm: the "good" and "bad" policies of the tests and demo, and the failure cases.

numpy only (runs in openpi's own server venv); the kinds are listed in docs/policy_runner.md.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .adapters.sim import read_goal

__all__ = ["KINDS", "METADATA", "ScriptedPolicy", "metadata_for"]

#: The metadata frame of the scripted servers (RoboArena's PolicyServerConfig keys).
METADATA: dict[str, Any] = {"image_resolution": [32, 32], "needs_wrist_camera": True, "n_external_cameras": 1,
                            "needs_stereo_camera": False, "needs_session_id": True,
                            "action_space": "joint_velocity"}

KINDS = ("good", "bad", "error", "slow", "wrong_shape", "nan", "stall", "huge", "position", "out_of_limits", "jump",
         "lurch")
_POSITION_KINDS = ("position", "out_of_limits", "jump", "lurch")


def metadata_for(kind: str) -> dict[str, Any]:
    """The metadata frame of scripted policy ``kind`` (:data:`METADATA`, joint positions for the position kinds)."""
    return METADATA | {"action_space": "joint_position"} if kind in _POSITION_KINDS else dict(METADATA)


class ScriptedPolicy:
    """One scripted policy (``kind`` in :data:`KINDS`; the failure kinds act "good" until they fail)."""

    def __init__(self, kind: str = "good", *, chunk: int = 4, dt: float = 1.0 / 15.0, gain: float = 6.0,
                 fail_after: int = 3, delay: float = 5.0, action_dim: int = 8, error_text: str = "scripted policy failure",
                 frame_bytes: int = 300 * 10**6) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown scripted policy {kind!r} (known: {', '.join(KINDS)})")
        self.kind, self.chunk, self.dt, self.gain = kind, chunk, dt, gain
        self.fail_after, self.delay, self.action_dim = fail_after, delay, action_dim
        self.error_text, self.frame_bytes = error_text, frame_bytes
        self.requests = 0

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        if obs.get("endpoint") == "reset":
            self.reset()
            return {}
        self.requests += 1
        failing = self.requests >= self.fail_after
        if self.kind == "error" and failing:
            raise RuntimeError(self.error_text)
        if (self.kind == "slow" and failing) or (self.kind in ("stall", "lurch") and self.requests == self.fail_after):
            time.sleep(self.delay)
        if self.kind == "huge" and failing:
            return {"actions": np.zeros((max(1, self.frame_bytes // 64), 8))}
        image = np.asarray(obs["observation/exterior_image_1_left"])
        joints = np.asarray(obs["observation/joint_position"], dtype=np.float64).copy()
        goal = read_goal(image, columns=4 if self.kind == "bad" else None)
        if self.kind == "bad":
            goal = goal + 0.02
        actions = np.zeros((self.chunk, 8))
        for i in range(self.chunk):
            velocity = np.clip(self.gain * (goal - joints), -1.0, 1.0)
            joints = joints + velocity * self.dt
            actions[i, :7] = velocity
            actions[i, 7] = 0.7 if np.abs(goal - joints).max() < 0.03 else 0.3
        if self.action_dim != 8:  # e.g. 7 = six end-effector deltas + gripper (cartesian_velocity)
            actions = np.concatenate([actions[:, :self.action_dim - 1], actions[:, 7:]], axis=1)
        if self.kind == "wrong_shape" and failing:
            actions = actions[:, :7]
        if self.kind == "nan" and failing:
            actions[:, 2] = np.nan
        if self.kind in _POSITION_KINDS:  # the same motion as position targets
            start = np.asarray(obs["observation/joint_position"], dtype=np.float64)
            actions[:, :7] = start + np.cumsum(actions[:, :7], axis=0) * self.dt
            if self.kind == "out_of_limits" and failing:
                actions[:, 3] = 1e6
            if self.kind in ("jump", "lurch"):
                actions[:, :7] = 1.4 if self.requests % 2 else -1.4
        return {"actions": actions.astype(np.float32)}

    def reset(self) -> None:
        self.requests = 0
