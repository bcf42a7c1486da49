"""Drawing the report's figures into files: laid out once, saved per format, spread over worker processes (docs/report.md).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pathlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import matplotlib
from matplotlib.figure import Figure

from ..audit import AuditReport
from .figures import letters_figure, progress_figure, success_figure, trajectory_figure
from .savings import savings_figure
from .style import PRINT_DPI, RC, save

__all__ = ["FigureSpec", "draw_figures", "figure_specs"]

#: A progress line's receiver (e.g. ``print`` to stderr).
Progress = Callable[[str], None]


#: What a trajectory panel shows, per method (anytime-valid methods: the ``nscore`` entry).
EVIDENCE = {
    "nscore": "the anytime p-value against its level alpha (dashed), valid at every pair.",
    "step": "STEP's success gap, B minus A, against its boundary at each planned look up to N_max (light bar: a "
            "randomised stop is possible; mark: the certain stop; nothing: no stop is possible at that look).",
    "adastop": "AdaStop's difference of means, B minus A, with its interims (dotted), where alone it decides.",
    "lai": "the running difference of means, B minus A (Lai's boundary defines no p-value; approximately valid up "
           "to N_max).",
}


class FigureSpec(NamedTuple):
    """One figure of the page: file stem, alt text, caption, and how to build it."""

    stem: str
    alt: str
    caption: str
    build: Callable[[AuditReport], Figure]


def figure_specs(report: AuditReport) -> list[FigureSpec]:
    """Every figure of ``report``'s page, in page order."""
    specs = [FigureSpec(f"trajectory_{m.name}", f"{m.name} evidence per comparison",
                        f"{m.name}: each comparison's evidence up to its stop; {EVIDENCE.get(m.method, EVIDENCE['nscore'])}"
                        " The dot is the decision, where it was taken.",
                        functools.partial(trajectory_figure, metric=m.name)) for m in report.config.metrics]
    specs += [
        FigureSpec("progress", "progress per policy",
                   "Progress of every scored trial per policy (all trials, not only those up to a stop): points, a "
                   "violin where there are enough distinct values, and the mean.", progress_figure),
        FigureSpec("success", "success rate per policy",
                   "Running success rate over all of a policy's trials; the band is an anytime-valid confidence "
                   "sequence, valid at every trial, including where each test stopped (dots).", success_figure),
        FigureSpec("letters", "compact letter display",
                   "Mean of the first metric per policy over all its trials, best first, with the compact letter "
                   "display.", letters_figure),
        FigureSpec("savings", "trials saved",
                   "Trials used against the design's own fixed-N plan: per test, per unit of the design (task, A/B "
                   "pair, AdaStop agent) and for the whole session.", savings_figure),
    ]
    return specs


def build(spec: FigureSpec, report: AuditReport) -> Figure:
    """The figure of ``spec``, laid out once at the print resolution and frozen (later saves do
    not lay it out again; text measured at a lower resolution is narrower and would not fit)."""
    with matplotlib.rc_context(RC):
        fig = spec.build(report)
        fig.set_dpi(PRINT_DPI)
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    return fig


# The job the forked workers share: (report, specs, out, formats), set before the pool forks.
_JOB: tuple[AuditReport, Sequence[FigureSpec], pathlib.Path, tuple[str, ...]] | None = None


def _draw(index: int) -> tuple[int, list[pathlib.Path]]:
    assert _JOB is not None
    report, specs, out, formats = _JOB
    with matplotlib.rc_context(RC):
        return index, save(build(specs[index], report), out / specs[index].stem, formats)


def _workers(count: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(cores, count))


def draw_figures(report: AuditReport, out: pathlib.Path, formats: tuple[str, ...], *,
                 progress: Progress | None = None, workers: int | None = None) -> list[list[pathlib.Path]]:
    """Save every figure of :func:`figure_specs` as ``out/<stem>.<format>``; the paths per figure.

    :param workers: Processes (default: one per core, at most one per figure; 1 in a process
        with other threads).
    :param progress: Receives a line per figure written, with the time left.
    """
    global _JOB
    specs = figure_specs(report)
    count = workers or _workers(len(specs))
    started = time.monotonic()
    done: dict[int, list[pathlib.Path]] = {}

    def note(index: int, paths: list[pathlib.Path]) -> None:
        done[index] = paths
        if progress is not None:
            spent = time.monotonic() - started
            left = spent / len(done) * (len(specs) - len(done))
            progress(f"figure {len(done)}/{len(specs)}: {specs[index].stem} ({', '.join(formats)}) "
                     f"after {spent:.1f} s, about {left:.0f} s left")

    _JOB = (report, specs, out, formats)
    try:
        if count <= 1:
            for index in range(len(specs)):
                note(*_draw(index))
        else:
            with multiprocessing.get_context("fork").Pool(count) as pool:
                for index, paths in pool.imap_unordered(_draw, range(len(specs))):
                    note(index, paths)
    finally:
        _JOB = None
    return [done[i] for i in range(len(specs))]
