"""Session reports: figures (PNG at print resolution, SVG and PDF), an HTML page and data exports.

:func:`write_report` turns an :class:`~evalstop_ros.audit.AuditReport` into a directory::

    index.html               the page: audit verdict, session, decisions, letters, savings, figures
    trajectory_<metric>.png  anytime p-value vs the alpha line per comparison (STEP: success gap)
    progress.png             progress per policy (points, violin, mean)
    success.png              success rate per policy with anytime-valid confidence sequences
    letters.png              means with the compact letter display
    savings.png              trials used vs a fixed-N batch evaluation
    *.svg, *.pdf             the same figures as vector graphics (``formats``)
    trials.csv               every trial (columns: :data:`~.exports.TRIAL_COLUMNS`)
    decisions.csv            every comparison x metric (:data:`~.exports.DECISION_COLUMNS`)
    trials.parquet, decisions.parquet   the same, when pyarrow is installed

With episode recordings (``policy_runner``'s ``record_dir``), the page also shows each trial's
videos, linked where they lie (:mod:`.videos`).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from ..audit import AuditReport
from ..stats.intervals import mixture_confidence_sequence
from .exports import write_exports
from .figures import letters_figure, progress_figure, success_figure, trajectory_figure
from .page import PageFigure, write_page
from .savings import savings, savings_figure
from .style import FORMATS, RC, save
from .videos import trial_videos, videos_section

__all__ = ["FORMATS", "ReportError", "ReportFiles", "build_figures", "mixture_confidence_sequence", "write_report"]


class ReportError(ValueError):
    """A report cannot be written as asked (e.g. an unknown figure format)."""


@dataclasses.dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote: the page, the figures the page shows (in page order), the
    data exports, the trial videos the page links (written by the runner, not by the report) and
    the figures in the other formats asked for."""

    page: pathlib.Path
    figures: tuple[pathlib.Path, ...]
    csv: tuple[pathlib.Path, ...]
    videos: tuple[pathlib.Path, ...] = ()
    other_formats: tuple[pathlib.Path, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (paths as strings)."""
        return {"page": str(self.page), "figures": [str(p) for p in self.figures], "csv": [str(p) for p in self.csv],
                "videos": [str(p) for p in self.videos], "other_formats": [str(p) for p in self.other_formats]}


def write_report(report: AuditReport, out_dir: str | os.PathLike[str], formats: Sequence[str] = FORMATS
                 ) -> ReportFiles:
    """Write the report of ``report`` into ``out_dir`` (created if needed; files overwritten).

    :param report: From :func:`evalstop_ros.audit.audit`.
    :param out_dir: The output directory.
    :param formats: Figure formats among :data:`FORMATS`; the page shows the first raster or SVG
        one (PNG by default; a PDF-only report links its figures instead).
    :returns: The :class:`ReportFiles`.
    :raises ReportError: For an unknown or empty ``formats``.
    """
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ReportError(f"figure formats must be among {', '.join(FORMATS)}; found {', '.join(formats) or 'none'}")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shown = next((f for f in formats if f in ("png", "svg")), formats[0])
    shown_paths: list[pathlib.Path] = []
    others: list[pathlib.Path] = []
    page_figures: list[PageFigure] = []
    with matplotlib.rc_context(RC):
        for fig, stem, alt, caption in build_figures(report):
            paths = save(fig, out / stem, formats)
            main = next(p for p in paths if p.suffix == f".{shown}")
            shown_paths.append(main)
            others += [p for p in paths if p is not main]
            page_figures.append(PageFigure(main.name, alt, caption, tuple(p.name for p in paths)))
    runs = trial_videos(report)
    exports = write_exports(report, out)
    page = write_page(report, page_figures, out / "index.html", savings(report), videos_section(report, runs, out),
                      [p.name for p in exports])
    return ReportFiles(page, tuple(shown_paths), tuple(exports), tuple(v for run in runs for v in run.videos),
                       tuple(others))


def build_figures(report: AuditReport) -> list[tuple[Figure, str, str, str]]:
    """Every figure of the report, in page order, in the report's style: ``(figure, file stem,
    alt text, caption)``."""
    with matplotlib.rc_context(RC):
        return _build(report)


def _build(report: AuditReport) -> list[tuple[Figure, str, str, str]]:
    built = [(fig, f"trajectory_{m.name}", f"{m.name} evidence per comparison",
              f"{m.name}: anytime-valid p-value of each comparison against its level alpha (dashed), up to its "
              "stop; a crossing is a decision (dot). STEP panels show the success gap against the table's certain "
              "stop, AdaStop panels the difference of means at its interims.")
             for m in report.config.metrics for fig in [trajectory_figure(report, m.name)]]
    built += [
        (progress_figure(report), "progress", "progress per policy",
         "Progress of every scored trial per policy (all trials, not only those up to a stop): points, a violin "
         "where there are enough distinct values, and the mean."),
        (success_figure(report), "success", "success rate per policy",
         "Running success rate over all of a policy's trials; the band is an anytime-valid confidence sequence, "
         "valid at every trial, including where each test stopped (dots)."),
        (letters_figure(report), "letters", "compact letter display",
         "Mean of the first metric per policy over all its trials, best first, with the compact letter display."),
        (savings_figure(report), "savings", "trials saved",
         "Trials the sequential tests used against a fixed-N batch evaluation at n_max per policy."),
    ]
    return built
