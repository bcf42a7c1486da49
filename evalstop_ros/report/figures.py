"""The report's figures: matplotlib (Agg, no pyplot state), each a :class:`~matplotlib.figure.Figure` at print size (docs/report.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..audit import AuditReport, ComparisonAudit
from ..session.guarantees import short_guarantee
from ..stats.errors import StatsInputError
from ..stats.intervals import mixture_confidence_sequence
from ..stats.sequential import Decision
from ..stats.step import load_table, table_alpha
from .style import ALPHA_COLOR, CURVE_COLOR, policy_colors, wrap

__all__ = [
    "MIN_VIOLIN_DISTINCT",
    "decision_note",
    "letters_figure",
    "progress_figure",
    "step_boundary",
    "success_figure",
    "trajectory_figure",
]

#: Fewer distinct values than this: points only (a violin over them would be a sliver).
MIN_VIOLIN_DISTINCT = 5
DECISION_TEXT = {Decision.B_BETTER: "B better", Decision.A_BETTER: "A better",
                 Decision.BUDGET_EXHAUSTED: "budget exhausted", Decision.CONTINUE: "undecided"}
PANEL_W, PANEL_H = 3.6, 2.7  # inches per panel


def _grid(count: int, title: str, *, width: float = PANEL_W, height: float = PANEL_H) -> tuple[Figure, list[Axes]]:
    cols = min(3, max(1, count))
    rows = max(1, math.ceil(count / cols))
    fig_w = max(width * cols, 5.0)
    fig = Figure(figsize=(fig_w, height * rows + 0.9), layout="constrained")
    fig.suptitle(wrap(title, fig_w - 0.3, 10.5), fontsize=10.5)
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for extra in axes[count:]:
        extra.set_visible(False)
    return fig, axes[:count]


def _legend_below(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for every panel, below them (no panel's data is covered)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=min(len(handles), 3), frameon=False)


def decision_note(test: ComparisonAudit) -> str:
    """What the test concluded and where, e.g. ``B better at pair 17`` (STEP: with its draw)."""
    res = test.result
    unit = "trial" if test.method == "adastop" else "pair"
    if res.decision in (Decision.A_BETTER, Decision.B_BETTER):
        note = f"{DECISION_TEXT[res.decision]} at {unit} {res.stopping_trial}"
        step = test.step
        if step is not None and step.draw is not None and step.weight is not None and step.weight < 1:
            note += f" (randomized: U={step.draw:.3f} < w={step.weight:.3f})"
        return note
    if res.decision == Decision.BUDGET_EXHAUSTED:
        return f"budget exhausted after {res.n_observed} {unit}s"
    return f"undecided after {res.n_observed} {unit}s"


def _panel_title(test: ComparisonAudit, width: float) -> str:
    where = f" @{test.task}" if test.task else ""
    head = wrap(f"{test.policy_a} (A) vs {test.policy_b} (B){where}", width, 9.5)
    return f"{head}\n{wrap(f'{test.method}, alpha {test.alpha:.3g}: {decision_note(test)}', width, 9.5)}"


def trajectory_figure(report: AuditReport, metric: str) -> Figure:
    """The evidence of each comparison of ``metric``, up to its stop, worded as its guarantee holds
    (:mod:`.guarantees`).

    Anytime-valid methods: the anytime p-value against the level (two-sided tests give each
    direction alpha / 2 and report twice the smaller one-sided p-value, so the test stops where
    p <= alpha).  STEP defines no p-value: its panels show the success gap, B minus A, against
    its boundary at each planned look (:func:`_step_panel`).  AdaStop's panels show the running
    difference of means, B minus A, with its interims, where alone it decides.
    """
    tests = [t for t in report.tests if t.metric == metric]
    methods = list(dict.fromkeys(t.method for t in tests)) or [m.method for m in report.config.metrics
                                                                 if m.name == metric]
    shown = {"step": "success gap against STEP's boundary at each look",
             "adastop": "difference of means at AdaStop's interims", "lai": "difference of means (no p-value)"}
    what = "; ".join(f"{m}, {short_guarantee(m, report.config.n_max)}: "
                     f"{shown.get(m, 'anytime p-value against its level')}" for m in methods)
    fig, axes = _grid(len(tests), f"{metric} ({what}), each comparison up to its stop")
    for ax, test in zip(axes, tests):
        res = test.result
        ax.set_title(_panel_title(test, PANEL_W - 0.2), fontsize=8.5)
        n = np.arange(1, res.n_observed + 1)
        if test.method == "adastop":
            _adastop_panel(ax, test, report)
        elif test.method == "step":
            _step_panel(ax, test, report.config.n_max)
        elif not (res.pvalues.size and np.isfinite(res.pvalues).any()):
            _difference_panel(ax, test)
        else:
            p = np.clip(res.pvalues, 1e-12, 1.0)
            ax.plot(n, p, color=CURVE_COLOR, lw=1.4, label="anytime p-value")
            ax.axhline(test.alpha, color=ALPHA_COLOR, ls="--", lw=1.2, label="level alpha")
            ax.set_yscale("log")
            low = min(float(np.nanmin(p)) if p.size else 1.0, test.alpha) / 3
            ax.set_ylim(max(low, 1e-12), 1.5)
            ax.set_ylabel("p-value (log scale)")
            ax.set_xlabel("pairs")
            if res.stopping_trial:
                ax.plot([res.stopping_trial], [p[res.stopping_trial - 1]], "o", color=ALPHA_COLOR, ms=6, zorder=3,
                        label="decision (stop)")
        if res.n_observed == 0:
            ax.set_xlabel("no pairs yet")
        ax.grid(alpha=0.3)
    _legend_below(fig, axes)
    return fig


def step_boundary(test: ComparisonAudit, n_max: int) -> tuple[np.ndarray, np.ndarray] | None:
    """STEP's boundary along the test's path, per look ``n`` (seed 003 Sec. IV): the smallest gap
    ``|B - A|`` at which a stop is possible (weight ``w_n > 0``, randomised below the certain
    stop) and the certain stop (``w_n = 1``), both NaN where no stop is possible at that look
    (every gap the look allows has weight 0).  ``None`` without the test's table."""
    try:
        table = load_table(n_max, table_alpha(test.alpha, test.alternative), synthesize=False)
    except (StatsInputError, FileNotFoundError, OSError):
        return None
    size = test.result.n_observed
    low = np.minimum(np.cumsum(test.values_a), np.cumsum(test.values_b)).astype(np.int64)[:size]
    possible = np.full(size, np.nan)
    certain = np.full(size, np.nan)
    for k in range(size):
        look, a = k + 1, int(low[k])
        gaps = np.arange(1, look - a + 1, dtype=np.int64)  # the gaps this look allows, given the smaller count
        if not gaps.size:
            continue
        weights = table.reject_weight(look, np.full(gaps.size, a, dtype=np.int64), gaps)
        if (weights > 0).any():
            possible[k] = gaps[np.argmax(weights > 0)]
        if (weights >= 1).any():
            certain[k] = gaps[np.argmax(weights >= 1)]
    return possible, certain


