"""Scripted policies for the ``robosuite`` Panda: find the cube in the exterior image, grasp it, lift it.

numpy only; kinds ``grasp``, ``sloppy``, ``exact``, ``high``, ``steady``, ``shaky`` and their measured rates:
docs/policy_runner.md, docs/sim_eval.md.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

__all__ = ["CAMERA_FOVY", "CAMERA_POSITION", "CAMERA_ROTATION", "HEIGHT_ERROR", "HESITATION", "KINDS", "METADATA", "GraspPolicy",
           "height_error", "hesitation", "locate_cube"]

#: The metadata frame of the physics policies (RoboArena's PolicyServerConfig keys).
METADATA: dict[str, Any] = {"image_resolution": [96, 96], "needs_wrist_camera": True, "n_external_cameras": 1,
                            "needs_stereo_camera": False, "needs_session_id": True,
                            "action_space": "cartesian_velocity"}

KINDS = ("grasp", "sloppy", "exact", "high", "steady", "shaky")

#: Per kind: (bias, spread) of the grasp-height error in m above the cube's centre (module docstring).
HEIGHT_ERROR = {"grasp": (0.0, 0.003), "sloppy": (0.0, 0.008), "exact": (0.0, 0.0), "high": (0.025, 0.0),
                "steady": (0.0, 0.010), "shaky": (0.0, 0.025)}
#: Per kind: spread (s) of the time the policy holds still before it moves, ``spread * |N(0, 1)|``
#: per rollout (:func:`hesitation`): the same for ``steady`` and ``shaky``, so a task's horizon
#: takes the same share of both policies' successes (docs/sim_eval.md, the benchmark).
HESITATION = {"steady": 1.5, "shaky": 1.5}
_COARSE = ("sloppy", "high")  # kinds that read the cube off a subsampled image with a coarse threshold

#: The exterior camera's calibration: robosuite's ``agentview`` (world position m, camera-to-world
#: rotation whose columns are the camera's x (right), y (up) and z (backward) axes, vertical field
#: of view in degrees), read from the table-top tasks' MuJoCo model.
CAMERA_POSITION = np.array([0.5, 0.0, 1.35])
CAMERA_ROTATION = np.array([[0.0, -0.70614784, 0.70806442], [1.0, 0.0, 0.0], [0.0, 0.70806442, 0.70614784]])
CAMERA_FOVY = 45.0

_CUBE_Z = 0.82         # m: height of the cube's centre on the table (table top 0.80)
_SEEN_Z = 0.83         # m: height of the centroid of the cube's visible faces (top and front)
_HOVER = 0.06          # m above the grasp point while approaching
_LIFT_Z = 1.0          # m: where the cube is carried
_SPEED = 0.3           # m/s: largest end-effector speed commanded
_GAIN = 4.0            # 1/s: proportional gain of the end-effector velocity
_CLOSE_STEPS = 8       # actions spent closing the gripper before lifting
_OPEN, _CLOSE = 0.2, 0.8


def locate_cube(image: np.ndarray, *, stride: int = 1, threshold: float = 2.0) -> np.ndarray | None:
    """World (x, y, z) of the red cube's centre seen in the exterior image, or None if not seen.

    Red pixels (red channel above 60 and ``threshold`` times green and blue), every ``stride``-th
    row and column; their centroid's ray through the camera's calibration meets the plane of the centroid of the
