"""``sim``: a simulated 7-joint arm whose success depends on the actions the policy returns (docs/policy_runner.md).
"""

from __future__ import annotations

import zlib

import numpy as np

from ..guard import CommandLimits
from .base import EpisodeInfo, JointReading, Observation, Score

__all__ = ["BANDS", "SIM_POSITION_LIMIT", "SimArm", "read_goal"]

#: The sim arm's joint range (rad, symmetric): goals lie within +-0.8.
SIM_POSITION_LIMIT = 1.5

#: Row bands of the exterior image, one per joint.
BANDS = 7
_OFFSET, _SCALE = 128.0, 100.0


def _band_rows(height: int, band: int) -> slice:
    """Central rows of ``band`` in an image of ``height`` rows (robust to resizing)."""
    centre = (band + 0.5) * height / BANDS
    half = max(height / BANDS / 4.0, 0.5)
    return slice(int(np.floor(centre - half)), max(int(np.ceil(centre + half)), int(np.floor(centre - half)) + 1))


def read_goal(image: np.ndarray, columns: int | None = None) -> np.ndarray:
    """Estimate the goal from an exterior image, averaging the first ``columns`` columns (all: None).

    >>> arm = SimArm(seed=1, noise=(0.0, 0.0)); arm.begin(EpisodeInfo("s", 1, "t", "c"))
    >>> bool(np.allclose(read_goal(arm.observe().images["exterior_image_1_left"]), arm.goal, atol=0.006))
    True
    """
    pixels = np.asarray(image, dtype=np.float64)
    height, width = pixels.shape[:2]
    cols = slice(0, width if columns is None else max(1, min(columns, width)))
    values = [pixels[_band_rows(height, j), cols].mean() for j in range(BANDS)]
    return (np.asarray(values) - _OFFSET) / _SCALE


class SimArm:
    """The ``sim`` robot adapter (see the module docstring).

    :param seed: Seed of the scenes (with session, trial, task and initial condition).
    :param dt: Simulated seconds per action (the runner's nominal period, 1/15 s).
    :param tolerance: Largest joint error (rad) of a success.
    :param noise: Range of the per-rollout pixel noise level (uint8 units).
    :param resolution: (height, width) of the simulated camera frames.
    :param max_velocity: Joint speed limit (rad/s).
    :param end_on_success: :meth:`task_done` ends the rollout at success (False: never; it runs to max_steps).
    """

    action_spaces = ("joint_velocity", "joint_position")

    def __init__(self, *, seed: int = 0, dt: float = 1.0 / 15.0, tolerance: float = 0.05,
                 noise: tuple[float, float] = (5.0, 60.0), resolution: tuple[int, int] = (64, 64),
                 max_velocity: float = 1.0, end_on_success: bool = True) -> None:
        self.seed, self.dt, self.tolerance, self.end_on_success = seed, dt, tolerance, end_on_success
        self.noise_range, self.resolution, self.max_velocity = noise, resolution, max_velocity
        #: The sim's own limits: joints within +-SIM_POSITION_LIMIT rad, max_velocity rad/s, gripper [0, 1].
        self.limits = CommandLimits(tuple(f"joint{j}" for j in range(1, BANDS + 1)),
                                    (-SIM_POSITION_LIMIT,) * BANDS, (SIM_POSITION_LIMIT,) * BANDS,
                                    (max_velocity,) * BANDS, source="the sim arm's own limits")
        #: One action lasts ``dt`` simulated seconds whatever the runner's wall-clock rate: the guard's period.
        self.control_period = dt
        self.goal = np.zeros(BANDS)
        self.joints = np.zeros(BANDS)
        self.gripper = 0.0
        self._start = np.zeros(BANDS)
        self._noise = 0.0
        self._rng = np.random.default_rng(seed)
        self.stopped = False

    def begin(self, episode: EpisodeInfo) -> None:
        keys = [self.seed, zlib.crc32(episode.session_id.encode()), episode.trial_id,
                zlib.crc32(episode.task.encode()), zlib.crc32(episode.initial_condition.encode())]
        self._rng = np.random.default_rng(keys)
        self.goal = self._rng.uniform(-0.8, 0.8, BANDS)
        self._noise = float(self._rng.uniform(*self.noise_range))
        self.joints, self.gripper, self.stopped = np.zeros(BANDS), 0.0, False
        self._start = self.joints.copy()

    def observe(self) -> Observation:
        height, width = self.resolution
        rows = np.arange(height) * BANDS // height
        scene = _OFFSET + _SCALE * self.goal[rows][:, None, None] + self._noise * self._rng.standard_normal(
            (height, width, 3))
        wrist = np.full((height, width, 3), 255.0 * self.gripper)
        return Observation(
            images={"exterior_image_1_left": np.clip(np.rint(scene), 0, 255).astype(np.uint8),
                    "wrist_image_left": wrist.astype(np.uint8)},
            joint_position=self.joints.copy(),
            cartesian_position=np.concatenate([self.joints[:3], np.zeros(3)]),
            gripper_position=np.array([self.gripper]))

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """Integrate one command over ``dt`` simulated seconds (whatever ``duration``: the sim keeps its own
        time). ``stopped`` tells whether it held the arm (no joint motion)."""
        target = np.asarray(action[:BANDS], dtype=np.float64)
        velocity = target if action_space == "joint_velocity" else (target - self.joints) / self.dt
        velocity = np.clip(velocity, -self.max_velocity, self.max_velocity)
        self.stopped = not np.any(velocity)
        self.joints = self.joints + velocity * self.dt
        self.gripper = float(action[BANDS])

    def joint_state(self) -> JointReading:
        """The simulated joints and gripper, exact and current."""
        return JointReading(self.joints.copy(), self.gripper, 0.0, np.concatenate([self.joints[:3], np.zeros(3)]))

    def reset(self) -> None:
        """Home: the simulated scene puts the arm at zero (no command; the next :meth:`begin` does too)."""
        self.joints, self.gripper, self.stopped = np.zeros(BANDS), 0.0, False

    def task_done(self) -> bool:
        """Every joint within ``tolerance`` of the goal with the gripper closed (the success of :meth:`score`),
        with ``end_on_success``: the runner then ends the rollout.

        >>> arm = SimArm(seed=1); arm.begin(EpisodeInfo("s", 1, "t", "c"))
        >>> arm.task_done()
        False
        >>> for _ in range(15): arm.act(np.append(arm.goal, 1.0), "joint_position")  # 1 rad/s: 12 steps at most
        >>> arm.task_done(), arm.score().success
        (True, True)
        """
        return self.end_on_success and self._succeeded()

    def _succeeded(self) -> bool:
        return float(np.abs(self.joints - self.goal).max()) < self.tolerance and self.gripper >= 0.5

    def score(self) -> Score:
        if self._succeeded():
            return Score(True, 1.0)
        error = np.abs(self.joints - self.goal)
        initial = float(np.abs(self._start - self.goal).mean())
        progress = 1.0 - float(error.mean()) / initial if initial > 0 else 0.0
        return Score(False, float(np.clip(progress, 0.0, 0.99)))
