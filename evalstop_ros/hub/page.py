"""The leaderboard and its sign-in form as self-contained HTML pages (no scripts, no external resources).

Rendered from the report's Jinja2 templates (``evalstop_ros/report/templates``: ``leaderboard.html.j2``,
``login.html.j2``), so the hub's page and a session report read alike: three decimals everywhere,
a time stamp, the ranking as a plot (inline SVG: each policy's win rate with its anytime-valid
interval) and as a table, and what the pairwise tests guarantee as a family.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from ..report.render import num, render
from ..report.style import policy_colors

__all__ = ["COOKIE_DAYS", "family_statement", "render_login", "render_page"]

#: How long the browser keeps the sign-in cookie.
COOKIE_DAYS = 7
_RANKERS = {"winrate": "win rate over all A/B trials (a tie counts 1/2)", "bt": "Bradley-Terry log-ability"}


def family_statement(board: dict[str, Any]) -> str:
    """What the pairwise tests guarantee over the whole leaderboard.

    Each pair's test is anytime-valid at ``alpha`` by itself (no correction among the pairs), so
    over ``m`` pairs the probability of any false claim is at most ``m alpha`` (Bonferroni);
    decisions whose p-value is also below ``alpha / m`` hold at family-wise level ``alpha``.
    """
    m = len(board["pairs"])
    alpha = float(board["alpha"])
    if m <= 1:
        return (f"Family-wise error: with {m} pair the test's own level holds: a false claim has probability at "
                f"most {alpha:g}, however often the page is read.")
    held = sum(1 for p in board["pairs"] if p["better"] and p["pvalue"] is not None and p["pvalue"] <= alpha / m)
    return (f"Family-wise error: each of the {m} pairwise tests runs at alpha = {alpha:g} on its own, so the "
            f"probability that any of them claims a difference that does not exist is at most {m} x {alpha:g} = "
            f"{min(1.0, m * alpha):.3g} (Bonferroni); {held} of the decisions also hold at alpha / {m} = "
            f"{alpha / m:.3g}, i.e. at family-wise level {alpha:g} (marked in the table). Every test is "
            "anytime-valid: reading the page after every result does not inflate these bounds.")


def _plot(ranking: list[dict[str, Any]], colors: dict[str, str]) -> dict[str, Any] | None:
    """Geometry of the inline SVG ranking plot (win rate and its interval per policy, rank order)."""
    if not ranking:
        return None
    width, left, right, top, row_h = 640, 170, 620, 12, 30
    bottom = top + row_h * len(ranking)

    def x(value: float | None) -> float | None:
        return None if value is None or math.isnan(value) else round(left + (right - left) * value, 1)

    rows = [{"label": r["policy"] if len(r["policy"]) <= 22 else r["policy"][:21] + "…", "y": top + row_h * (k + 0.5),
             "x": x(r.get("win_rate")), "low": x(r.get("win_low")), "high": x(r.get("win_high")),
             "color": colors.get(r["policy"], "#0072B2")} for k, r in enumerate(ranking)]
    ticks = [{"x": x(v), "label": f"{v:.2f}"} for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return {"width": width, "height": bottom + 40, "left": left, "right": right, "top": top, "bottom": bottom,
            "rows": rows, "ticks": ticks}


def _interval(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def render_page(board: dict[str, Any], title: str = "evalstop hub leaderboard",
                now: datetime.datetime | None = None) -> str:
    """HTML of :func:`~.leaderboard.leaderboard`'s result (``now``: the time stamp shown)."""
    ranking = board["ranking"]
    level = f"{1 - float(board['alpha']):.0%}"
    m = max(len(board["pairs"]), 1)
    bt = any("bt_score" in r for r in ranking)
    ranking_columns = [("rank", 1), ("policy", 0), ("trials", 1), ("win rate", 1), (f"{level} interval", 1),
                       ("mean score", 1), (f"{level} interval ", 1)] + ([("BT score", 1)] if bt else [])
    ranking_cells = [[r["rank"], r["policy"], r["trials"], num(r["win_rate"]), _interval(r.get("win_low"), r.get("win_high")),
                      num(r["mean_score"]), _interval(r.get("score_low"), r.get("score_high"))]
                     + ([num(r.get("bt_score"))] if bt else []) for r in ranking]
    pair_columns = [("pair", 0), ("n", 1), ("mean A", 1), ("mean B", 1), ("decision", 0), ("better", 0),
                    ("anytime p", 1), (f"holds at alpha / {m}", 0)]
    pair_cells = [[f"{p['policy_a']} vs {p['policy_b']}", p["n"], num(p["mean_a"]), num(p["mean_b"]), p["decision"],
                   p["better"] or "-", num(p["pvalue"], 4),
                   ("yes" if p["pvalue"] is not None and p["pvalue"] <= float(board["alpha"]) / m else "no")
                   if p["better"] else "-"] for p in board["pairs"]]
    return render(
        "leaderboard.html.j2", title=title, board=board, now=now or datetime.datetime.now(datetime.UTC),
        ranker_text=_RANKERS.get(board["ranker"], board["ranker"]), family=family_statement(board), level=level,
        plot=_plot(ranking, policy_colors(sorted(r["policy"] for r in ranking))),
        ranking_columns=ranking_columns, ranking_cells=ranking_cells,
        ranking_attrs=[{"class": "policy", "data-policy": r["policy"], "data-rank": r["rank"]} for r in ranking],
        pair_columns=pair_columns, pair_cells=pair_cells,
        pair_attrs=[{"class": "pair", "data-decision": p["decision"]} for p in board["pairs"]])


def render_login(title: str = "evalstop hub leaderboard", error: str = "", action: str = "/leaderboard/login") -> str:
    """The sign-in form a browser gets instead of the leaderboard without a valid key."""
    return render("login.html.j2", title=title, error=error, action=action, days=COOKIE_DAYS)
