"""Session reports: figures (PNG at print resolution, SVG and PDF), an HTML page and data exports.

:func:`write_report` turns an :class:`~evalstop_ros.audit.AuditReport` into a directory; its files
are listed in docs/report.md.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Sequence

from matplotlib.figure import Figure

from ..audit import AuditReport
from ..stats.intervals import mixture_confidence_sequence
from .drawing import Progress, build, draw_figures, figure_specs
from .exports import write_exports
from .page import PageFigure, write_page
from .savings import savings
from .style import FORMATS
from .videos import copy_videos, trial_videos, videos_section

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


def write_report(report: AuditReport, out_dir: str | os.PathLike[str], formats: Sequence[str] = FORMATS, *,
                 progress: Progress | None = None, workers: int | None = None) -> ReportFiles:
    """Write the report of ``report`` into ``out_dir`` (created if needed; files overwritten).

    :param report: From :func:`evalstop_ros.audit.audit`.
    :param out_dir: The output directory.
    :param formats: Figure formats among :data:`FORMATS`; the page shows the first raster or SVG
        one (PNG by default; a PDF-only report links its figures instead).
    :param progress: Receives a line per step (each figure, the page), with the time left.
    :param workers: Processes drawing the figures (:func:`~.drawing.draw_figures`).
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
    drawn = draw_figures(report, out, formats, progress=progress, workers=workers)
    for spec, paths in zip(figure_specs(report), drawn):
        main = next(p for p in paths if p.suffix == f".{shown}")
        shown_paths.append(main)
        others += [p for p in paths if p is not main]
        page_figures.append(PageFigure(main.name, spec.alt, spec.caption, tuple(p.name for p in paths)))
    runs = copy_videos(trial_videos(report), out)  # into the report folder: self-contained
    exports = write_exports(report, out)
    page = write_page(report, page_figures, out / "index.html", savings(report), videos_section(report, runs, out),
                      [p.name for p in exports])
    if progress is not None:
        progress(f"page and data written: {page.name}, {', '.join(p.name for p in exports)}")
    return ReportFiles(page, tuple(shown_paths), tuple(exports), tuple(v for run in runs for v in run.videos),
                       tuple(others))


def build_figures(report: AuditReport) -> list[tuple[Figure, str, str, str]]:
    """Every figure of the report, in page order, in the report's style, laid out:
    ``(figure, file stem, alt text, caption)``."""
    return [(build(spec, report), spec.stem, spec.alt, spec.caption) for spec in figure_specs(report)]
