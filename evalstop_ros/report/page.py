"""The report's HTML page, rendered from ``templates/report.html.j2``: one self-contained page (no script)."""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from .. import __version__
from ..audit import AuditReport
from ..session.fixed_plan import describe_plan
from ..session.guarantees import family_statement
from .exports import decision_rows
from .ranking import ABRanking, ab_ranking
from .render import num, render
from .savings import Saving

__all__ = ["PageFigure", "decision_cells", "write_page"]


@dataclasses.dataclass(frozen=True)
class PageFigure:
    """A figure on the page: the file shown, its alt text and caption, and every format written."""

    src: str
    alt: str
    caption: str
    files: tuple[str, ...] = ()


def write_page(report: AuditReport, figures: Sequence[PageFigure], path: pathlib.Path,
               savings: Sequence[Saving], videos: str = "", exports: Sequence[str] = ()) -> pathlib.Path:
    """Write ``index.html``.

    :param report: The audit.
    :param figures: The figures, in page order.
    :param path: The page to write.
    :param savings: The rows of :func:`~.savings.savings`.
    :param videos: The "Trial videos" section (:func:`~.videos.videos_section`), if any (HTML).
    :param exports: File names of the data exports (:func:`~.exports.write_exports`).
    :returns: ``path``.
    """
    cfg = report.config
    decisions = [decision_cells(row, cfg.claim) for row in decision_rows(report)]
    ranking = ab_ranking(report)
    saved = [(row.label, row.used, row.fixed, f"{row.saved} ({row.share})") for row in savings]
    text = render(
        "report.html.j2", rec=report.record, cfg=cfg, config_origin=report.config_origin, version=__version__,
        written=datetime.datetime.now(datetime.UTC), verified=report.verified, violations=report.violations,
        statuses_checked=report.statuses_checked,
        metrics=", ".join(f"{m.name}/{m.method} at {m.alpha:g}" for m in cfg.metrics),
        correction=cfg.correction if cfg.design != "adastop" else "AdaStop",
        trials_scored=sum(1 for t in report.trials if t.success is not None), final_state=report.final_state,
        family_statement=family_statement(cfg, len(report.tests)), decision_cells=decisions,
        letters=list(report.letters.items()), savings_cells=saved, figures=figures, videos=Markup(videos),
        ranking=ranking, ranking_cells=_ranking_cells(ranking), plan_text=describe_plan(cfg),
        exports=list(exports) or ["trials.csv", "decisions.csv"], notes=report.notes)
    path.write_text(text, encoding="utf-8")
    return path


def decision_cells(row: dict[str, Any], claim: str) -> list[str]:
    """The cells of one row of the page's decisions table (a ``decisions.csv`` row): comparison,
    test, decision, pairs used, p, e, means A / B, decided at (UTC), reproduced."""
    where = f" @{row['task']}" if row["task"] and row["task"] != "*" else ""
    is_claim = row["task"] == "*"
    comparison = f"{row['policy_a']} vs {row['policy_b']}{where}" + (f" ({claim} claim)" if is_claim else "")
    test = f"{row['metric']}/{row['method']}, {row['alternative']}, alpha {num(row['alpha'], 4)}"
    decision = str(row["decision"])
    if row["stopping_trial"]:
        decision += f" at {'trial' if row['method'] == 'adastop' else 'pair'} {row['stopping_trial']}"
    if is_claim and row["claimed_tasks"]:
        decision += " on " + ", ".join(f"@{t}" for t in str(row["claimed_tasks"]).split())
    decided = str(row["decided_at"] or "-").replace("T", " ").split(".")[0]
    means = f"{num(row['mean_a'], 3)} / {num(row['mean_b'], 3)}"
    return [comparison, test, decision, str(row["n"]), num(row["pvalue"], 4), num(row["evalue"], 3), means, decided,
            "yes" if row["reproduced"] else "NO"]


def _ranking_cells(section: ABRanking | None) -> list[list[str]]:
    if section is None:
        return []
    return [[str(r["rank"]), str(r["policy"]), num(r["score"], 3), num(r["se"], 3),
             "-" if r["low"] is None else f"[{num(r['low'], 3)}, {num(r['high'], 3)}]", str(r["games"]),
             num(r["win_rate"], 3)] for r in section.rows]
