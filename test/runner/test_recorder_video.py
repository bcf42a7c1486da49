"""The episode videos: a frame per control step at the control rate, at the camera's recording resolution."""

from __future__ import annotations

import pathlib
import subprocess

import imageio_ffmpeg
import numpy as np
import pytest

from evalstop_ros.runner.adapters.base import Observation
from evalstop_ros.runner.recorder import EpisodeRecorder


def _observation(shade: int, *, recording: bool) -> Observation:
    small = np.full((32, 32, 3), shade, np.uint8)
    large = {"exterior_image_1_left": np.full((120, 160, 3), shade, np.uint8)} if recording else {}
    return Observation(images={"exterior_image_1_left": small}, joint_position=np.zeros(7),
                       cartesian_position=np.zeros(6), gripper_position=np.zeros(1), recording=large)


@pytest.mark.parametrize(("recording", "size"), [(True, (160, 120)), (False, (32, 32))])
def test_one_frame_per_step_at_the_rate_showing_the_last_observation(tmp_path: pathlib.Path, recording: bool,
                                                                     size: tuple[int, int]) -> None:
    recorder = EpisodeRecorder(tmp_path / "run", fps=10.0)
    for chunk, shade in enumerate((40, 200)):  # two chunks of 5 steps, an observation before each
        recorder.observation(chunk * 0.5, _observation(shade, recording=recording))
        for step in range(5):
            recorder.action(chunk * 0.5 + 0.01 + 0.1 * step, np.zeros(8))
    video = recorder.close() / "exterior_image_1_left.mp4"
    count, seconds = imageio_ffmpeg.count_frames_and_secs(str(video))
    assert count == 10 and seconds == pytest.approx(1.0, abs=0.05)  # 10 control steps at 10 Hz: real time
    raw = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-i", str(video), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    width, height = size
    assert len(raw) == 10 * width * height * 3  # at the recording's resolution where the robot gave one
    frames = np.frombuffer(raw, np.uint8).reshape(10, height, width, 3)
    shades = [int(round(float(f.mean()))) for f in frames]
    assert all(abs(s - 40) < 8 for s in shades[:5]) and all(abs(s - 200) < 8 for s in shades[5:]), shades
