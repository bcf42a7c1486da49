"""The report's figures: matplotlib (Agg, no pyplot state), one PNG each.

Every function takes an :class:`~evalstop_ros.audit.AuditReport` (and an output path) and
returns the path it wrote.  Colours: one per policy, stable across figures (tab10 order of the
configuration's policies); the level alpha is always a dashed red line.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: the report is rendered on machines without a display

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..audit import AuditReport, ComparisonAudit
from ..stats.errors import StatsInputError
from ..stats.intervals import mixture_confidence_sequence
from ..stats.sequential import Decision
from ..stats.step import load_table, table_alpha

__all__ = [
    "letters_figure",
    "progress_figure",
    "savings_figure",
    "success_figure",
    "trajectory_figure",
]

DPI = 110
ALPHA_COLOR = "#c0392b"
DECISION_TEXT = {Decision.B_BETTER: "B better", Decision.A_BETTER: "A better",
                 Decision.BUDGET_EXHAUSTED: "budget exhausted", Decision.CONTINUE: "undecided"}


def _colors(report: AuditReport) -> dict[str, str]:
    palette = matplotlib.colormaps["tab10"]
    return {policy: matplotlib.colors.to_hex(palette(i % 10)) for i, policy in enumerate(report.config.policies)}


def _save(fig: Figure, path: pathlib.Path) -> pathlib.Path:
    fig.savefig(path, dpi=DPI, facecolor="white")
    return path


def _grid(count: int, *, width: float = 4.6, height: float = 3.4) -> tuple[Figure, list[Axes]]:
    cols = min(3, max(1, count))
    rows = max(1, math.ceil(count / cols))
    fig = Figure(figsize=(width * cols, height * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for extra in axes[count:]:
        extra.set_visible(False)
    return fig, axes[:count]


def _decision_note(test: ComparisonAudit) -> str:
    res = test.result
    if res.decision in (Decision.A_BETTER, Decision.B_BETTER):
        note = f"{DECISION_TEXT[res.decision]} at pair {res.stopping_trial}"
        step = test.step
        if step is not None and step.draw is not None and step.weight is not None and step.weight < 1:
            note += f"\nrandomized: U={step.draw:.3f} < w={step.weight:.3f}"
        return note
    if res.decision == Decision.BUDGET_EXHAUSTED:
        return f"budget exhausted after {res.n_observed} pairs"
    return f"undecided after {res.n_observed} pairs"


def trajectory_figure(report: AuditReport, metric: str, path: pathlib.Path) -> pathlib.Path:
    """Anytime p-value against the level, per comparison of ``metric`` (STEP: success gap).

    A p-value trajectory crossing the dashed alpha line is a decision (two-sided tests give
    each direction alpha / 2, so the test stops where p <= alpha).  STEP defines no p-value:
    its panels show the running difference of successes, B minus A, and where the randomized
    table stopped.
    """
    tests = [t for t in report.tests if t.metric == metric]
    fig, axes = _grid(len(tests))
    fig.suptitle(f"{metric}: anytime-valid evidence per comparison", fontsize=12)
    for ax, test in zip(axes, tests):
        res = test.result
        n = np.arange(1, res.n_observed + 1)
        how = "no p-value: randomized table" if test.method == "step" else "anytime p-value"
        title = f"{test.policy_a} (A) vs {test.policy_b} (B)\n{test.method} ({how}), alpha {test.alpha:.3g}"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("pairs")
        if np.isfinite(res.pvalues).any():
            p = np.clip(res.pvalues, 1e-12, 1.0)
            ax.plot(n, p, color="#1f4e79", lw=1.6, label="anytime p-value")
            ax.axhline(test.alpha, color=ALPHA_COLOR, ls="--", lw=1.2, label=f"alpha = {test.alpha:.3g}")
            ax.set_yscale("log")
            low = min(float(np.nanmin(p)) if p.size else 1.0, test.alpha) / 3
            ax.set_ylim(max(low, 1e-12), 1.5)
            ax.set_ylabel("p-value (log scale)")
            if res.stopping_trial:
                ax.plot([res.stopping_trial], [p[res.stopping_trial - 1]], "o", color=ALPHA_COLOR, ms=7, zorder=3)
        else:
            _step_panel(ax, test, report.config.n_max)
        if res.n_observed == 0:
            ax.text(0.5, 0.5, "no pairs", ha="center", va="center", transform=ax.transAxes)
        ax.text(0.02, 0.96, _decision_note(test), transform=ax.transAxes, ha="left", va="top", fontsize=9,
                bbox={"boxstyle": "round", "fc": "white", "ec": "#999999"})
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left" if np.isfinite(res.pvalues).any() else "lower right", fontsize=7.5)
    return _save(fig, path)


def _step_panel(ax: Axes, test: ComparisonAudit, n_max: int) -> None:
    """STEP: the success gap B - A and the table's certain-stop boundary (weight 1) at each pair."""
    res = test.result
    n = np.arange(1, res.n_observed + 1)
    gap = np.cumsum(test.values_b - test.values_a)
    ax.step(n, gap, where="post", color="#1f4e79", lw=1.6, label="successes B - A")
    ax.axhline(0, color="#888888", lw=0.8)
    try:
        table = load_table(n_max, table_alpha(test.alpha, test.alternative), synthesize=False)
    except (StatsInputError, FileNotFoundError, OSError):
        table = None
    if table is not None and n.size:
        low = np.minimum(np.cumsum(test.values_a), np.cumsum(test.values_b)).astype(np.int64)
        bound = np.array([table.step_thresholds(int(k))[int(a)] for k, a in zip(n, low)], dtype=np.float64)
        ax.step(n, bound, where="post", color=ALPHA_COLOR, ls="--", lw=1.1, label="stop for sure (B better)")
        if test.alternative != "greater" and gap.min() < 0:
            ax.step(n, -bound, where="post", color=ALPHA_COLOR, ls=":", lw=1.1, label="stop for sure (A better)")
    if res.stopping_trial:
        ax.plot([res.stopping_trial], [gap[res.stopping_trial - 1]], "o", color=ALPHA_COLOR, ms=7, zorder=3)
    top = max(float(gap.max()) if gap.size else 1.0, 1.0)
    ax.set_ylim(min(float(gap.min()) if gap.size else -1.0, -1.0) - 1, top * 1.35 + 1)
    ax.set_ylabel("successes B minus A")