cube's visible faces (top and front, 1 cm above its centre), above the cube's centre.
    """
    pixels = np.asarray(image, dtype=np.float64)[::stride, ::stride]
    red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    mask = (red > 60) & (red > threshold * green) & (red > threshold * blue)
    if mask.sum() < 2:
        return None
    rows, cols = np.nonzero(mask)
    height, width = mask.shape
    focal = 0.5 * height / float(np.tan(np.radians(CAMERA_FOVY) / 2))
    # pixel centre -> camera-frame direction (x right, y up, looking along -z)
    direction = np.array([(cols.mean() + 0.5 - width / 2) / focal, -(rows.mean() + 0.5 - height / 2) / focal, -1.0])
    ray = CAMERA_ROTATION @ direction
    if ray[2] >= 0:
        return None
    seen = CAMERA_POSITION + (_SEEN_Z - CAMERA_POSITION[2]) / ray[2] * ray
    return np.array([seen[0], seen[1], _CUBE_Z])


def height_error(kind: str, session_id: object) -> float:
    """The grasp-height error (m above the cube's centre) of ``kind`` in the rollout ``session_id``.

    ``bias + spread * |z|`` with ``z`` standard normal, seeded by the kind and the rollout's id only
    (:data:`HEIGHT_ERROR`): the same rollout always gets the same error, whatever the policy sees.
    """
    bias, spread = HEIGHT_ERROR[kind]
    seed = [zlib.crc32(kind.encode()), zlib.crc32(str(session_id).encode())]
    return bias + spread * abs(float(np.random.default_rng(seed).standard_normal()))


def hesitation(kind: str, session_id: object) -> float:
    """The time (s) ``kind`` holds still at the start of the rollout ``session_id``: 0 for kinds without one.

    ``spread * |z|`` with ``z`` standard normal (:data:`HESITATION`), seeded by the kind and the
    rollout's id only, independent of its grasp-height error (:func:`height_error`).
    """
    spread = HESITATION.get(kind, 0.0)
    if spread == 0.0:
        return 0.0
    seed = [zlib.crc32(kind.encode()), zlib.crc32(str(session_id).encode()), zlib.crc32(b"hesitation")]
    return spread * abs(float(np.random.default_rng(seed).standard_normal()))


class GraspPolicy:
    """One scripted grasping policy (``kind`` in :data:`KINDS`; see the module docstring).

    ``error``: a fixed grasp-height error (m) instead of the one drawn per rollout (measurements).
    """

    def __init__(self, kind: str = "grasp", *, chunk: int = 4, rate: float = 15.0, error: float | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown physics policy {kind!r} (known: {', '.join(KINDS)})")
        self.kind, self.chunk, self.dt, self.fixed_error = kind, chunk, 1.0 / rate, error
        self.requests = 0
        self._rollout: object = None
        self._cube: np.ndarray | None = None
        self._closing = 0  # actions spent closing the gripper (> 0: grasping)
        self._actions = 0  # actions planned in this rollout
        self.error = self._draw(None)
        self.hold_actions = 0  # actions to hold still before moving (:func:`hesitation`)

    def _draw(self, session_id: object) -> float:
        return height_error(self.kind, session_id) if self.fixed_error is None else self.fixed_error

    def reset(self) -> None:
        self.requests, self._rollout, self._cube, self._closing, self._actions = 0, None, None, 0, 0
        self.error = self._draw(None)
        self.hold_actions = 0

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        if obs.get("endpoint") == "reset":
            self.reset()
            return {}
        if obs.get("session_id") != self._rollout:
            self.reset()
            self._rollout = obs.get("session_id")
            self.error = self._draw(self._rollout)
            self.hold_actions = round(hesitation(self.kind, self._rollout) / self.dt)
        self.requests += 1
        position = np.asarray(obs["observation/cartesian_position"], dtype=np.float64)[:3].copy()
        if self._closing == 0:  # still approaching: (re)locate the cube while it is in view
            sloppy = self.kind in _COARSE
            seen = locate_cube(np.asarray(obs["observation/exterior_image_1_left"]), stride=4 if sloppy else 1,
                               threshold=1.3 if sloppy else 2.0)
            if seen is not None and (self._cube is None or np.linalg.norm(position[:2] - seen[:2]) > 0.03):
                self._cube = seen
        actions = np.zeros((self.chunk, 7))
        for i in range(self.chunk):
            self._actions += 1
            if self._actions <= self.hold_actions:  # hesitating: hold still, open
                actions[i, 6] = _OPEN
                continue
            velocity, gripper = self._control(position)
            actions[i, :3], actions[i, 6] = velocity, gripper
            position = position + velocity * self.dt
        return {"actions": actions.astype(np.float32)}

    def _control(self, position: np.ndarray) -> tuple[np.ndarray, float]:
        """(end-effector velocity, raw gripper command) of one action from the predicted position."""
        if self._cube is None:  # nothing seen: stay
            return np.zeros(3), _OPEN
        grasp = self._cube + np.array([0.0, 0.0, 0.005 + self.error])
        if self._closing:
            self._closing += 1
            target = grasp if self._closing <= _CLOSE_STEPS else np.array([grasp[0], grasp[1], _LIFT_Z])
            return self._towards(position, target), _CLOSE
        offset = grasp - position
        if np.linalg.norm(offset[:2]) > 0.01:  # hover above the cube first
            return self._towards(position, grasp + np.array([0.0, 0.0, _HOVER])), _OPEN
        if offset[2] < -0.01:  # then descend onto it (the fingertips stop on the table)
            return self._towards(position, grasp), _OPEN
        self._closing = 1
        return np.zeros(3), _CLOSE

    @staticmethod
    def _towards(position: np.ndarray, target: np.ndarray) -> np.ndarray:
        velocity = _GAIN * (target - position)
        speed = float(np.linalg.norm(velocity))
        return np.asarray(velocity * (_SPEED / speed) if speed > _SPEED else velocity)
