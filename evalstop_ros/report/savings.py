"""Trials saved by stopping early, against the design's own fixed-N plan
(:func:`evalstop_ros.session.fixed_plan.fixed_plan`): per test, per unit of the design (a task,
an A/B pair, an AdaStop agent) and for the whole session; the table and the figure.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from matplotlib.figure import Figure

from ..audit import AuditReport
from ..session.fixed_plan import trials_per_test, trials_used
from .style import wrap

__all__ = ["Saving", "savings", "savings_figure"]


@dataclasses.dataclass(frozen=True)
class Saving:
    """One row: ``used`` trials against the ``fixed`` trials of the fixed-N plan of ``label``."""

    label: str
    used: int
    fixed: int
    kind: str  # "test", "task", "pair", "agent" or "session"

    @property
    def saved(self) -> int:
        """Trials the fixed-N plan would have run beyond those used."""
        return self.fixed - self.used

    @property
    def share(self) -> str:
        """``saved`` as a share of the plan, e.g. ``45%``."""
        return f"{self.saved / self.fixed:.0%}" if self.fixed else "-"


def savings(report: AuditReport) -> list[Saving]:
    """Every row, tests first, the whole session last.

    A test consumed ``n`` pairs, ``2 n`` trials (AdaStop: ``n`` per agent), where its fixed-N plan
    runs ``2 n_max`` (``2 N K``); a unit of the design and the session used their scored trials,
    where the plan runs what :func:`~evalstop_ros.session.fixed_plan.fixed_plan` says.
    """
    per_test = trials_per_test(report.config)
    rows = [Saving(t.label, 2 * t.result.n_observed, per_test, "test") for t in report.tests]
    units = trials_used(report.config, report.trials)
    rows += [Saving(unit.label, used, unit.fixed, unit.kind) for unit, used in units if unit.kind != "session"]
    rows += [Saving(unit.label, used, unit.fixed, unit.kind) for unit, used in units if unit.kind == "session"]
    return rows


def savings_figure(report: AuditReport) -> Figure:
    """Trials used against the design's fixed-N plan, per row of :func:`savings`."""
    rows = savings(report)
    fig = Figure(figsize=(6.5, 0.42 * len(rows) + 1.7), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    fixed = [r.fixed for r in rows]
    ax.barh(y, fixed, color="#D9D9D9", label="fixed-N plan of the design")
    ax.barh(y, [r.used for r in rows], color="#0072B2", height=0.5, label="used by the sequential tests")
    for yi, row in zip(y, rows):
        ax.text(row.fixed, yi, f"  saved {row.saved} ({row.share})", va="center", fontsize=8)
    ax.set_yticks(y, [wrap(r.label, 2.4, 7.5) for r in rows], fontsize=7.5)
    ax.set_xlabel("trials")
    ax.set_xlim(0, max(fixed) * 1.45 if fixed else 1)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_title("Trials saved by stopping early, against the design's fixed-N plan")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig
