"""The leaderboard and its sign-in form as self-contained HTML pages (no scripts, no external resources)."""

from __future__ import annotations

import datetime
import math
from typing import Any

from ..report.render import num, render
from ..report.style import policy_colors

__all__ = ["COOKIE_DAYS", "REFRESH_SECONDS", "family_statement", "progress_statement", "render_login", "render_page"]

#: How long the browser keeps the sign-in cookie.
COOKIE_DAYS = 7
#: Seconds between two reloads of the leaderboard page by the browser.
REFRESH_SECONDS = 30
_RANKERS = {"winrate": "win rate over all A/B trials (a tie counts 1/2)", "bt": "Bradley-Terry log-ability",
            "davidson": "Davidson log-ability (ties modelled)", "elo": "Elo rating (log-odds units)",
            "prog": "mean progress (PROG)", "paired": "paired progress relative to the pool",
            "task": "task-aware Bradley-Terry theta (RoboArena Sec. 3.2)"}


def family_statement(board: dict[str, Any]) -> str:
    """What the family-wise level covers: every pair of the board, under sequential (weighted) Holm."""
    family = board["family"]
    m, alpha = int(family["pairs"]), float(board["alpha"])
    if m == 0:
        return f"Family-wise error: no pair to compare yet; claims will hold at family-wise level {alpha:g}."
    pairs = ("the one pair of the 2 policies (2 directional hypotheses) is tested" if m == 1 else
             f"all {m} pairs of the {len(board['ranking'])} policies ({family['hypotheses']} directional "
             "hypotheses) form one family")
    if family.get("design", "all-pairs") == "all-pairs":
        how = (f"under sequential Holm at level {alpha:g}: the probability that any 'better' claim on this page is "
               f"false is at most {alpha:g}, however often the page is read (each direction is an anytime-valid "
               f"{family['method']} test starting at alpha / {family['hypotheses']} = {family.get('side_alpha', 0):.3g}; "
               "Holm's step-down re-analyses every pair after every result).")
    else:
        declared = family.get("declared_order")
        when = (f"the first {family['warm_up']} results of every pair were a warm-up that only ordered the policies "
                f"({' > '.join(declared)}, declared after result {family['declared_at']})" if declared else
                f"the first {family['warm_up']} results of every pair are a warm-up that only orders the policies "
                "(still running: no claim before it ends)")
        how = (f"under sequential weighted Holm at level {alpha:g}: the probability that any 'better' claim on "
               f"this page is false is at most {alpha:g}, however often the page is read ({when}; that order's "
               "adjacent pairs in its direction carry most of the level, every other direction the rest, and each "
               f"is an anytime-valid {family['method']} test on the later results only; the step-down re-analyses "
               "every pair after every result).")
    return (f"Family-wise error: {pairs} {how} The ranking models' intervals below are "
            f"pointwise {1 - alpha:.0%} intervals for the results in hand, not family-wise and not anytime-valid; "
            "the win rates' and mean scores' intervals are anytime-valid for each policy on its own, not "
            "family-wise.")


def progress_statement(board: dict[str, Any]) -> str:
    """Whether the ranking is settled or the budget spent (the hub keeps serving either way)."""
    progress = board["progress"]
    results = f"{progress['n_results']} result{'' if progress['n_results'] == 1 else 's'}"
    if progress["finished"]:
        return f"Finished: {progress['reason']} (after {results})."
    open_pairs = [f"{a['better']} / {a['worse']}" for a in progress["adjacent"] if not a["decided"]]
    budget = f" of a budget of {progress['budget']}" if progress["budget"] else ""
    neighbours = ("no results yet" if not open_pairs else
                  f"{len(open_pairs)} adjacent pair{'' if len(open_pairs) == 1 else 's'} of the current order "
                  f"still open: {', '.join(open_pairs)}")
    return f"Not settled after {results}{budget}: {neighbours}."


