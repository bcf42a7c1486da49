"""Rankings and sequential tests over every station's results, from the hub's journal.

One function, :func:`leaderboard`, turns the journal's ``result`` entries (in journal order)
into the leaderboard; the hub calls it on its live journal and ``evalstop hub analyze`` on an
exported one, so the two agree by construction and the test compares them.

* Per pair of policies, the A/B trials oriented ``(x, y)`` with ``x < y`` by name are replayed in
  journal order through the statistics core's own test (:func:`~evalstop_ros.stats.registry.run_test`,
  N-SCORE by default: anytime-valid, so reading it after every upload keeps its guarantee;
  seed ``000_*`` N-SCORE, Theorem 1).
* The ranking is a stand-in until ``stats/ranking`` lands: policies ordered by their win rate over
  all their A/B trials (a win 1, a tie 1/2; RoboArena seed ``001_*`` reports the same raw
  statistic next to its Bradley-Terry scores). :data:`RANKERS` is the hook where the
  Bradley-Terry / Elo rankers plug in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..stats.registry import METHODS, run_test
from .errors import HubError

__all__ = ["RANKERS", "Trial", "leaderboard", "trials_of", "win_rate_ranking"]


@dataclasses.dataclass(frozen=True)
class Trial:
    """One counted A/B trial: the policies on arms A and B, the task and both scores in [0, 1]."""

    policy_a: str
    policy_b: str
    task: str
    score_a: float
    score_b: float


def trials_of(entries: Iterable[Mapping[str, Any]]) -> list[Trial]:
    """The ``result`` entries of a journal (dicts with ``kind`` and ``body``), in order."""
    return [Trial(e["body"]["policy_a"], e["body"]["policy_b"], e["body"]["task"],
                  float(e["body"]["score_a"]), float(e["body"]["score_b"]))
            for e in entries if e["kind"] == "result"]


def win_rate_ranking(policies: Sequence[str], trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """Policies by win rate over their A/B trials (ties 1/2), then by mean score, then name."""
    wins = dict.fromkeys(policies, 0.0)
    played = dict.fromkeys(policies, 0)
    total = dict.fromkeys(policies, 0.0)
    for t in trials:
        for me, mine, theirs in ((t.policy_a, t.score_a, t.score_b), (t.policy_b, t.score_b, t.score_a)):
            wins[me] = wins.get(me, 0.0) + (1.0 if mine > theirs else 0.5 if mine == theirs else 0.0)
            played[me] = played.get(me, 0) + 1
            total[me] = total.get(me, 0.0) + mine
    def order(p: str) -> tuple[float, float, str]:
        return (-wins[p] / played[p], -total[p] / played[p], p) if played[p] else (1.0, 1.0, p)

    return [{"rank": rank, "policy": p, "trials": played[p], "win_rate": wins[p] / played[p] if played[p] else None,
             "mean_score": total[p] / played[p] if played[p] else None}
            for rank, p in enumerate(sorted(wins, key=order), 1)]


#: Ranking methods by name; stats/ranking's Bradley-Terry, Davidson and Elo register here.
RANKERS: dict[str, Callable[[Sequence[str], Sequence[Trial]], list[dict[str, Any]]]] = {"winrate": win_rate_ranking}


def _pair_tests(trials: Sequence[Trial], method: str, alpha: float) -> list[dict[str, Any]]:
    by_pair: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for t in trials:
        x, y, sx, sy = (t.policy_a, t.policy_b, t.score_a, t.score_b) if t.policy_a < t.policy_b else \
            (t.policy_b, t.policy_a, t.score_b, t.score_a)
        xs, ys = by_pair.setdefault((x, y), ([], []))
        xs.append(sx)
        ys.append(sy)
    out = []
    for (x, y), (xs, ys) in sorted(by_pair.items()):
        result = run_test(method, xs, ys, alpha=alpha)
        winner = {"b_better": y, "a_better": x}.get(result.decision.name.lower())
        out.append({"policy_a": x, "policy_b": y, "n": len(xs), "mean_a": sum(xs) / len(xs), "mean_b": sum(ys) / len(ys),
                    "decision": result.decision.name.lower(), "better": winner, "stopping_trial": result.stopping_trial,
                    "pvalue": None if result.pvalue != result.pvalue else result.pvalue})
    return out


def leaderboard(policies: Sequence[str], entries: Iterable[Mapping[str, Any]], *, method: str = "nscore",
                alpha: float = 0.05, ranker: str = "winrate") -> dict[str, Any]:
    """The leaderboard of the journal ``entries``: ranking plus one sequential test per pair."""
    if method not in METHODS or method in ("step", "lai"):
        raise HubError(f"the hub runs an anytime-valid test without a horizon; choose one of "
                       f"{sorted(set(METHODS) - {'step', 'lai'})}")
    if ranker not in RANKERS:
        raise HubError(f"unknown ranker {ranker!r}; known: {sorted(RANKERS)}")
    trials = trials_of(entries)
    return {"n_results": len(trials), "method": method, "alpha": alpha, "ranker": ranker,
            "ranking": RANKERS[ranker](policies, trials), "pairs": _pair_tests(trials, method, alpha)}