def _step_panel(ax: Axes, test: ComparisonAudit, n_max: int) -> None:
    """STEP: the success gap B - A at each look against its boundary (:func:`step_boundary`), for
    each direction the test decides: a light bar where a randomised stop is possible, a mark at
    the certain stop, nothing where no stop is possible.  The dot is the decision, at its look."""
    res = test.result
    n = np.arange(1, res.n_observed + 1)
    gap = np.cumsum(test.values_b - test.values_a)[:n.size]
    ax.plot(n, gap, color=CURVE_COLOR, lw=1.4, marker="o", ms=2.5, label="successes B minus A")
    ax.axhline(0, color="#888888", lw=0.8)
    bounds = step_boundary(test, n_max) if n.size else None
    reach = [float(np.abs(gap).max()) if gap.size else 1.0, 1.0]
    if bounds is not None:
        possible, certain = bounds
        sides = [s for s, alt in ((1, "greater"), (-1, "less")) if test.alternative in (alt, "two-sided")]
        for side in sides:
            name = "B better" if side > 0 else "A better"
            ok = np.isfinite(possible)
            ax.vlines(n[ok], side * possible[ok], side * np.where(np.isfinite(certain[ok]), certain[ok],
                                                                  possible[ok]),
                      color=ALPHA_COLOR, alpha=0.3, lw=4, label="randomised stop possible")
            ax.plot(n, side * certain, ls="", marker="_", ms=9, mew=1.6, color=ALPHA_COLOR,
                    label=f"certain stop ({name})" if len(sides) == 1 else "certain stop")
        finite = certain[np.isfinite(certain)]
        reach.append(float(finite.max()) if finite.size else 0.0)  # every drawn boundary stays on the axis
    if res.stopping_trial:
        step = test.step
        randomised = step is not None and step.weight is not None and step.weight < 1
        ax.plot([res.stopping_trial], [gap[res.stopping_trial - 1]], "o", color=ALPHA_COLOR, ms=6, zorder=3,
                label="decision (randomised stop)" if randomised else "decision (certain stop)")
    top = max(reach) + 1
    two = test.alternative == "two-sided"
    ax.set_ylim(-top if two or test.alternative == "less" else min(float(gap.min()) if gap.size else 0, 0) - 1.5,
                top if two or test.alternative == "greater" else max(float(gap.max()) if gap.size else 0, 0) + 1.5)
    ax.set_ylabel("successes B minus A")
    ax.set_xlabel("pairs (STEP's looks)")


