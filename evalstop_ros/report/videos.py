"""Trial videos: the episode recordings of a session, copied into the report and linked from its page (docs/report.md).
"""

from __future__ import annotations

import dataclasses
import html
import os
import pathlib
import shutil
import urllib.parse
from collections.abc import Sequence

from ..audit import AuditReport
from ..runner.recorder import recording_of

__all__ = ["VIDEOS_DIR", "TrialVideos", "copy_videos", "trial_videos", "videos_section"]

#: The report's folder of the copied videos (``<report>/videos/trial_0001_attempt_1/<camera>.mp4``).
VIDEOS_DIR = "videos"


@dataclasses.dataclass(frozen=True)
class TrialVideos:
    """The recording of one run of a trial.

    ``folder`` is the folder as the run's result named it; ``found`` the folder on this machine
    (``None`` if it is not there); ``videos`` its mp4 files, one per camera, sorted.
    """

    trial_id: int
    attempt: int
    ok: bool
    folder: str
    found: pathlib.Path | None
    videos: tuple[pathlib.Path, ...]


def _locate(folder: str, bases: Sequence[pathlib.Path]) -> pathlib.Path | None:
    path = pathlib.Path(folder).expanduser()
    candidates = [path] if path.is_absolute() else [base / path for base in bases]
    return next((c.resolve() for c in candidates if c.is_dir()), None)


def trial_videos(report: AuditReport) -> list[TrialVideos]:
    """Every recorded run of the session, in journal order (empty for a session without recordings)."""
    source = pathlib.Path(report.record.source)
    bases = [source.parent if source.is_file() else source, source.parent, pathlib.Path.cwd()]
    runs: dict[int, int] = {}
    out = []
    for event in report.record.events:
        if event.kind != "runner_result" or event.trial_id is None:
            continue
        runs[event.trial_id] = runs.get(event.trial_id, 0) + 1
        # the runner's full message (sealed in the journal, restored by the audit with the key)
        folder = recording_of(str(event.payload.get("detail") or event.payload.get("message", "")))
        if folder is None:
            continue
        found = _locate(folder, bases)
        videos = tuple(sorted(found.glob("*.mp4"))) if found is not None else ()
        out.append(TrialVideos(event.trial_id, runs[event.trial_id], bool(event.payload.get("ok")), folder, found,
                               videos))
    return out


def copy_videos(runs: Sequence[TrialVideos], out_dir: pathlib.Path) -> list[TrialVideos]:
    """``runs`` with their videos copied into ``out_dir/videos/trial_<id>_attempt_<n>/`` (the
    copies in ``videos``; a run whose recording is not here keeps nothing to copy)."""
    copied = []
    for run in runs:
        folder = out_dir / VIDEOS_DIR / f"trial_{run.trial_id:04d}_attempt_{run.attempt}"
        videos = []
        for video in run.videos:
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / video.name
            shutil.copyfile(video, target)
            videos.append(target.resolve())
        copied.append(dataclasses.replace(run, videos=tuple(videos)))
    return copied


def _link(path: pathlib.Path, out_dir: pathlib.Path) -> str:
    """``path`` as a URL relative to ``out_dir`` (percent-encoded, ``/`` separators)."""
    relative = os.path.relpath(path, out_dir.resolve())
    return urllib.parse.quote(pathlib.PurePath(relative).as_posix())


def videos_section(report: AuditReport, runs: Sequence[TrialVideos], out_dir: pathlib.Path) -> str:
    """The page's "Trial videos" section ("" without recordings)."""
    if not runs:
        return ""
    e = html.escape
    trials = {t.trial_id: t for t in report.trials}
    parts = ["<h2>Trial videos</h2>",
             "<p>The episode recordings of policy_runner: one video per camera, a frame per control step at the "
             "control rate (real time; each step shows the last observation the policy got), copied into this "
             f"report's <code>{VIDEOS_DIR}/</code> folder.</p>"]
    for run in runs:
        trial = trials.get(run.trial_id)
        if trial is None:
            score = ""
        elif trial.success is None:
            score = ", voided" if trial.voided else ", not scored"
        else:
            score = f", success={int(trial.success)} progress={trial.progress:g}"
        who = f"label {trial.label}, {trial.policy}, " if trial is not None else ""
        title = (f"trial {run.trial_id} ({who}attempt {run.attempt}: {'ran' if run.ok else 'FAILED'}{score})")
        parts.append(f"<div class='trial-videos' id='trial-{run.trial_id}-attempt-{run.attempt}'><h3>{e(title)}</h3>")
        if run.found is None:
            parts.append(f"<p>Recording <code>{e(run.folder)}</code> not found on this machine.</p>")
        elif not run.videos:
            parts.append(f"<p>No video in <code>{e(str(run.found))}</code>.</p>")
        for video in run.videos:
            src = _link(video, out_dir)
            parts.append(
                f"<figure class='video'><video controls preload='metadata' width='320' src='{e(src)}' "
                f"data-trial='{run.trial_id}' data-attempt='{run.attempt}' data-camera='{e(video.stem)}'>"
                f"<a href='{e(src)}'>{e(video.name)}</a></video><figcaption>{e(video.stem)}</figcaption></figure>")
        parts.append("</div>")
    return "\n".join(parts)
