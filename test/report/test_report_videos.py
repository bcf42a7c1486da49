"""``evalstop report`` of a session with episode recordings: a ``<video>`` per trial, run and camera.

The session is real (:class:`EvaluationSession`, its journal), and so are its runs: the
project's openpi-protocol server serves a scripted policy, the runner's episode loop drives the
``sim`` arm and records every run (npz + an H.264 mp4 per camera, as ``policy_runner`` does), and
each run's result message names its folder, as ``policy_runner``'s does.  The page is checked as
written and as headless Chromium renders it from a localhost server: every video element has a
relative link to its mp4, and the browser loads each one's metadata (size, duration).
"""

from __future__ import annotations

import html
import json
import pathlib
import re
import shutil
from typing import Any

import imageio_ffmpeg
import pytest

from evalstop_ros.audit import audit
from evalstop_ros.report import ReportFiles, write_report
from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.client import PolicyClient, ServerAddress
from evalstop_ros.runner.episode import EpisodeSettings, run_episode
from evalstop_ros.runner.recorder import EpisodeRecorder, with_recording
from evalstop_ros.runner.server import PolicyServer
from evalstop_ros.session import EvaluationSession, parse_config

CONFIG = {
    "policies": ["bad_vla", "good_vla"],
    "tasks": [{"id": "push_block", "initial_conditions": [{"id": "left", "reset_instructions": "Block left."}]}],
    "metrics": [{"name": "success", "method": "nscore"}],
    "n_max": 20, "seed": 3, "scoring": "auto", "confirm_reset": True,
}
SETTINGS = EpisodeSettings("push the block", rate=500.0, max_steps=20)
CAMERAS = ("exterior_image_1_left", "wrist_image_left")
RECORDED = 3  # trials whose recording is on this machine; the 4th names a folder that is gone


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, ReportFiles]:
    """``<root>/journals/s1.db``, ``<root>/episodes/s1/trial_*``, and the report in ``<root>/report``."""
    root = tmp_path_factory.mktemp("site")
    (root / "journals").mkdir()
    config = parse_config(CONFIG)
    arm = SimArm(seed=5, resolution=(48, 64))
    with PolicyServer("bad") as bad, PolicyServer("good") as good, \
            EvaluationSession.open(root / "journals" / "s1.db", config, "s1", durable=False) as session:
        ports = {"bad_vla": bad.port, "good_vla": good.port}
        session.start()
        for _ in range(RECORDED + 1):
            trial = session.next_trial()
            assert trial is not None
            assert session.confirm_reset(trial.trial_id).applied
            folder = root / "episodes" / "s1" / f"trial_{trial.trial_id:04d}_attempt_{trial.attempt}"
            with PolicyClient(ServerAddress("127.0.0.1", ports[trial.policy_id])) as client:
                result = run_episode(client, arm, EpisodeInfo("s1", trial.trial_id, trial.task, "left"), SETTINGS,
                                     recorder=EpisodeRecorder(folder, fps=15.0))
            assert result.score is not None
            if trial.trial_id > RECORDED:
                shutil.rmtree(folder)
            session.record_runner_result(trial.trial_id, True, 0.1,
                                         with_recording(f"{result.steps} steps, ended by {result.ended_by}", folder),
                                         auto_score=(result.score.success, result.score.progress))
            assert session.submit_score(trial.trial_id, trial.token, result.score.success, result.score.progress,
                                        "auto:run_trial").accepted
    report = audit(root / "journals" / "s1.db")
    assert report.verified, [v.message for v in report.violations]
    return root, write_report(report, root / "report")


def _videos(page: str) -> list[dict[str, str]]:
    """The attributes of every ``<video>`` tag (``tag``: the tag itself)."""
    return [{"tag": tag, **{k: html.unescape(v) for k, v in re.findall(r"([\w-]+)='([^']*)'", tag)}}
            for tag in re.findall(r"<video [^>]*>", page)]


