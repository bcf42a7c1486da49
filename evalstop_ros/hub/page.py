"""The leaderboard and its sign-in form as self-contained HTML pages (no scripts, no external resources).

Rendered from the report's Jinja2 templates (``evalstop_ros/report/templates``: ``leaderboard.html.j2``,
``login.html.j2``), so the hub's page and a session report read alike: three decimals everywhere,
a time stamp and the result the board is as of, whether the ranking is settled, the ranking as
plots (inline SVG: the primary model's score and each policy's win rate, with their intervals) and
as a table, every ranking model's scores with SEs and intervals, the pairs under sequential Holm
and what the family-wise level covers.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from ..report.render import num, render
from ..report.style import policy_colors

__all__ = ["COOKIE_DAYS", "family_statement", "progress_statement", "render_login", "render_page"]

#: How long the browser keeps the sign-in cookie.
COOKIE_DAYS = 7
_RANKERS = {"winrate": "win rate over all A/B trials (a tie counts 1/2)", "bt": "Bradley-Terry log-ability",
            "davidson": "Davidson log-ability (ties modelled)", "elo": "Elo rating (log-odds units)",
            "prog": "mean progress (PROG)", "paired": "paired progress relative to the pool",
            "task": "task-aware Bradley-Terry theta (RoboArena Sec. 3.2)"}


def family_statement(board: dict[str, Any]) -> str:
    """What the family-wise level covers: every pair of the board, under sequential Holm."""
    family = board["family"]
    m, alpha = int(family["pairs"]), float(board["alpha"])
    if m == 0:
        return f"Family-wise error: no pair to compare yet; claims will hold at family-wise level {alpha:g}."
    return (f"Family-wise error: all {m} pairs of the {len(board['ranking'])} policies (P(P-1)/2 = {m}, "
            f"{family['hypotheses']} directional hypotheses) form one family under sequential Holm at level "
            f"{alpha:g}: the probability that any 'better' claim on this page is false is at most {alpha:g}, "
            "however often the page is read (each direction is an anytime-valid "
            f"{family['method']} test starting at alpha / {family['hypotheses']} = {family.get('side_alpha', 0):.3g}; "
            "Holm's step-down re-analyses every pair after every result). The rankings' intervals below are "
            f"pointwise {1 - alpha:.0%} intervals for the results in hand, not family-wise and not anytime-valid.")


def progress_statement(board: dict[str, Any]) -> str:
    """Whether the ranking is settled or the budget spent (the hub keeps serving either way)."""
    progress = board["progress"]
    if progress["finished"]:
        return f"Finished: {progress['reason']} (after {progress['n_results']} results)."
    open_pairs = [f"{a['better']} / {a['worse']}" for a in progress["adjacent"] if not a["decided"]]
    budget = f" of a budget of {progress['budget']}" if progress["budget"] else ""
    return (f"Not settled after {progress['n_results']} results{budget}: {len(open_pairs)} adjacent pair(s) of the "
            f"current order still open ({', '.join(open_pairs) or 'no results yet'}).")


def _plot(rows: list[dict[str, Any]], colors: dict[str, str], value: str, low: str, high: str,
          axis: str) -> dict[str, Any] | None:
    """Geometry of an inline SVG ranking plot: one dot (``value``) and bar (``low``..``high``) per
    policy, rank order, on an axis fitted to the numbers ([0, 1] for rates)."""
    if not rows:
        return None
    width, left, right, top, row_h = 640, 170, 620, 12, 30
    bottom = top + row_h * len(rows)
    numbers = [float(r[key]) for r in rows for key in (value, low, high)
               if r.get(key) is not None and math.isfinite(float(r[key]))]
    lo, hi = (0.0, 1.0) if not numbers or (min(numbers) >= 0.0 and max(numbers) <= 1.0) else (min(numbers), max(numbers))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def x(number: float | None) -> float | None:
        if number is None or not math.isfinite(float(number)):
            return None
        return round(left + (right - left) * (float(number) - lo) / (hi - lo), 1)

    drawn = [{"label": r["policy"] if len(r["policy"]) <= 22 else r["policy"][:21] + "…", "y": top + row_h * (k + 0.5),
              "x": x(r.get(value)), "low": x(r.get(low)), "high": x(r.get(high)),
              "color": colors.get(r["policy"], "#0072B2")} for k, r in enumerate(rows)]
    ticks = [{"x": x(lo + (hi - lo) * f), "label": f"{lo + (hi - lo) * f:.2f}"} for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return {"width": width, "height": bottom + 40, "left": left, "right": right, "top": top, "bottom": bottom,
            "rows": drawn, "ticks": ticks, "axis": axis}


def _interval(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def render_page(board: dict[str, Any], title: str = "evalstop hub leaderboard",
                now: datetime.datetime | None = None) -> str:
    """HTML of :func:`~.leaderboard.leaderboard`'s result (``now``: the time stamp shown)."""
    ranking = board["ranking"]
    level = f"{1 - float(board['alpha']):.0%}"
    scored = any("score" in r for r in ranking)
    ranking_columns = ([("rank", 1), ("policy", 0), ("trials", 1)]
                       + ([("score", 1), ("se", 1), (f"{level} interval", 1)] if scored else [])
                       + [("win rate", 1), (f"{level} anytime interval", 1), ("mean score", 1),
                          (f"{level} anytime interval ", 1)])
    ranking_cells = [[r["rank"], r["policy"], r["trials"]]
                     + ([num(r.get("score")), num(r.get("se")), _interval(r.get("low"), r.get("high"))] if scored else [])
                     + [num(r["win_rate"]), _interval(r.get("win_low"), r.get("win_high")), num(r["mean_score"]),
                        _interval(r.get("score_low"), r.get("score_high"))] for r in ranking]
    pair_columns = [("pair", 0), ("n", 1), ("mean A", 1), ("mean B", 1), ("decision", 0), ("better", 0),
                    ("anytime p", 1), ("decided at result", 1)]
    pair_cells = [[f"{p['policy_a']} vs {p['policy_b']}", p["n"], num(p["mean_a"]), num(p["mean_b"]), p["decision"],
                   p["better"] or "-", num(p["pvalue"], 4), p["decided_at_result"] or "-"] for p in board["pairs"]]
    colors = policy_colors(sorted(r["policy"] for r in ranking))
    models = [{"name": name, "text": _RANKERS.get(name, name), "se_method": fit["se_method"],
               "calibrated": fit["calibrated"],
               "cells": [[r["rank"], r["policy"], num(r["score"]), num(r["se"]), _interval(r["low"], r["high"])]
                         for r in fit["rows"]]} for name, fit in board["models"].items()]
    plots = [_plot(ranking, colors, "win_rate", "win_low", "win_high",
                   f"win rate over all A/B trials (tie = 1/2), with its {level} anytime-valid interval")]
    if scored:
        plots.insert(0, _plot(ranking, colors, "score", "low", "high",
                              f"{_RANKERS.get(board['ranker'], board['ranker'])}, with its {level} interval"))
    return render(
        "leaderboard.html.j2", title=title, board=board, now=now or datetime.datetime.now(datetime.UTC),
        ranker_text=_RANKERS.get(board["ranker"], board["ranker"]), family=family_statement(board),
        progress=progress_statement(board), level=level, plots=[plot for plot in plots if plot],
        ranking_columns=ranking_columns, ranking_cells=ranking_cells,
        ranking_attrs=[{"class": "policy", "data-policy": r["policy"], "data-rank": r["rank"]} for r in ranking],
        pair_columns=pair_columns, pair_cells=pair_cells, models=models,
        model_columns=[("rank", 1), ("policy", 0), ("score", 1), ("se", 1), (f"{level} interval", 1)],
        pair_attrs=[{"class": "pair", "data-decision": p["decision"]} for p in board["pairs"]])


def render_login(title: str = "evalstop hub leaderboard", error: str = "", action: str = "/leaderboard/login") -> str:
    """The sign-in form a browser gets instead of the leaderboard without a valid key."""
    return render("login.html.j2", title=title, error=error, action=action, days=COOKIE_DAYS)
