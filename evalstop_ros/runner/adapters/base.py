"""The robot interface the runner drives: observe, act (through the command stream), measured joint state, home."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..guard import CommandLimits

__all__ = ["EpisodeInfo", "JointReading", "Observation", "RobotAdapter", "Score"]


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


class JointReading(NamedTuple):
    """The measured joint state: arm joint positions (rad), the gripper (0 open .. 1 closed), its age (s)."""

    position: np.ndarray
    gripper: float
    age: float
    #: End-effector pose (x y z roll pitch yaw) when the robot measures it with the joints; None: not known.
    cartesian: np.ndarray | None = None


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
    position in {0, 1} (the runner thresholds it). Every command comes from the robot's one
    :class:`~evalstop_ros.runner.stream.CommandStream`, which limits it against ``limits`` first:
    rollout steps, holds, homing and stops alike; nothing else calls ``act``.

    Optional members: ``joint_state()`` (a :class:`JointReading`, or None while none arrived; without it
    the stream measures with ``observe``); ``home`` (joint positions + gripper: the stream homes the arm
    itself, step by guarded step, and waits until the measured pose is there) or else ``reset()`` (the
    robot's own way home, e.g. DROID's ``RobotEnv.reset``, blocking until done); ``control_period``,
    ``simulated_time`` (see :func:`~evalstop_ros.runner.episode.run_episode`).
    """

    #: Action spaces the robot executes ("joint_position", "joint_velocity", "cartesian_velocity").
    action_spaces: tuple[str, ...]
    #: What the robot may be commanded (see :mod:`evalstop_ros.runner.guard` for how to declare it).
    limits: CommandLimits

    def begin(self, episode: EpisodeInfo) -> None:
        """Prepare one rollout (the scene was reset by the operator)."""

    def observe(self) -> Observation:
        """The current observation."""

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """Send one (8,) command, to be executed over ``duration`` s (None: one control period); returns at once."""

    def score(self) -> Score | None:
        """The rollout's score if the robot can judge it itself (the sim can), else None."""