def _difference_panel(ax: Axes, test: ComparisonAudit) -> None:
    """A method without p-values (Lai's boundary): the running difference of means, B - A, per pair."""
    res = test.result
    n = np.arange(1, res.n_observed + 1)
    diff = (np.cumsum(test.values_b) - np.cumsum(test.values_a))[:n.size] / np.maximum(n, 1)
    ax.plot(n, diff, color=CURVE_COLOR, lw=1.4, label="mean B minus mean A")
    ax.axhline(0, color="#888888", lw=0.8)
    if res.stopping_trial:
        ax.plot([res.stopping_trial], [diff[res.stopping_trial - 1]], "o", color=ALPHA_COLOR, ms=6, zorder=3,
                label="decision (stop)")
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("difference of means")
    ax.set_xlabel("pairs")


def _adastop_panel(ax: Axes, test: ComparisonAudit, report: AuditReport) -> None:
    """AdaStop: running mean difference B - A per trial of each agent, interims as vertical lines."""
    res = test.result
    n = np.arange(1, min(test.values_a.size, test.values_b.size) + 1)
    diff = np.cumsum(test.values_b[:n.size]) / n - np.cumsum(test.values_a[:n.size]) / n
    ax.plot(n, diff, color=CURVE_COLOR, lw=1.4, label="mean B minus mean A")
    ax.axhline(0, color="#888888", lw=0.8)
    design = report.config.adastop
    if design is not None:
        for k in range(1, design.n_interims + 1):
            ax.axvline(k * design.n_per_interim, color="#BBBBBB", lw=0.8, ls=":",
                       label="interim" if k == 1 else None)
    if res.stopping_trial and n.size:
        at = min(res.stopping_trial, n.size) - 1
        ax.plot([at + 1], [diff[at]], "o", color=ALPHA_COLOR, ms=6, zorder=3, label="decision (stop)")
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("difference of means")
    ax.set_xlabel("trials of each agent")


def _scores(report: AuditReport) -> dict[str, list[tuple[int, bool, float]]]:
    """``(trial id, success, progress)`` of every scored trial, per policy, in trial order."""
    out: dict[str, list[tuple[int, bool, float]]] = {p: [] for p in report.config.policies}
    for trial in report.trials:
        if trial.success is not None and trial.progress is not None and trial.policy in out:
            out[trial.policy].append((trial.trial_id, trial.success, trial.progress))
    return out


def progress_figure(report: AuditReport) -> Figure:
    """Every effective progress score per policy: points, a violin over enough distinct values,
    and the mean (bar); a point mass is one marker sized by its count."""
    scores = _scores(report)
    colors = policy_colors(report.config.policies)
    policies = list(scores)
    width = max(4.5, 1.1 * len(policies) + 2.0)
    fig = Figure(figsize=(width, 3.6), layout="constrained")
    ax = fig.subplots()
    rng = np.random.default_rng(0)  # jitter only: fixed, so the picture is reproducible
    labels = []
    for i, policy in enumerate(policies):
        values = np.array([p for _, _, p in scores[policy]], dtype=np.float64)
        distinct = np.unique(values)
        if distinct.size >= MIN_VIOLIN_DISTINCT:
            parts: Any = ax.violinplot([values], positions=[i], widths=0.75, showextrema=False)
            for body in parts["bodies"]:
                body.set_facecolor(colors[policy])
                body.set_alpha(0.25)
        if distinct.size == 1:
            ax.scatter([i], distinct, s=40 + 4 * min(values.size, 60), color=colors[policy], marker="D",
                       edgecolors="black", linewidths=0.6, zorder=3)
        elif values.size:
            ax.scatter(i + rng.uniform(-0.16, 0.16, values.size), values, s=9, color=colors[policy], alpha=0.7,
                       edgecolors="none")
        if values.size:
            ax.plot([i - 0.3, i + 0.3], [values.mean()] * 2, color=CURVE_COLOR, lw=1.8)
        same = f"\nall {distinct[0]:.2f}" if distinct.size == 1 else ""
        labels.append(f"{policy}\nmean {values.mean():.3f}\nn = {values.size}{same}" if values.size
                      else f"{policy}\nno scored trial")
    ax.set_xticks(range(len(policies)), [wrap(label, 1.05, 8) for label in labels])
    ax.set_xlim(-0.6, len(policies) - 0.4)
    ax.set_ylim(-0.05, 1.08)
    ax.set_ylabel("progress (1 = task complete)")
    total = sum(len(v) for v in scores.values())
    ax.set_title(wrap(f"Progress per policy over all {total} scored trials: points, violin (5+ distinct values) "
                      "and mean (bar)", width - 0.4, 9.5))
    ax.grid(axis="y", alpha=0.3)
    return fig