def _scores(report: AuditReport) -> dict[str, list[tuple[bool, float]]]:
    out: dict[str, list[tuple[bool, float]]] = {p: [] for p in report.config.policies}
    for trial in report.trials:
        if trial.success is not None and trial.progress is not None and trial.policy in out:
            out[trial.policy].append((trial.success, trial.progress))
    return out


def progress_figure(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """Violin and strip plot of every effective progress score, per policy."""
    scores = _scores(report)
    colors = _colors(report)
    policies = list(scores)
    fig = Figure(figsize=(max(5.0, 1.5 * len(policies) + 2.5), 4.2), layout="constrained")
    ax = fig.subplots()
    rng = np.random.default_rng(0)  # jitter only: fixed, so the picture is reproducible
    for i, policy in enumerate(policies):
        values = np.array([p for _, p in scores[policy]], dtype=np.float64)
        if values.size >= 2 and np.ptp(values) > 0:
            parts: Any = ax.violinplot([values], positions=[i], widths=0.8, showextrema=False)
            for body in parts["bodies"]:
                body.set_facecolor(colors[policy])
                body.set_alpha(0.25)
        if values.size:
            ax.scatter(i + rng.uniform(-0.18, 0.18, values.size), values, s=10, color=colors[policy], alpha=0.6,
                       edgecolors="none")
            ax.plot([i - 0.3, i + 0.3], [values.mean()] * 2, color="black", lw=2)
            ax.text(i + 0.33, values.mean(), f"mean {values.mean():.2f}", va="center", fontsize=8)
    ax.set_xticks(range(len(policies)), [f"{p}\n(n={len(scores[p])})" for p in policies])
    ax.set_xlim(-0.6, len(policies) - 0.4 + 0.45)
    ax.set_ylim(-0.05, 1.08)
    ax.set_ylabel("progress (1 = task complete)")
    ax.set_title("Progress per policy: every scored trial (violin, points) and the mean (bar)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def success_figure(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """Running success rate per policy (one panel each) with its anytime-valid confidence sequence."""
    scores = _scores(report)
    colors = _colors(report)
    level = report.config.alpha
    policies = list(scores)
    fig, axes = _grid(len(policies), width=4.2, height=3.0)
    fig.suptitle(f"Success rate per policy with its {1 - level:.0%} anytime-valid confidence sequence "
                 "(valid at every trial, including the stop)", fontsize=11)
    for ax, policy in zip(axes, policies):
        values = scores[policy]
        ax.set_title(policy, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("trials of the policy")
        ax.set_ylabel("success rate")
        ax.grid(alpha=0.3)
        if not values:
            ax.text(0.5, 0.5, "no scored trial", ha="center", va="center", transform=ax.transAxes)
            continue
        x = np.array([float(s) for s, _ in values])
        mean, low, high = mixture_confidence_sequence(x, alpha=level, tightest_at=report.config.n_max)
        t = np.arange(1, x.size + 1)
        ax.fill_between(t, low, high, color=colors[policy], alpha=0.25, lw=0, label=f"{1 - level:.0%} band")
        ax.plot(t, mean, color=colors[policy], lw=1.8, label="running rate")
        ax.text(0.98, 0.04, f"{mean[-1]:.2f} [{low[-1]:.2f}, {high[-1]:.2f}] after {x.size}", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=9, bbox={"boxstyle": "round", "fc": "white", "ec": "#999999"})
        ax.legend(fontsize=7.5, loc="upper right")
    return _save(fig, path)


def letters_figure(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """Mean of the first metric per policy, best first, with the compact letter display."""
    metric = report.config.metrics[0].name
    scores = _scores(report)
    colors = _colors(report)
    order = list(report.letters) or list(scores)
    means = [float(np.mean([float(s) if metric == "success" else p for s, p in scores[q]])) if scores[q] else 0.0
             for q in order]
    fig = Figure(figsize=(max(5.0, 1.3 * len(order) + 2.0), 4.0), layout="constrained")
    ax = fig.subplots()
    bars = ax.bar(range(len(order)), means, color=[colors[q] for q in order], alpha=0.8)
    for bar, policy in zip(bars, order):
        letters = report.letters.get(policy, "")
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.02, letters or "-", ha="center",
                va="bottom", fontsize=14, fontweight="bold")
    ax.set_xticks(range(len(order)), order)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(f"mean {metric}")
    ax.set_title("Compact letter display\n(policies sharing a letter were not found different)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def savings(report: AuditReport) -> list[tuple[str, int, int]]:
    """``(label, used, fixed)`` per test and for the session: trials used vs a fixed-N batch.

    A test consumed ``n`` pairs, i.e. ``2 n`` trials, where a batch evaluation fixes
    ``2 n_max``; the session ran its trials where a batch evaluation of every policy at
    ``n_max`` runs ``K n_max``.
    """
    rows = [(f"{t.policy_a} vs {t.policy_b}\n{t.metric}/{t.method}", 2 * t.result.n_observed, 2 * report.config.n_max)
            for t in report.tests]
    used = sum(1 for trial in report.trials if trial.success is not None)
    rows.append(("whole session", used, len(report.config.policies) * report.config.n_max))
    return rows


def savings_figure(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """Trials used by the sequential tests versus a fixed-N batch evaluation at ``n_max``."""
    rows = savings(report)
    fig = Figure(figsize=(8.0, 0.75 * len(rows) + 1.4), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    fixed = [r[2] for r in rows]
    used = [r[1] for r in rows]
    ax.barh(y, fixed, color="#d5d8dc", label="fixed-N batch (n_max per policy)")
    ax.barh(y, used, color="#1f4e79", height=0.5, label="used by the sequential test")
    for yi, (_, u, f) in zip(y, rows):
        saved = f - u
        ax.text(f, yi, f"  saved {saved} ({saved / f:.0%})" if f else "", va="center", fontsize=8.5)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8.5)
    ax.set_xlabel("trials")
    ax.set_xlim(0, max(fixed) * 1.35 if fixed else 1)
    ax.set_title("Trials saved by stopping early", fontsize=11)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def metric_names(report: AuditReport) -> Sequence[str]:
    """The configured metrics, in order."""
    return [m.name for m in report.config.metrics]
