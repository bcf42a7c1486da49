"""The report's HTML page, rendered from ``templates/report.html.j2`` (Jinja2, autoescaped).

One self-contained page (inline CSS, no script, images by relative path) so that the output
directory can be zipped, mailed or served as it is; it fits a phone's width (tables scroll
inside their box, figures scale down).
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
from collections.abc import Sequence

from markupsafe import Markup

from .. import __version__
from ..audit import AuditReport
from ..session import SessionConfig
from .exports import decision_rows
from .render import num, render

__all__ = ["PageFigure", "family_statement", "write_page"]


@dataclasses.dataclass(frozen=True)
class PageFigure:
    """A figure on the page: the file shown, its alt text and caption, and every format written."""

    src: str
    alt: str
    caption: str
    files: tuple[str, ...] = ()


def family_statement(config: SessionConfig, tests: int) -> str:
    """What the session's error guarantee is, in one paragraph (seed 003 Sec. V; seed 002 for AdaStop).

    >>> from evalstop_ros.session import parse_config
    >>> c = parse_config({"policies": ["a", "b", "c"], "seed": 1, "tasks": [{"id": "t", "initial_conditions":
    ...     [{"id": "c", "reset_instructions": "r"}]}], "metrics": [{"name": "success"}]})
    >>> family_statement(c, 3).split(":")[0]
    'Family-wise error at most 0.05 over all 3 tests'
    """
    head = f"Family-wise error at most {config.alpha:g} over all {tests} tests"
    if config.design == "adastop":
        return (f"{head}: AdaStop (seed 002) bounds the probability that any of its comparisons declares a "
                "difference that does not exist, across its interims.")
    metrics = "; ".join(f"{m.name} ({m.method}) at {m.alpha:g}" for m in config.metrics)
    how = ("sequential Holm over the comparisons of each metric" if config.correction == "holm"
           else "Bonferroni over the comparisons of each metric")
    tasks = "" if config.claim == "pooled" else (
        f"; claim '{config.claim}': one test per task, the comparison's level shared among the tasks by "
        f"{config.task_correction}")
    return (f"{head}: the probability that any of them claims a difference that does not exist, at any time "
            f"the session could have stopped, is at most {config.alpha:g} (metrics: {metrics}; {how}{tasks}). "
            "Every p-value and decision is anytime-valid: reading them after every trial does not inflate it.")


def write_page(report: AuditReport, figures: Sequence[PageFigure], path: pathlib.Path,
               savings: Sequence[tuple[str, int, int]], videos: str = "", exports: Sequence[str] = ()) -> pathlib.Path:
    """Write ``index.html``.

    :param report: The audit.
    :param figures: The figures, in page order.
    :param path: The page to write.
    :param savings: ``(label, used, fixed)`` rows (:func:`~.figures.savings`).
    :param videos: The "Trial videos" section (:func:`~.videos.videos_section`), if any (HTML).
    :param exports: File names of the data exports (:func:`~.exports.write_exports`).
    :returns: ``path``.
    """
    cfg = report.config
    decisions = []
    for test, row in zip(report.tests, decision_rows(report)):
        where = f" on {test.task}" if test.task else ""
        decided = (row["decided_at"] or "-").replace("T", " ").split(".")[0] + (" UTC" if row["decided_at"] else "")
        decisions.append([
            f"{test.policy_a} vs {test.policy_b}{where}", row["metric"], row["method"], row["alternative"],
            num(row["alpha"], 4), row["decision"], row["stopping_trial"] or "-", row["n"], num(row["pvalue"], 4),
            num(row["evalue"], 3), num(row["mean_a"], 3), num(row["mean_b"], 3), decided,
            "yes" if row["reproduced"] else "NO"])
    saved = [(label.replace("\n", " "), used, fixed, f"{fixed - used} ({(fixed - used) / fixed:.0%})" if fixed else "-")
             for label, used, fixed in savings]
    text = render(
        "report.html.j2", rec=report.record, cfg=cfg, config_origin=report.config_origin, version=__version__,
        written=datetime.datetime.now(datetime.UTC), verified=report.verified, violations=report.violations,
        statuses_checked=report.statuses_checked,
        metrics=", ".join(f"{m.name}/{m.method} at {m.alpha:g}" for m in cfg.metrics),
        correction=cfg.correction if cfg.design != "adastop" else "AdaStop",
        trials_scored=sum(1 for t in report.trials if t.success is not None), final_state=report.final_state,
        family_statement=family_statement(cfg, len(report.tests)), decision_cells=decisions,
        letters=list(report.letters.items()), savings_cells=saved, figures=figures, videos=Markup(videos),
        exports=list(exports) or ["trials.csv", "decisions.csv"], notes=report.notes)
    path.write_text(text, encoding="utf-8")
    return path