def _stops(report: AuditReport, policy: str, trial_ids: Sequence[int]) -> list[tuple[int, str]]:
    """``(x, label)`` per decided test of ``policy``: where it stopped, in the policy's trial count."""
    position = {trial_id: i + 1 for i, trial_id in enumerate(trial_ids)}
    out = []
    for test in report.tests:
        res = test.result
        if res.decision not in (Decision.A_BETTER, Decision.B_BETTER) or not res.stopping_trial:
            continue
        ids = test.trials_a if policy == test.policy_a else test.trials_b if policy == test.policy_b else ()
        if len(ids) >= res.stopping_trial and ids[res.stopping_trial - 1] in position:
            out.append((position[ids[res.stopping_trial - 1]], test.label))
    return out


def success_figure(report: AuditReport) -> Figure:
    """Running success rate per policy (one panel each) with its anytime-valid confidence sequence,
    the rate over all of the policy's trials in the panel title and each test's stop marked."""
    scores = _scores(report)
    colors = policy_colors(report.config.policies)
    level = report.config.alpha
    policies = list(scores)
    fig, axes = _grid(len(policies), f"Success rate per policy over all its trials, with the {1 - level:.0%} "
                      "anytime-valid confidence sequence (valid at every trial, including the stops)")
    for ax, policy in zip(axes, policies):
        values = scores[policy]
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("trials of the policy")
        ax.set_ylabel("success rate")
        ax.grid(alpha=0.3)
        if not values:
            ax.set_title(f"{policy}: no scored trial")
            continue
        x = np.array([float(s) for _, s, _ in values])
        mean, low, high = mixture_confidence_sequence(x, alpha=level, tightest_at=report.config.n_max)
        t = np.arange(1, x.size + 1)
        ax.fill_between(t, low, high, color=colors[policy], alpha=0.25, lw=0)
        ax.plot(t, mean, color=colors[policy], lw=1.6)
        stops = _stops(report, policy, [trial_id for trial_id, _, _ in values])
        if stops:
            xs = [s for s, _ in stops]
            ax.plot(xs, mean[np.array(xs) - 1], "o", color=ALPHA_COLOR, ms=5, zorder=3)
        ax.set_title(wrap(f"{policy}: {mean[-1]:.3f} [{low[-1]:.3f}, {high[-1]:.3f}], all {x.size} trials",
                          PANEL_W - 0.2, 9.5))
    # one neutral legend for every panel: the band and the curve take each policy's colour
    handles = [Patch(color="#555555", alpha=0.25, lw=0), Line2D([], [], color="#555555", lw=1.6),
               Line2D([], [], ls="", marker="o", color=ALPHA_COLOR, ms=5)]
    fig.legend(handles, [f"{1 - level:.0%} confidence sequence", "running success rate",
                         "a test's stop (its pair)"], loc="outside lower center", ncols=3, frameon=False)
    return fig


def letters_figure(report: AuditReport) -> Figure:
    """Mean of the first metric per policy over all its trials, best first, with the compact
    letter display above each bar."""
    metric = report.config.metrics[0].name
    scores = _scores(report)
    colors = policy_colors(report.config.policies)
    order = list(report.letters) or list(scores)
    means = [float(np.mean([float(s) if metric == "success" else p for _, s, p in scores[q]])) if scores[q] else 0.0
             for q in order]
    width = max(4.5, 1.1 * len(order) + 2.0)
    fig = Figure(figsize=(width, 3.6), layout="constrained")
    ax = fig.subplots()
    bars = ax.bar(range(len(order)), means, color=[colors[q] for q in order], alpha=0.85, edgecolor="black",
                  linewidth=0.5)
    for bar, policy in zip(bars, order):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.02, report.letters.get(policy, "") or "-",
                ha="center", va="bottom", fontsize=12, fontweight="bold")
    ax.set_xticks(range(len(order)), [wrap(f"{q}\n{m:.3f} (n = {len(scores[q])})", 1.05, 8)
                                      for q, m in zip(order, means)])
    ax.set_ylim(0, 1.2)
    ax.set_ylabel(f"mean {metric}, all trials")
    ax.set_title(wrap("Compact letter display: policies sharing a letter were not found different", width - 0.4, 9.5))
    ax.grid(axis="y", alpha=0.3)
    return fig
