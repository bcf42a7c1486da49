"""``robosuite``: a simulated Franka Panda in MuJoCo (robosuite 1.5): contacts, objects, grasps, rendering.

Action spaces (each tracks its command: :mod:`.tracking`), limits, cameras, score and simulated
time: docs/policy_runner.md.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import os
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..errors import RunnerError
from .base import EpisodeInfo, JointReading, Observation, Score
from .droid import FRANKA_LIMITS
from .tracking import MovingOrientation, MovingReference, lead_time

_T = TypeVar("_T")

__all__ = ["CAMERAS", "INSTALL_HINT", "PANDA_LIMITS", "RobosuiteArm", "import_robosuite"]

#: The one line a missing extra gives (the adapter is optional).
INSTALL_HINT = ("the robosuite adapter needs robosuite 1.5.2 and MuJoCo < 3.4: run tools/install_physics.sh "
                "(make demo-physics does)")

#: The simulated Panda's limits: Franka's published Panda joint limits (Franka Control Interface
#: documentation, "Robot and interface specifications", frankaemika.github.io/docs/control_parameters.html;
#: the droid adapter's numbers) with joint velocities in rad/s and Cartesian velocities in m/s and
#: rad/s up to the same document's end-effector limits (1.7 m/s translation, 2.5 rad/s rotation).
_LINEAR_SPEED, _ANGULAR_SPEED = 1.7, 2.5
PANDA_LIMITS = dataclasses.replace(
    FRANKA_LIMITS["panda"], velocity_unit=1.0, linear_speed=_LINEAR_SPEED, angular_speed=_ANGULAR_SPEED,
    cartesian_unit="velocity",
    source="Franka FCI docs, Robot and interface specifications: Panda (robosuite's Panda model)")

#: robosuite camera -> protocol camera name (without the ``observation/`` prefix).
CAMERAS = {"agentview": "exterior_image_1_left", "robot0_eye_in_hand": "wrist_image_left"}

_JOINT_SPACES = ("joint_velocity", "joint_position")
_FINGER_TRAVEL = 0.04  # m per Panda finger (open); robot0_gripper_qpos is (left, right)
_KP = 150.0  # robosuite's default stiffness of both controllers (critically damped)
# how far a reference may lie from the measured pose at rest (rad, m, rad; more in motion: .tracking)
_SLACK = {"joint": 0.02, "position": 0.005, "orientation": 0.05}
_JOINT_SPEED = np.array(PANDA_LIMITS.velocity)
_HAND = 0.2  # m: about the distance of the grip site from the wrist's joints


def import_robosuite() -> Any:
    """robosuite, rendering offscreen through EGL; :class:`RunnerError` (:data:`INSTALL_HINT`) if absent."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    try:
        return importlib.import_module("robosuite")
    except ImportError as err:
        raise RunnerError(INSTALL_HINT) from err


def _controller_config(action_space: str) -> dict[str, Any]:
    """The Panda's composite controller for ``action_space``: absolute input (module docstring)."""
    controllers: Any = importlib.import_module("robosuite.controllers")
    config: dict[str, Any] = controllers.load_composite_controller_config(robot="Panda")
    arm = config["body_parts"]["right"]
    if action_space in _JOINT_SPACES:
        config["body_parts"]["right"] = {
            "type": "JOINT_POSITION", "input_type": "absolute", "input_max": 2 * np.pi, "input_min": -2 * np.pi,
            "output_max": 2 * np.pi, "output_min": -2 * np.pi, "kp": _KP, "damping_ratio": 1,
            "impedance_mode": "fixed", "kp_limits": [0, 300], "damping_ratio_limits": [0, 10], "qpos_limits": None,
            "interpolation": None, "ramp_ratio": 0.2, "gripper": arm["gripper"]}
    else:  # a pose in the robot's base frame: position (m) and rotation vector (rad)
        arm.update(input_type="absolute", input_ref_frame="base", kp=_KP, damping_ratio=1, interpolation=None,
                   input_max=10.0, input_min=-10.0, output_max=10.0, output_min=-10.0)
    return config


def _capped(velocity: np.ndarray, speed: float) -> np.ndarray:
    """``velocity`` scaled down to norm ``speed`` if faster."""
    norm = float(np.linalg.norm(velocity))
    return velocity * (speed / norm) if norm > speed else velocity