def _plot(rows: list[dict[str, Any]], colors: dict[str, str], value: str, low: str, high: str,
          axis: str) -> dict[str, Any] | None:
    """One ranking plot: per policy in rank order a dot (``value``) and a bar (``low``..``high``),
    placed in percent of an axis fitted to the numbers ([0, 1] for rates), drawn by CSS."""
    if not rows:
        return None
    numbers = [float(r[key]) for r in rows for key in (value, low, high)
               if r.get(key) is not None and math.isfinite(float(r[key]))]
    lo, hi = (0.0, 1.0) if not numbers or (min(numbers) >= 0.0 and max(numbers) <= 1.0) else (min(numbers), max(numbers))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def x(number: float | None) -> float | None:
        if number is None or not math.isfinite(float(number)):
            return None
        return round(100.0 * (float(number) - lo) / (hi - lo), 2)

    drawn = []
    for r in rows:
        at, start, end = x(r.get(value)), x(r.get(low)), x(r.get(high))
        drawn.append({"policy": r["policy"], "x": at, "low": start,
                      "width": None if start is None or end is None else round(end - start, 2),
                      "value": num(r.get(value)), "color": colors.get(r["policy"], "#0072B2")})
    ticks = [{"x": round(100.0 * f, 2), "label": f"{lo + (hi - lo) * f:.2f}"} for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return {"rows": drawn, "ticks": ticks, "axis": axis}


def _interval(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def _with(value: Any, low: Any, high: Any) -> str:
    """A value followed by its interval, one cell: ``0.731 [0.612, 0.829]``."""
    return f"{num(value)} {_interval(low, high)}" if low is not None and high is not None else num(value)


def render_page(board: dict[str, Any], title: str = "evalstop hub leaderboard",
                now: datetime.datetime | None = None, refresh: int = REFRESH_SECONDS) -> str:
    """HTML of :func:`~.leaderboard.leaderboard`'s result (``now``: the time stamp shown; the browser
    reloads the page every ``refresh`` seconds, none if 0)."""
    ranking = board["ranking"]
    level = f"{1 - float(board['alpha']):.0%}"
    scored = any("score" in r for r in ranking)
    ranker = board["ranker"]
    ranking_columns = ([("rank", 1), ("policy", 0), ("trials", 1)]
                       + ([(f"{ranker} score", 1), ("se", 1), (f"{level} interval", 1)] if scored else [])
                       + [(f"win rate [{level} anytime interval]", 1), (f"mean score [{level} anytime interval]", 1)])
    ranking_cells = [[r["rank"], r["policy"], r["trials"]]
                     + ([num(r.get("score")), num(r.get("se")), _interval(r.get("low"), r.get("high"))] if scored else [])
                     + [_with(r["win_rate"], r.get("win_low"), r.get("win_high")),
                        _with(r["mean_score"], r.get("score_low"), r.get("score_high"))] for r in ranking]
    pair_columns = [("pair", 0), ("n", 1), ("mean A", 1), ("mean B", 1), ("decision", 0), ("better", 0),
                    ("anytime p", 1), ("decided at result", 1)]
    pair_cells = [[f"{p['policy_a']} vs {p['policy_b']}", p["n"], num(p["mean_a"]), num(p["mean_b"]), p["decision"],
                   p["better"] or "-", num(p["pvalue"], 4), p["decided_at_result"] or "-"] for p in board["pairs"]]
    colors = policy_colors(sorted(r["policy"] for r in ranking))
    models = [{"name": name, "text": _RANKERS.get(name, name), "se_method": fit["se_method"],
               "calibrated": fit["calibrated"], "open": name == ranker,
               "cells": [[r["rank"], r["policy"], num(r["score"]), num(r["se"]), _interval(r["low"], r["high"])]
                         for r in fit["rows"]]} for name, fit in board["models"].items()]
    models.sort(key=lambda model: not model["open"])  # the primary model first
    plots = [_plot(ranking, colors, "win_rate", "win_low", "win_high",
                   f"win rate over all A/B trials (tie = 1/2), with its {level} anytime-valid interval")]
    if scored:
        plots.insert(0, _plot(ranking, colors, "score", "low", "high",
                              f"{_RANKERS.get(ranker, ranker)}, with its {level} interval"))
    return render(
        "leaderboard.html.j2", title=title, board=board, now=now or datetime.datetime.now(datetime.UTC),
        refresh=refresh, ranker_text=_RANKERS.get(ranker, ranker), family=family_statement(board),
        progress=progress_statement(board), level=level, plots=[plot for plot in plots if plot],
        ranking_columns=ranking_columns, ranking_cells=ranking_cells,
        ranking_attrs=[{"class": "policy", "data-policy": r["policy"], "data-rank": r["rank"]} for r in ranking],
        pair_columns=pair_columns, pair_cells=pair_cells, models=models,
        model_columns=[("rank", 1), ("policy", 0), ("score", 1), ("se", 1), (f"{level} interval", 1)],
        pair_attrs=[{"class": "pair", "data-decision": p["decision"]} for p in board["pairs"]])


def render_login(title: str = "evalstop hub leaderboard", error: str = "", action: str = "/leaderboard/login") -> str:
    """The sign-in form a browser gets instead of the leaderboard without a valid key."""
    return render("login.html.j2", title=title, error=error, action=action, days=COOKIE_DAYS)
