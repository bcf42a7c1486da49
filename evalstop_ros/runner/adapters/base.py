"""The robot interface the runner drives: observe, act, reset to home, stop."""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import numpy as np

from ..guard import CommandLimits

__all__ = ["EpisodeInfo", "Observation", "RobotAdapter", "Score"]


@dataclasses.dataclass(frozen=True)
class Observation:
    """One observation in openpi/DROID terms.

    ``images`` maps the protocol's camera names without the ``observation/`` prefix
    (``exterior_image_1_left``, ``exterior_image_2_left``, ``wrist_image_left``, and ``..._right``
    for stereo) to (H, W, 3) uint8 frames; an adapter provides the cameras it has.
    """

    images: dict[str, np.ndarray]
    joint_position: np.ndarray       # (7,)
    cartesian_position: np.ndarray   # (6,)
    gripper_position: np.ndarray     # (1,) in [0, 1], 1 = closed
    #: The same cameras at their own resolution, for the episode's videos only (never sent to the
    #: policy); empty: the videos show ``images``.
    recording: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class EpisodeInfo:
    """What the adapter may know about the rollout it is about to run (never the policy).

    The runner adds what the policy's metadata asks of the robot: ``action_space`` and
    ``image_resolution`` (height, width; None: the robot's own), for robots that set up per
    rollout (a simulator builds its controller and renders at that size).
    """

    session_id: str
    trial_id: int
    task: str
    initial_condition: str
    action_space: str = ""
    image_resolution: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class Score:
    """An adapter's own judgement of a finished rollout (simulated robots only)."""

    success: bool
    progress: float


@runtime_checkable
class RobotAdapter(Protocol):
    """A robot the runner can drive.

    Actions are 7 joint values (positions or velocities, per ``action_space``) plus the gripper
    position in {0, 1} (the runner thresholds it). Every action has passed the command guard
    (:mod:`evalstop_ros.runner.guard`) against ``limits`` first: nothing else calls ``act``.
    """

    #: Action spaces the robot executes ("joint_position", "joint_velocity", "cartesian_velocity").
    action_spaces: tuple[str, ...]
    #: What the robot may be commanded (see :mod:`evalstop_ros.runner.guard` for how to declare it).
    limits: CommandLimits

    # A simulator that keeps its own time sets ``simulated_time = True``: the runner then runs
    # its steps back to back, without wall-clock pacing or deadline (:func:`~..episode.run_episode`).

    def begin(self, episode: EpisodeInfo) -> None:
        """Prepare one rollout (the scene was reset by the operator)."""

    def observe(self) -> Observation:
        """The current observation."""

    def act(self, action: np.ndarray, action_space: str) -> None:
        """Send one (8,) action; returns at once (the runner keeps the rate)."""

    def reset(self) -> None:
        """Move to the home pose (after an episode)."""

    def stop(self) -> None:
        """Hold the current position now (failure, emergency stop). Must be safe to call any time."""

    def score(self) -> Score | None:
        """The rollout's score if the robot can judge it itself (the sim can), else None."""