class RobosuiteArm:
    """The ``robosuite`` robot adapter (see the module docstring).

    :param task: robosuite environment name (``Lift``, ``Stack``, ``PickPlace``, ``Door``, ...).
    :param seed: Seed of the scenes (with session, trial, task and initial condition).
    :param rate: Control rate (Hz): simulated seconds per action are ``1 / rate``.
    :param resolution: (height, width) of the cameras when the policy asks for no resolution.
    :param spread: Half-width (m) of the square the object is placed in, for tasks placed by a
        uniform sampler (Lift, Stack); robosuite's own range when 0 (Lift: 3 cm).
    :param record_resolution: (height, width) at which each observed camera is rendered a second
        time for the episode videos (:attr:`Observation.recording`; the policy's images are
        unchanged); ``None``: the videos show the policy's images.
    :param cameras: The robosuite cameras each observation renders (keys of :data:`CAMERAS`);
        ``None``: all of them. Rendering is most of a rollout's CPU: a policy that reads fewer
        cameras may set this (:attr:`cameras`) to save it.
    """

    action_spaces = ("joint_velocity", "joint_position", "cartesian_velocity")
    limits = PANDA_LIMITS
    #: The simulator keeps time: the runner does not pace this robot by the wall clock.
    simulated_time = True

    def __init__(self, *, task: str = "Lift", seed: int = 0, rate: float = 15.0,
                 resolution: tuple[int, int] = (128, 128), spread: float = 0.0,
                 record_resolution: tuple[int, int] | None = None, cameras: list[str] | None = None) -> None:
        self._suite = import_robosuite()
        if task not in importlib.import_module("robosuite.environments.base").REGISTERED_ENVS:
            raise RunnerError(f"unknown robosuite task {task!r} (e.g. Lift, Stack, PickPlace, Door)")
        self.task, self.seed, self.rate = task, seed, rate
        self.resolution, self.spread = (int(resolution[0]), int(resolution[1])), spread
        #: One action lasts one simulated control period (the command guard's period).
        self.control_period = 1.0 / rate
        self._envs: dict[str, Any] = {}
        self.env: Any = None
        self.action_space = "joint_velocity"
        self._joints: MovingReference | None = None    # the joint action spaces' reference
        self._position: MovingReference | None = None  # cartesian_velocity: the end effector's
        self._orientation: MovingOrientation | None = None
        self._camera_size = self.resolution
        self.record_resolution = None if record_resolution is None else (int(record_resolution[0]),
                                                                          int(record_resolution[1]))
        #: The robosuite cameras each observation renders.
        self.cameras = list(CAMERAS) if cameras is None else list(cameras)
        self.best_progress = 0.0
        #: Control steps the simulation ran in this rollout.
        self.sim_steps = 0
        # MuJoCo's EGL context is current in the thread that made it: every simulator call runs in
        # this one thread (the runner calls the adapter from its executor's threads)
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="robosuite")

    def _in_worker(self, call: Callable[..., _T], *args: Any) -> _T:
        return self._worker.submit(call, *args).result()

    # -- environment ------------------------------------------------------------------------
    def _environment(self, action_space: str) -> Any:
        """The robosuite environment for ``action_space`` (built once: the controller is fixed at build)."""
        kind = "joint" if action_space in _JOINT_SPACES else "cartesian"
        if kind not in self._envs:
            env = self._suite.make(
                self.task, robots="Panda", controller_configs=_controller_config(action_space),
                has_renderer=False, has_offscreen_renderer=True, use_camera_obs=False, use_object_obs=True,
                reward_shaping=True, reward_scale=1.0, control_freq=self.rate, horizon=10**9, hard_reset=False,
                ignore_done=True, seed=self.seed)
            sampler: Any = getattr(env, "placement_initializer", None)
            if self.spread > 0 and hasattr(sampler, "x_range"):
                sampler.x_range = sampler.y_range = (-self.spread, self.spread)
            self._envs[kind] = env
        return self._envs[kind]

    def begin(self, episode: EpisodeInfo) -> None:
        self._in_worker(self._begin, episode)

    def _begin(self, episode: EpisodeInfo) -> None:
        if episode.action_space and episode.action_space not in self.action_spaces:
            raise RunnerError(f"the robosuite Panda cannot execute action space {episode.action_space!r}")
        self.action_space = episode.action_space or self.action_space
        self._camera_size = episode.image_resolution or self.resolution
        self.env = self._environment(self.action_space)
        keys = [self.seed, zlib.crc32(episode.session_id.encode()), episode.trial_id,
                zlib.crc32(episode.task.encode()), zlib.crc32(episode.initial_condition.encode())]
        rng = np.random.default_rng(keys)
        self.env.rng = rng  # robosuite draws the scene (placements, noise) from env.rng
        sampler = getattr(self.env, "placement_initializer", None)
        for each in [sampler, *getattr(sampler, "samplers", {}).values()]:
            if each is not None and hasattr(each, "rng"):
                each.rng = rng
        self.env.reset()
        self.best_progress, self.sim_steps = 0.0, 0
        lead = lead_time(_KP)  # the rollout starts from rest at the measured pose
        self._joints = MovingReference(self._arm_joints(), lead=lead, slack=_SLACK["joint"])
        position, rotation = self._hand_pose()
        self._position = MovingReference(position, lead=lead, slack=_SLACK["position"])
        self._orientation = MovingOrientation(rotation, lead=lead, slack=_SLACK["orientation"])

    # -- robot interface --------------------------------------------------------------------
    def _arm_joints(self) -> np.ndarray:
        robot = self.env.robots[0]
        return np.array(self.env.sim.data.qpos[robot._ref_joint_pos_indexes], dtype=np.float64)

    def _gripper_closed(self) -> float:
        robot = self.env.robots[0]
        fingers = np.abs(self.env.sim.data.qpos[robot._ref_gripper_joint_pos_indexes["right"]])
        return float(np.clip(1.0 - fingers.sum() / (2 * _FINGER_TRAVEL), 0.0, 1.0))

    def render(self, camera: str) -> np.ndarray:
        """One upright (H, W, 3) uint8 frame of robosuite camera ``camera`` at the rollout's resolution."""
        return self._in_worker(self._render, camera)

    def _render(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        height, width = size or self._camera_size
        frame = self.env.sim.render(width=width, height=height, camera_name=camera)
        return np.ascontiguousarray(frame[::-1])  # OpenGL rows run bottom-up

    def observe(self) -> Observation:
        return self._in_worker(self._observe)

    def _observe(self) -> Observation:
        from scipy.spatial.transform import Rotation

        robot = self.env.robots[0]
        site = robot.eef_site_id["right"]
        position = np.array(self.env.sim.data.site_xpos[site])
        euler = Rotation.from_matrix(np.array(self.env.sim.data.site_xmat[site]).reshape(3, 3)).as_euler("xyz")
        shown = {camera: name for camera, name in CAMERAS.items() if camera in self.cameras}
        recording = ({} if self.record_resolution is None else
                     {name: self._render(camera, self.record_resolution) for camera, name in shown.items()})
        return Observation(images={name: self._render(camera) for camera, name in shown.items()},
                           joint_position=self._arm_joints(), cartesian_position=np.concatenate([position, euler]),
                           gripper_position=np.array([self._gripper_closed()]), recording=recording)

    def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
        """One control period of simulated time (whatever ``duration``: the simulator keeps its own)."""
        self._in_worker(self._act, action, action_space)

    def _act(self, action: np.ndarray, action_space: str) -> None:
        values = np.asarray(action, dtype=np.float64)
        gripper = 2.0 * float(values[-1]) - 1.0
        dt = self.control_period
        if action_space in _JOINT_SPACES:
            assert self._joints is not None
            joints = self._arm_joints()
            if action_space == "joint_velocity":
                velocity = values[:7]
            else:  # reach the commanded position by the end of the period
                velocity = (values[:7] - self._joints.position) / dt
            arm = self._joints.advance(np.clip(velocity, -_JOINT_SPEED, _JOINT_SPEED), dt, joints)
        else:
            assert self._position is not None and self._orientation is not None
            position, rotation = self._hand_pose()
            linear = _capped(values[:3], _LINEAR_SPEED)
            angular = _capped(values[3:6], _ANGULAR_SPEED)
            goal = self._orientation.advance(angular, dt, rotation)
            # (turning moves the grip site too: its speed about the wrist counts toward the position's bound)
            speed = float(np.linalg.norm(linear) + _HAND * np.linalg.norm(angular))
            arm = np.concatenate([self._position.advance(linear, dt, position, speed=speed), goal.as_rotvec()])
        self._step(np.concatenate([arm, [gripper]]))

    def _hand_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The end effector's position (m) and rotation matrix in the robot's base frame (the controller's)."""
        robot = self.env.robots[0]
        base_position, base_rotation = robot.composite_controller.get_controller_base_pose("right")
        site = robot.eef_site_id["right"]
        position = base_rotation.T @ (np.asarray(self.env.sim.data.site_xpos[site]) - base_position)
        rotation = base_rotation.T @ np.asarray(self.env.sim.data.site_xmat[site]).reshape(3, 3)
        return position, rotation

    def joint_state(self) -> JointReading | None:
        """The simulated Panda's joints and gripper, now (None before the first rollout)."""
        if self.env is None:
            return None
        return self._in_worker(lambda: JointReading(self._arm_joints(), self._gripper_closed(), 0.0))

    def _step(self, command: np.ndarray) -> None:
        self.env.step(command)
        self.sim_steps += 1
        self.best_progress = max(self.best_progress, float(np.clip(self.env.reward(None), 0.0, 1.0)))

    def reset(self) -> None:
        """Home pose: the next :meth:`begin` resets the scene (robosuite's reset homes the Panda)."""

    def score(self) -> Score:
        return self._in_worker(self._score)

    def _score(self) -> Score:
        success = bool(self.env._check_success())
        return Score(success, 1.0 if success else min(self.best_progress, 0.99))

    def close(self) -> None:
        """Close the simulations and the worker thread."""
        self._in_worker(self._close)
        self._worker.shutdown()

    def _close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
