"""Episode recording: what the robot saw and did, per trial, next to the journal (``episode.npz`` and one mp4 per camera).

The layout is in docs/policy_runner.md ("Episode recording").
"""

from __future__ import annotations

import pathlib
import subprocess
from typing import Any

import numpy as np

from .adapters.base import Observation
from .errors import RunnerError

__all__ = ["RECORDED_IN", "EpisodeRecorder", "recording_of", "with_recording"]

#: How a run's result message names its recording folder; the manager journals the message with
#: the trial's ``runner_result`` event, which is how the report finds a trial's videos.
RECORDED_IN = "; recorded in "


def with_recording(message: str, directory: pathlib.Path | str) -> str:
    """``message`` naming the recording folder ``directory``.

    >>> with_recording("30 steps, ended by max_steps", "/data/rec/s1/trial_0001_attempt_1")
    '30 steps, ended by max_steps; recorded in /data/rec/s1/trial_0001_attempt_1'
    """
    return f"{message}{RECORDED_IN}{directory}"


def recording_of(message: str) -> str | None:
    """The recording folder a run's result message names (:func:`with_recording`), or ``None``.

    >>> recording_of("30 steps, ended by max_steps; recorded in /data/rec/s1/trial_0001_attempt_1")
    '/data/rec/s1/trial_0001_attempt_1'
    >>> recording_of("runner timed out") is None
    True
    """
    head, found, folder = str(message).rpartition(RECORDED_IN)
    return folder if found and folder else None


def _frame(obs: Observation, camera: str) -> np.ndarray:
    """The video frame of ``camera``: at the camera's own resolution where the robot gave one."""
    return np.asarray(obs.recording.get(camera, obs.images[camera]))[..., :3]


class EpisodeRecorder:
    """Collects one episode and writes it on :meth:`close`."""

    def __init__(self, directory: pathlib.Path, *, fps: float) -> None:
        self.directory, self.fps = directory, fps
        self._steps: list[tuple[float, np.ndarray]] = []
        self._observations: list[tuple[float, Observation]] = []
        self._latencies: list[float] = []

    def observation(self, t: float, obs: Observation) -> None:
        self._observations.append((t, obs))

    def action(self, t: float, action: np.ndarray) -> None:
        self._steps.append((t, np.array(action, dtype=np.float64)))

    def latency(self, seconds: float) -> None:
        self._latencies.append(seconds)

    def _frame_order(self, camera: str) -> list[int]:
        """The observation shown at each control step: the last one with ``camera`` taken at or
        before the step (the first for steps before any); per observation without steps."""
        seen = [k for k, (_, o) in enumerate(self._observations) if camera in o.images]
        if not self._steps:
            return seen
        times = np.array([self._observations[k][0] for k in seen])
        at = np.searchsorted(times, [t for t, _ in self._steps], side="right") - 1
        return [seen[max(0, int(k))] for k in at]

    def close(self) -> pathlib.Path:
        """Write ``episode.npz`` and the videos; returns the directory."""
        try:
            import imageio_ffmpeg
        except ImportError as err:  # the runner extra installs it
            raise RunnerError("episode recording needs imageio-ffmpeg (pip install 'evalstop[runner]')") from err
        self.directory.mkdir(parents=True, exist_ok=True)
        obs = [o for _, o in self._observations]
        arrays: dict[str, Any] = {
            "step_time": np.array([t for t, _ in self._steps]),
            "actions": np.array([a for _, a in self._steps]) if self._steps else np.zeros((0, 8)),
            "obs_time": np.array([t for t, _ in self._observations]),
            "joint_position": np.array([o.joint_position for o in obs]),
            "cartesian_position": np.array([o.cartesian_position for o in obs]),
            "gripper_position": np.array([o.gripper_position for o in obs]),
            "latency": np.array(self._latencies),
        }
        np.savez_compressed(self.directory / "episode.npz", **arrays)
        ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
        for camera in sorted({name for o in obs for name in o.images}):
            frames = np.stack([_frame(self._observations[k][1], camera)
                               for k in self._frame_order(camera)]).astype(np.uint8)
            height, width = frames.shape[1:3]
            command = [ffmpeg, "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                       "-s", f"{width}x{height}", "-r", f"{self.fps:g}", "-i", "-",
                       "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                       str(self.directory / f"{camera}.mp4")]
            done = subprocess.run(command, input=frames.tobytes(), capture_output=True, check=False)
            if done.returncode != 0:
                raise RunnerError(f"ffmpeg could not write {camera}.mp4: {done.stderr.decode()[-300:]}")
        return self.directory
