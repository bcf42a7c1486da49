"""One rollout: build the observation the server asks for, run action chunks open-loop at a fixed rate.

As RoboArena's evaluation client (seed ``001_*`` §4.1): a new chunk is queried only when the
previous one is used up, every action of a chunk runs open-loop, the gripper command is
thresholded at 0.5 to {0, 1}, joint velocities are clipped to [-1, 1], and the loop runs at
15 Hz up to ``max_steps``. Steps follow an absolute schedule (step ``k`` starts at ``t0 + k /
rate``), so a slow step does not shift the ones after it. Any failure stops the robot (hold
position) before :class:`~.errors.RunnerError` propagates; a finished rollout sends the robot
home and the policy server its ``reset``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .adapters.base import EpisodeInfo, Observation, RobotAdapter, Score
from .client import ACTION_DIMS, ServerConfig
from .errors import RunnerError
from .recorder import EpisodeRecorder

__all__ = ["EpisodeControl", "EpisodeResult", "EpisodeSettings", "Progress", "build_request", "postprocess", "resize_with_pad",
           "run_episode"]


class ChunkSource(Protocol):
    """What the episode needs from a policy client (:class:`~.client.PolicyClient`)."""

    config: ServerConfig
    last_latency: float

    def action_chunk(self, observation: dict[str, Any], action_dim: int) -> np.ndarray: ...

    def reset(self, session_id: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class EpisodeSettings:
    """Loop settings: ``rate`` (Hz), ``max_steps``, ``timeout`` (s of wall time), the task ``prompt``."""

    prompt: str
    rate: float = 15.0
    max_steps: int = 400
    timeout: float = 120.0
    gripper_threshold: float = 0.5
    max_joint_velocity: float = 1.0


@dataclasses.dataclass(frozen=True)
class Progress:
    """Feedback after a step: ``step`` of ``max_steps``, ``elapsed`` s, last inference latency (s)."""

    step: int
    max_steps: int
    elapsed: float
    latency: float


@dataclasses.dataclass
class EpisodeResult:
    """A finished rollout; ``ended_by`` is "max_steps", "operator" (early end), "task_done" (the robot
    detected the task done, :meth:`~.adapters.sim.SimArm.task_done`) or "timeout"."""

    steps: int
    duration: float
    ended_by: str
    score: Score | None
    latencies: list[float] = dataclasses.field(default_factory=list)
    step_starts: list[float] = dataclasses.field(default_factory=list)
    #: Per step: the runner's own time (s), i.e. without the policy query and the robot's observe / act.
    overheads: list[float] = dataclasses.field(default_factory=list)
    reset_error: str = ""


class EpisodeControl:
    """Ends a rollout from another thread: :meth:`finish` (operator: task done, counts as run) or
    :meth:`abort` (emergency stop, cancel: the robot holds at once and the rollout fails).

    ``abort`` stops the robot under the same lock the loop holds around ``act``, so no action
    reaches the robot after it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.abort_reason = ""
        self._wake = threading.Event()

    def finish(self) -> None:
        self.finished.set()
        self._wake.set()

    def abort(self, reason: str, robot: RobotAdapter) -> None:
        with self.lock:
            self.abort_reason = self.abort_reason or reason
            self._wake.set()
            robot.stop()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` or until :meth:`finish` / :meth:`abort`."""
        if seconds > 0:
            self._wake.wait(seconds)


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize keeping the aspect ratio, zero-padded to (height, width) (openpi's layout).

    >>> resize_with_pad(np.ones((4, 8, 3), np.uint8), 4, 4)[:, :, 0].tolist()
    [[0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]
    """
    rows, cols = image.shape[:2]
    if (rows, cols) == (height, width):
        return image
    scale = min(height / rows, width / cols)
    new_h, new_w = max(1, int(rows * scale)), max(1, int(cols * scale))
    r = np.minimum((np.arange(new_h) + 0.5) / scale, rows - 1).astype(int)
    c = np.minimum((np.arange(new_w) + 0.5) / scale, cols - 1).astype(int)
    out = np.zeros((height, width, *image.shape[2:]), dtype=image.dtype)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    out[top:top + new_h, left:left + new_w] = image[r][:, c]
    return out


def _camera_names(config: ServerConfig) -> list[str]:
    names = [f"exterior_image_{i}_left" for i in range(1, config.n_external_cameras + 1)]
    names += ["wrist_image_left"] if config.needs_wrist_camera else []
    if config.needs_stereo_camera:
        names += [n.replace("_left", "_right") for n in names]
    return names


def build_request(obs: Observation, config: ServerConfig, prompt: str, session_id: str) -> dict[str, Any]:
    """The observation map the server asked for in its metadata (RoboArena's request keys)."""
    request: dict[str, Any] = {
        "observation/joint_position": np.asarray(obs.joint_position, dtype=np.float64),
        "observation/cartesian_position": np.asarray(obs.cartesian_position, dtype=np.float64),
        "observation/gripper_position": np.asarray(obs.gripper_position, dtype=np.float64),
        "prompt": prompt,
    }
    for name in _camera_names(config):
        if name not in obs.images:
            raise RunnerError(f"the policy server needs camera {name!r}, which this robot does not provide")
        image = obs.images[name]
        if config.image_resolution is not None:
            image = resize_with_pad(image, *config.image_resolution)
        request[f"observation/{name}"] = np.ascontiguousarray(image, dtype=np.uint8)
    if config.needs_session_id:
        request["session_id"] = session_id
    return request


def postprocess(action: np.ndarray, action_space: str, settings: EpisodeSettings) -> np.ndarray:
    """Gripper thresholded to {0, 1}; joint velocities clipped to +-``max_joint_velocity``.

    >>> postprocess(np.array([2.0, -3, 0, 0, 0, 0, 0.5, 0.6]), "joint_velocity", EpisodeSettings("p")).tolist()
    [1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0]
    """
    out = np.array(action, dtype=np.float64)
    out[-1] = 1.0 if out[-1] > settings.gripper_threshold else 0.0
    if action_space == "joint_velocity":
        out[:-1] = np.clip(out[:-1], -settings.max_joint_velocity, settings.max_joint_velocity)
    return out


def _never() -> bool:
    return False


def run_episode(client: ChunkSource, robot: RobotAdapter, episode: EpisodeInfo, settings: EpisodeSettings, *,
                control: EpisodeControl | None = None, on_step: Callable[[Progress], None] | None = None,
                policy_session: str = "", recorder: EpisodeRecorder | None = None) -> EpisodeResult:
    """Run one rollout of ``client``'s policy on ``robot``; see the module docstring.

    :param control: Ends the rollout early from another thread (operator, emergency stop).
    :param on_step: Called after every step (feedback).
    :param policy_session: ``session_id`` sent to servers that ask for one, and to ``reset``.
    :param recorder: Records the episode (written when the episode ends, failed or not).

    The rollout ends after ``max_steps``, at ``timeout``, when ``control`` finishes it (the operator's
    "task done"), or when a robot with a ``task_done()`` method (optional; the simulated arm has one)
    says the task is done after a step.
    :raises RunnerError: on any failure, after ``robot.stop()``.
    """
    config = client.config
    if config.action_space not in robot.action_spaces:
        raise RunnerError(f"the robot cannot execute action space {config.action_space!r}")
    control = control or EpisodeControl()
    result = EpisodeResult(0, 0.0, "max_steps", None)
    chunk: list[np.ndarray] = []
    period = 1.0 / settings.rate
    try:
        robot.begin(episode)
        start = time.monotonic()
        for step in range(settings.max_steps):
            control.sleep(start + step * period - time.monotonic())
            if control.abort_reason:
                raise RunnerError(control.abort_reason)
            if control.finished.is_set():
                result.ended_by = "operator"
                break
            if time.monotonic() - start > settings.timeout:
                result.ended_by = "timeout"
                break
            began = time.monotonic()
            result.step_starts.append(began - start)
            inference = robot_time = 0.0
            if not chunk:
                tick = time.monotonic()
                observation = robot.observe()
                robot_time += time.monotonic() - tick
                if recorder is not None:
                    recorder.observation(tick - start, observation)
                request = build_request(observation, config, settings.prompt, policy_session)
                chunk = list(client.action_chunk(request, ACTION_DIMS[config.action_space]))
                inference = client.last_latency
                result.latencies.append(inference)
                if recorder is not None:
                    recorder.latency(inference)
            action = postprocess(chunk.pop(0), config.action_space, settings)
            with control.lock:
                if control.abort_reason:
                    raise RunnerError(control.abort_reason)
                tick = time.monotonic()
                robot.act(action, config.action_space)
                robot_time += time.monotonic() - tick
            if recorder is not None:
                recorder.action(tick - start, action)
            result.overheads.append(time.monotonic() - began - inference - robot_time)
            result.steps = step + 1
            if on_step is not None:
                on_step(Progress(result.steps, settings.max_steps, time.monotonic() - start, client.last_latency))
            # a robot that can tell the task is done (the sim arm) ends the rollout there, as an operator would
            if getattr(robot, "task_done", _never)():
                result.ended_by = "task_done"
                break
        result.duration = time.monotonic() - start
        result.score = robot.score()
    except BaseException:
        robot.stop()
        raise
    finally:
        if recorder is not None:
            recorder.close()
    robot.reset()
    try:  # the rollout is over and counts; a server that mishandles reset is only noted
        client.reset(policy_session)
    except RunnerError as err:
        result.reset_error = str(err)
    return result
