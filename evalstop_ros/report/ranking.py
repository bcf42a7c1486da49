"""The ranking section of an A/B session's report (``design: ab``; seed 001 Sec. 3.2): the
complete rounds (:func:`evalstop_ros.session.ab.ab_rounds_of`) fitted by ``evalstop rank``'s
default model, the paired-progress least squares (``fit_paired_progress``), with its 95 %
intervals; or why there is none.
"""

from __future__ import annotations

import dataclasses
import math

from ..audit import AuditReport
from ..stats.errors import StatsInputError

__all__ = ["LEVEL", "RANKING_COLUMNS", "ABRanking", "ab_ranking"]

#: Level of the intervals the report prints.
LEVEL = 0.95
#: ``ranking.csv``: one row per policy, best first (name, meaning).
RANKING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "1 = best"),
    ("policy", "the policy"),
    ("score", "progress relative to the pool's average (paired model of evalstop rank)"),
    ("se", "standard error of the score (small-sample-corrected sandwich)"),
    ("low", "lower end of the 95% interval (Student t, Satterthwaite df)"),
    ("high", "upper end of the 95% interval"),
    ("games", "complete A/B rounds the policy ran in"),
    ("win_rate", "share of its rounds it was preferred in (ties count 1/2)"),
)


@dataclasses.dataclass(frozen=True)
class ABRanking:
    """The section: ``rows`` (keys :data:`RANKING_COLUMNS`), best first, and a ``note`` on the
    data (rounds used, set aside, preferences derived from scores); ``rows`` is empty and
    ``note`` says why when no ranking can be fitted."""

    rows: tuple[dict[str, float | int | str | None], ...]
    note: str


def ab_ranking(report: AuditReport) -> ABRanking | None:
    """The ranking of ``report``'s A/B session, or ``None`` for another design."""
    if report.config.design != "ab":
        return None
    from ..session.ab import ab_rounds_of  # here, not at the top: the ranking models import scipy.stats
    from ..stats.ranking_fits import fit_paired_progress

    rounds = ab_rounds_of(report.config, report.trials)
    aside = f"{rounds.n_incomplete} incomplete and {rounds.n_invalid} invalid rounds set aside"
    if len(rounds.data) == 0:
        return ABRanking((), f"No ranking: no complete A/B round ({aside}); a round counts once both its trials are "
                             "scored and a preference is stated (under scoring: auto, from the two scores).")
    try:
        ranking = fit_paired_progress(rounds.data)
    except StatsInputError as err:
        return ABRanking((), f"No ranking: {err} ({len(rounds.data)} complete rounds, {aside}).")
    low, high = ranking.interval(LEVEL)
    wins, games = rounds.data.win_matrix()
    index = {name: k for k, name in enumerate(ranking.policies)}
    rows = []
    for row in ranking.table():
        k = index[str(row["policy"])]
        played = int(games[k].sum())
        rows.append({"rank": row["rank"], "policy": row["policy"], "score": row["score"], "se": row["se"],
                     "low": _finite(low[k]), "high": _finite(high[k]), "games": played,
                     "win_rate": float(wins[k].sum() / played) if played else None})
    derived = (f"; {rounds.n_derived} preferences follow the two scores (scoring: auto records none: the higher "
               "progress, then success, is preferred)" if rounds.n_derived else "")
    note = (f"{len(rounds.data)} complete A/B rounds ({aside}){derived}. Score: progress relative to the pool's "
            f"average by the paired model of evalstop rank (seed 001 Sec. 3.2), {LEVEL:.0%} intervals by Student's t; "
            "`evalstop rank` on the session fits the other models.")
    return ABRanking(tuple(rows), note)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
