"""Session reports: PNG figures (matplotlib, Agg), a static HTML page and CSV exports.

:func:`write_report` turns an :class:`~evalstop_ros.audit.AuditReport` into a directory::

    index.html              the page: audit verdict, session, decisions, letters, savings, figures
    trajectory_<metric>.png anytime p-value vs the alpha line per comparison (STEP: success gap)
    progress.png            violin + strip plot of progress per policy
    success.png             success rate per policy with anytime-valid confidence sequences
    letters.png             means with the compact letter display
    savings.png             trials used vs a fixed-N batch evaluation
    trials.csv              every trial
    decisions.csv           every comparison x metric

With episode recordings (``policy_runner``'s ``record_dir``), the page also shows each trial's
videos, linked where they lie (:mod:`.videos`).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

from ..audit import AuditReport
from ..stats.intervals import mixture_confidence_sequence
from .figures import letters_figure, progress_figure, savings, savings_figure, success_figure, trajectory_figure
from .page import write_decisions_csv, write_page, write_trials_csv
from .videos import trial_videos, videos_section

__all__ = ["ReportFiles", "mixture_confidence_sequence", "write_report"]


@dataclasses.dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote: the page, the figures (in page order) and the CSVs, and the
    trial videos the page links (written by the runner, not by the report)."""

    page: pathlib.Path
    figures: tuple[pathlib.Path, ...]
    csv: tuple[pathlib.Path, ...]
    videos: tuple[pathlib.Path, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (paths as strings)."""
        return {"page": str(self.page), "figures": [str(p) for p in self.figures], "csv": [str(p) for p in self.csv],
                "videos": [str(p) for p in self.videos]}


def write_report(report: AuditReport, out_dir: str | os.PathLike[str]) -> ReportFiles:
    """Write the report of ``report`` into ``out_dir`` (created if needed; files overwritten).

    :param report: From :func:`evalstop_ros.audit.audit`.
    :param out_dir: The output directory.
    :returns: The :class:`ReportFiles`.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures: list[tuple[pathlib.Path, str, str]] = []
    for metric in report.config.metrics:
        path = trajectory_figure(report, metric.name, out / f"trajectory_{metric.name}.png")
        figures.append((path, f"{metric.name} evidence per comparison",
                        f"{metric.name}: anytime-valid p-value of each comparison against its level alpha (dashed); "
                        "a crossing is a decision (red dot). STEP panels show the success gap instead."))
    figures.append((progress_figure(report, out / "progress.png"), "progress per policy",
                    "Progress of every scored trial per policy (violin and points) with the mean."))
    figures.append((success_figure(report, out / "success.png"), "success rate per policy",
                    "Running success rate per policy; the band is an anytime-valid confidence sequence, valid at "
                    "every trial and at the stop."))
    figures.append((letters_figure(report, out / "letters.png"), "compact letter display",
                    "Mean of the first metric per policy, best first, with the compact letter display."))
    rows = savings(report)
    figures.append((savings_figure(report, out / "savings.png"), "trials saved",
                    "Trials the sequential tests used against a fixed-N batch evaluation at n_max per policy."))
    runs = trial_videos(report)
    page = write_page(report, [(p.name, alt, caption) for p, alt, caption in figures], out / "index.html", rows,
                      videos_section(report, runs, out))
    csvs = (write_trials_csv(report, out / "trials.csv"), write_decisions_csv(report, out / "decisions.csv"))
    return ReportFiles(page, tuple(p for p, _, _ in figures), csvs, tuple(v for run in runs for v in run.videos))
