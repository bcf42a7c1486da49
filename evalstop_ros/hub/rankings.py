"""The hub's rankings: every model of :mod:`evalstop_ros.stats.ranking` on the counted results (seed 001 App. B.1), with SEs and intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import HubError
from .results import Trial

if TYPE_CHECKING:  # the statistics core (scipy) is imported on first use: the CLI's parser stays light
    from ..stats.ranking import Comparisons, Ranking

__all__ = ["MODELS", "RANKERS", "comparisons_of", "fit_model", "model_rows", "outcome_of", "parse_models"]

#: Ranking models by name, as ``evalstop rank --model`` names them.
MODELS = ("paired", "bt", "davidson", "elo", "prog", "task")
#: Primary ranking of the leaderboard: the raw win rate, or one of :data:`MODELS`.
RANKERS = ("winrate", *MODELS)


def outcome_of(score_a: float, score_b: float) -> int:
    """A result's outcome ``y`` (seed ``001_*`` App. B.1): 2 when A's score is higher, 1 for equal scores, else 0."""
    return 2 if score_a > score_b else 1 if score_a == score_b else 0


def comparisons_of(policies: Sequence[str], trials: Sequence[Trial]) -> Comparisons:
    """The counted results as the core's comparisons (policies in the given order)."""
    import numpy as np

    from ..stats.ranking import Comparisons

    index = {name: k for k, name in enumerate(policies)}
    return Comparisons(tuple(policies), np.array([index[t.policy_a] for t in trials], dtype=np.int64),
                       np.array([index[t.policy_b] for t in trials], dtype=np.int64),
                       np.array([outcome_of(t.score_a, t.score_b) for t in trials], dtype=np.int64),
                       np.array([t.score_a for t in trials], dtype=np.float64),
                       np.array([t.score_b for t in trials], dtype=np.float64), tuple(t.task for t in trials))


def fit_model(model: str, data: Comparisons, *, seed: int = 0) -> Ranking:
    """Fit ``model`` with ``evalstop rank``'s defaults (Elo: 200 bootstrap resamples; task: 100)."""
    from ..stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
    from ..stats.ranking_task import TaskModelOptions, fit_task

    if model == "bt":
        return fit_bt(data)
    if model == "davidson":
        return fit_davidson(data)
    if model == "elo":
        return fit_elo(data, seed=seed)
    if model == "prog":
        return fit_prog(data)
    if model == "paired":
        return fit_paired_progress(data)
    if model == "task":
        return fit_task(data, TaskModelOptions(seed=seed)).ranking
    raise HubError(f"unknown ranking model {model!r}; known: {', '.join(MODELS)}")


def parse_models(text: str) -> tuple[str, ...]:
    """``"bt,task"`` -> ``("bt", "task")``; ``"all"`` -> :data:`MODELS`; unknown names refused."""
    names = MODELS if text.strip() == "all" else tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in MODELS]
    if unknown or not names:
        raise HubError(f"unknown ranking model(s) {unknown or text!r}; choose from {', '.join(MODELS)} or 'all'")
    return names


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def model_rows(model: str, data: Comparisons, level: float) -> dict[str, Any]:
    """One model's ranking, best first: score, SE, rank and the ``level`` interval per policy."""
    ranking = fit_model(model, data)
    low, high = ranking.interval(level)
    index = {name: k for k, name in enumerate(ranking.policies)}
    rows = []
    for row in ranking.table():
        k = index[str(row["policy"])]
        shown = ranking.calibrated and math.isfinite(float(ranking.se[k]))
        rows.append({"rank": row["rank"], "policy": row["policy"], "score": _finite(float(ranking.scores[k])),
                     "se": _finite(float(ranking.se[k])), "low": _finite(float(low[k])) if shown else None,
                     "high": _finite(float(high[k])) if shown else None})
    return {"model": model, "level": level, "se_method": ranking.se_method, "calibrated": ranking.calibrated,
            "rows": rows}
