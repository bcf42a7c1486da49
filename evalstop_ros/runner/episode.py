"""One rollout: build the observation the server asks for, run action chunks open-loop at a fixed rate.

As RoboArena's evaluation client (seed 001 §4.1), but every command passes the guard and the one
command stream; the schedule, watchdog and simulated time are in docs/policy_runner.md.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .adapters.base import EpisodeInfo, Observation, RobotAdapter, Score
from .client import ACTION_DIMS, ServerConfig
from .errors import Category, RunnerError
from .recorder import EpisodeRecorder
from .stream import CommandStream, StreamSettings

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
    """Loop settings: ``rate`` (Hz), ``max_steps``, ``timeout`` (s: wall time, or simulated time on a robot that
    keeps its own, module docstring), the task ``prompt``;
    ``guard_mode`` ("refuse" or "clamp", :mod:`.guard`) and ``watchdog_ticks`` (missed ticks before a hold)."""

    prompt: str
    rate: float = 15.0
    max_steps: int = 400
    timeout: float = 120.0
    gripper_threshold: float = 0.5
    max_joint_velocity: float = 1.0
    guard_mode: str = "refuse"
    watchdog_ticks: int = 10


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
    #: Why the policy server's ``reset`` failed or was skipped (may quote the server: private log only).
    reset_error: str = ""
    #: Why the robot did not get home after the rollout (the runner's own text); the next rollout homes first.
    home_error: str = ""
    #: Ticks without an action (waiting for a chunk), watchdog holds, commands the guard rate-limited.
    missed_ticks: int = 0
    holds: int = 0
    limited: int = 0


class EpisodeControl:
    """Ends a rollout from another thread: :meth:`finish` (operator: task done, counts as run) or
    :meth:`abort` (emergency stop, cancel: the robot holds at once and the rollout fails).

    ``abort`` stops the robot (its :class:`~.stream.CommandStream`) under the same lock the loop holds
    around each command, so no action reaches the robot after it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.abort_reason = ""
        self._wake = threading.Event()

    def finish(self) -> None:
        self.finished.set()
        self._wake.set()

    def abort(self, reason: str, stream: CommandStream) -> str:
        """End the rollout and hold the robot; "" or why nothing could be sent (:meth:`CommandStream.stop`)."""
        with self.lock:
            self.abort_reason = self.abort_reason or reason
            self._wake.set()
            return stream.stop()

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
                policy_session: str = "", recorder: EpisodeRecorder | None = None,
                on_event: Callable[[str], None] | None = None, stream: CommandStream | None = None) -> EpisodeResult:
    """Run one rollout of ``client``'s policy on ``robot``; see the module docstring.

    :param control: Ends the rollout early from another thread (operator, emergency stop).
    :param on_step: Called after every step (feedback).
    :param policy_session: ``session_id`` sent to servers that ask for one, and to ``reset``.
    :param recorder: Records the episode (written when the episode ends, failed or not).
    :param on_event: Told what the operator should know mid-rollout (a watchdog hold); no policy text.
    :param stream: The robot's command stream (a runner keeps one for its whole life); None: a new one
        for this rollout, from ``settings``.

    The rollout ends after ``max_steps``, at ``timeout``, when ``control`` finishes it (the operator's
    "task done"), or when a robot with a ``task_done()`` method (optional; the simulated arm has one)
    says the task is done after a step.
    :raises RunnerError: on any failure, after the robot was told to hold.
    """
    config = client.config
    space = config.action_space
    if space not in robot.action_spaces:
        raise RunnerError(f"the robot cannot execute action space {space!r}", category=Category.PROTOCOL)
    if stream is None:
        stream = CommandStream(robot, StreamSettings(period=1.0 / settings.rate, guard_mode=settings.guard_mode))
    elif stream.robot is not robot:
        raise ValueError("the stream drives another robot")
    control = control or EpisodeControl()
    result = EpisodeResult(0, 0.0, "max_steps", None)
    period = 1.0 / settings.rate
    worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="policy-query")
    chunk: collections.deque[np.ndarray] = collections.deque()
    pending: concurrent.futures.Future[np.ndarray] | None = None
    simulated = bool(getattr(robot, "simulated_time", False))  # the robot keeps time (module docstring)
    try:
        # (an adapter may learn its limits here: ros2 from robot_description; a simulator sets up
        # the controller and camera size the policy asks for; a robot not at home is homed first)
        guard = stream.begin(dataclasses.replace(episode, action_space=space, image_resolution=config.image_resolution))
        limited_before = guard.limited
        start = time.monotonic()
        tick, missed = start, 0
        while result.steps < settings.max_steps:
            if not simulated:
                control.sleep(tick - time.monotonic())
            if control.abort_reason:
                raise RunnerError(control.abort_reason, category=_abort_category(control.abort_reason))
            if control.finished.is_set():
                result.ended_by = "operator"
                break
            now = time.monotonic()
            if (result.steps * period if simulated else now - start) > settings.timeout:
                result.ended_by = "timeout"
                break
            if now - tick > period / 4 and not simulated:   # behind schedule: missed ticks are dropped, not made up
                tick = now
            began, inference, robot_time = now, 0.0, 0.0
            if not chunk:
                if pending is None:
                    observation = robot.observe()
                    robot_time += time.monotonic() - now
                    if recorder is not None:
                        recorder.observation(now - start, observation)
                    stream.observed(observation.joint_position, observation.cartesian_position, space)
                    request = build_request(observation, config, settings.prompt, policy_session)
                    pending = worker.submit(client.action_chunk, request, ACTION_DIMS[space])
                waited = time.monotonic()
                concurrent.futures.wait([pending], timeout=None if simulated else max(0.0, tick + period / 4 - waited))
                inference = time.monotonic() - waited
                if pending.done():
                    raw, pending = pending.result(), None   # a RunnerError of the query is raised here
                    result.latencies.append(client.last_latency)
                    if recorder is not None:
                        recorder.latency(client.last_latency)
                    guard.check_finite(raw, space)          # before thresholding hides a NaN gripper
                    processed = np.array([postprocess(a, space, settings) for a in raw])
                    chunk.extend(guard.check_chunk(processed, space))
            if chunk:
                with control.lock:
                    if control.abort_reason:
                        raise RunnerError(control.abort_reason, category=_abort_category(control.abort_reason))
                    sending = time.monotonic()
                    action = stream.step(chunk.popleft(), space)
                    sent = stream.last.time if stream.last is not None else sending
                    robot_time += time.monotonic() - sent
                missed = 0
                if recorder is not None:
                    recorder.action(sent - start, action)
                result.step_starts.append(sent - start)
                result.overheads.append(max(0.0, time.monotonic() - began - inference - robot_time))
                result.steps += 1
                if on_step is not None:
                    on_step(Progress(result.steps, settings.max_steps, time.monotonic() - start, client.last_latency))
                # a robot that can tell the task is done (the sim arm) ends the rollout there, as an operator would
                if getattr(robot, "task_done", _never)():
                    result.ended_by = "task_done"
                    break
            else:
                missed += 1
                result.missed_ticks += 1
                with control.lock:
                    stream.coast()   # a velocity that lasts until the next command slows down meanwhile
                if missed == settings.watchdog_ticks:
                    with control.lock:
                        stream.hold()   # in the command space in use, at the measured pose (re-synced)
                    result.holds += 1
                    if on_event is not None:
                        on_event(f"watchdog: no valid action for {missed} ticks ({missed * period:.2f} s), "
                                 "robot holding position")
            tick += period
        result.duration = time.monotonic() - start
        result.limited = guard.limited - limited_before
        result.score = robot.score()
    except BaseException:
        stream.stop()
        raise
    finally:
        worker.shutdown(wait=False, cancel_futures=True)
        if recorder is not None:
            recorder.close()
    try:  # the rollout is over and counts; homing that fails is noted (the next rollout homes first)
        stream.home()
    except RunnerError as err:
        result.home_error = str(err)
    if pending is not None:  # ended (operator, timeout) while a query ran: the connection is busy, no reset
        result.reset_error = "a policy query was still running at the end of the episode"
        return result
    try:  # a server that mishandles reset is only noted
        client.reset(policy_session)
    except RunnerError as err:
        result.reset_error = str(err)
    return result


def _abort_category(reason: str) -> Category:
    return Category.EMERGENCY_STOP if reason == Category.EMERGENCY_STOP.value else Category.CANCELED