def test_the_page_shows_every_recorded_video_copied_into_the_report(site: tuple[pathlib.Path, ReportFiles]) -> None:
    """The report folder is self-contained: each video is copied into its videos/ folder and linked there."""
    root, files = site
    page = files.page.read_text()
    assert "<h2>Trial videos</h2>" in page
    videos = _videos(page)
    originals = [root / "episodes" / "s1" / f"trial_{t:04d}_attempt_1" / f"{c}.mp4"
                 for t in range(1, RECORDED + 1) for c in CAMERAS]
    assert [v["src"] for v in videos] == [f"videos/{p.parent.name}/{p.name}" for p in originals]
    assert [(int(v["data-trial"]), v["data-camera"]) for v in videos] == \
        [(t, c) for t in range(1, RECORDED + 1) for c in CAMERAS]
    for video, mp4 in zip(videos, originals):
        copy = files.page.parent / video["src"]
        assert copy.resolve().is_relative_to(files.page.parent.resolve()) and copy.read_bytes() == mp4.read_bytes()
        assert " controls " in video["tag"] and video["preload"] == "metadata"
    assert list(files.videos) == [(files.page.parent / v["src"]).resolve() for v in videos]
    assert re.search(r"trial 1 \(label \w, (bad|good)_vla, attempt 1: ran, success=[01] progress=[\d.]+\)", page)
    assert f"episodes/s1/trial_{RECORDED + 1:04d}_attempt_1</code> not found on this machine" in page
    assert "../" not in "".join(v["src"] for v in videos)


HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="page" src="report/index.html" width="1280" height="900"></iframe>
<script>
document.getElementById("page").addEventListener("load", () => {
  const videos = Array.from(document.getElementById("page").contentDocument.querySelectorAll("video"));
  const loaded = videos.map(v => new Promise(done => {
    if (v.readyState >= 1) { done(); return; }
    v.addEventListener("loadedmetadata", done); v.addEventListener("error", done);
  }));
  Promise.all(loaded).then(() => {
    document.getElementById("result").textContent = JSON.stringify(videos.map(v => ({
      src: v.getAttribute("src"), url: v.currentSrc, ready: v.readyState, width: v.videoWidth,
      height: v.videoHeight, duration: v.duration, error: v.error ? v.error.code : 0})));
  });
});
</script></body></html>
"""


@pytest.fixture
def served(site: tuple[pathlib.Path, ReportFiles], serve_directory: Any) -> str:
    """The site (report, journal, episodes, harness) on a localhost HTTP server; its URL."""
    root, _ = site
    (root / "harness.html").write_text(HARNESS)
    return str(serve_directory(root))


def test_chromium_loads_every_trial_video(chromium: Any, served: str, site: tuple[pathlib.Path, ReportFiles],
                                          tmp_path: pathlib.Path) -> None:
    _, files = site
    dom = chromium(tmp_path / "profile", "--virtual-time-budget=20000", "--autoplay-policy=no-user-gesture-required",
                   "--dump-dom", f"{served}/harness.html")
    start, end = dom.stdout.find('<pre id="result">'), dom.stdout.find("</pre>")
    assert start >= 0 and end > start, dom.stdout[-2000:] + dom.stderr[-2000:]
    text = dom.stdout[start + len('<pre id="result">'):end]
    assert text != "pending", "the videos' metadata never loaded:\n" + dom.stderr[-2000:]
    rendered = json.loads(html.unescape(text))
    assert len(rendered) == len(files.videos) == RECORDED * len(CAMERAS)
    for video, mp4 in zip(rendered, files.videos):
        assert video["url"] == f"{served}/report/videos/{mp4.parent.name}/{mp4.name}"
        frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(mp4))
        assert (video["error"], video["ready"] >= 1) == (0, True), video
        assert (video["width"], video["height"]) == (64, 48) and frames > 0
        assert video["duration"] == pytest.approx(seconds, abs=0.15)
