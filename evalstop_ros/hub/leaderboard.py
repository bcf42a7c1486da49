"""Rankings and sequential tests over every station's results, from the hub's journal.

One class, :class:`Leaderboard`, turns the journal's ``result`` entries (in journal order) into
the leaderboard; the hub feeds it its live journal as it grows and ``evalstop hub analyze`` an
exported one (:func:`leaderboard`), so the two agree by construction and the test compares them.

* Per pair of policies, the A/B trials oriented ``(x, y)`` with ``x < y`` by name are fed in
  journal order to the statistics core's own sequential process (:func:`~evalstop_ros.stats.registry.make_process`,
  N-SCORE by default: anytime-valid, so reading it after every upload keeps its guarantee;
  seed ``000_*`` N-SCORE, Theorem 1).
* The ranking: by default policies ordered by their win rate over all their A/B trials (a win 1,
  a tie 1/2; RoboArena seed ``001_*`` reports the same raw statistic next to its Bradley-Terry
  scores); ``bt`` fits Bradley-Terry with the core's ``stats.ranking.fit_bt``. :data:`RANKERS`
  is the hook where further models plug in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..stats.methods import FACTS
from ..stats.registry import METHODS, make_process
from ..stats.sequential import Decision
from .errors import HubError

__all__ = ["RANKERS", "Leaderboard", "Trial", "intervals", "leaderboard", "trials_of", "win_rate_ranking"]


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


def bt_ranking(policies: Sequence[str], trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """Policies by Bradley-Terry log-ability (:func:`~evalstop_ros.stats.ranking.fit_bt`, RoboArena
    seed ``001_*`` §3), the higher score of a trial preferred, equal scores a tie; the win-rate
    columns are kept beside it."""
    from ..stats.ranking import Comparisons, fit_bt

    names = tuple(sorted(policies))
    index = {name: k for k, name in enumerate(names)}
    rows = win_rate_ranking(names, trials)
    if not trials:
        return rows
    outcome = [2 if t.score_a > t.score_b else 1 if t.score_a == t.score_b else 0 for t in trials]
    data = Comparisons(names, np.array([index[t.policy_a] for t in trials]), np.array([index[t.policy_b] for t in trials]),
                       np.array(outcome), np.array([t.score_a for t in trials]), np.array([t.score_b for t in trials]),
                       tuple(t.task for t in trials))
    fit = fit_bt(data)
    score = {name: float(fit.scores[k]) for k, name in enumerate(names)}
    rows.sort(key=lambda row: (-score[row["policy"]], row["policy"]))
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
        row["bt_score"] = score[row["policy"]]
    return rows


def intervals(policies: Sequence[str], trials: Sequence[Trial], alpha: float) -> dict[str, dict[str, float | None]]:
    """Per policy, the anytime-valid ``1 - alpha`` intervals of its win rate and mean score over
    all its A/B trials (:func:`~evalstop_ros.stats.ranking.group_summary`, one group): valid
    however long the hub has run and whenever the page is read."""
    from ..stats.ranking import Comparisons, group_summary

    names = tuple(sorted(policies))
    index = {name: k for k, name in enumerate(names)}
    if not trials or len(names) < 2:
        return {}
    data = Comparisons(names, np.array([index[t.policy_a] for t in trials]),
                       np.array([index[t.policy_b] for t in trials]),
                       np.array([2 if t.score_a > t.score_b else 1 if t.score_a == t.score_b else 0 for t in trials]),
                       np.array([t.score_a for t in trials]), np.array([t.score_b for t in trials]),
                       tuple(t.task for t in trials))

    def finite(value: float) -> float | None:
        return None if math.isnan(value) else float(value)

    return {row.policy: {"win_low": finite(row.win_low), "win_high": finite(row.win_high),
                         "score_low": finite(row.progress_low), "score_high": finite(row.progress_high),
                         "interval_level": 1 - alpha}
            for row in group_summary(data, ["all"] * len(trials), alpha=alpha)}


#: Ranking methods by name (``--ranker``); more models of stats/ranking can register here.
RANKERS: dict[str, Callable[[Sequence[str], Sequence[Trial]], list[dict[str, Any]]]] = {
    "winrate": win_rate_ranking, "bt": bt_ranking}


#: The core's sequential tests valid at any stopping time with no horizon (stats.methods.FACTS).
ANYTIME_METHODS = frozenset(name for name in METHODS if FACTS[name].pvalue and not FACTS[name].needs_n_max)


class _PairTest:
    """The anytime-valid test of one policy pair, fed trial by trial (the core's process)."""

    def __init__(self, method: str, alpha: float) -> None:
        self.process = make_process(method, 1, alpha=alpha, alternative="two-sided", n_max=None)
        self.n = 0
        self.sum_a = 0.0
        self.sum_b = 0.0

    def add(self, score_a: float, score_b: float) -> None:
        self.n += 1
        self.sum_a += score_a
        self.sum_b += score_b
        if self.process.decision[0] == Decision.CONTINUE:  # nothing is read after the first stop
            self.process.update(np.array([score_a]), np.array([score_b]))

    def row(self, x: str, y: str) -> dict[str, Any]:
        decision = Decision(int(self.process.decision[0])).name.lower()
        pvalue = float(self.process.pvalue()[0])
        return {"policy_a": x, "policy_b": y, "n": self.n, "mean_a": self.sum_a / self.n, "mean_b": self.sum_b / self.n,
                "decision": decision, "better": {"b_better": y, "a_better": x}.get(decision),
                "stopping_trial": int(self.process.stopping_trial[0]), "pvalue": None if math.isnan(pvalue) else pvalue}


class Leaderboard:
    """The leaderboard, built incrementally from journal entries: :meth:`add` then :meth:`snapshot`.

    Each pair's test is the statistics core's process (:func:`~evalstop_ros.stats.registry.make_process`),
    fed the pair's trials oriented ``(x, y)`` by name in journal order, so a refresh costs the
    new results only; it equals :func:`~evalstop_ros.stats.registry.run_test` on the whole
    sequence (checked by the tests).
    """

    def __init__(self, policies: Sequence[str], *, method: str = "nscore", alpha: float = 0.05,
                 ranker: str = "winrate") -> None:
        if method not in ANYTIME_METHODS:
            raise HubError(f"the hub reads its pairwise tests after every result, so it needs an anytime-valid "
                           f"test without a horizon; choose one of {sorted(ANYTIME_METHODS)}")
        if ranker not in RANKERS:
            raise HubError(f"unknown ranker {ranker!r}; known: {sorted(RANKERS)}")
        self.policies = list(policies)
        self.method, self.alpha, self.ranker = method, alpha, ranker
        self.trials: list[Trial] = []
        self._pairs: dict[tuple[str, str], _PairTest] = {}

    def add(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Feed journal entries (only ``result`` and ``policy_added`` ones matter)."""
        for entry in entries:
            if entry["kind"] == "policy_added" and entry["body"]["policy"] not in self.policies:
                self.policies.append(entry["body"]["policy"])
        for t in trials_of(entries):
            self.trials.append(t)
            x, y, sx, sy = (t.policy_a, t.policy_b, t.score_a, t.score_b) if t.policy_a < t.policy_b else \
                (t.policy_b, t.policy_a, t.score_b, t.score_a)
            if (x, y) not in self._pairs:
                self._pairs[(x, y)] = _PairTest(self.method, self.alpha)
            self._pairs[(x, y)].add(sx, sy)

    def snapshot(self) -> dict[str, Any]:
        """The leaderboard now: ranking (with each policy's anytime-valid intervals) plus one
        sequential test per pair (JSON-ready)."""
        ranking = RANKERS[self.ranker](sorted(self.policies), self.trials)
        bands = intervals(sorted(self.policies), self.trials, self.alpha)
        for row in ranking:
            row.update(bands.get(row["policy"], {}))
        return {"n_results": len(self.trials), "method": self.method, "alpha": self.alpha, "ranker": self.ranker,
                "ranking": ranking, "pairs": [test.row(x, y) for (x, y), test in sorted(self._pairs.items())]}


def leaderboard(policies: Sequence[str], entries: Iterable[Mapping[str, Any]], *, method: str = "nscore",
                alpha: float = 0.05, ranker: str = "winrate") -> dict[str, Any]:
    """The leaderboard of the journal ``entries`` in one go (what ``evalstop hub analyze`` prints)."""
    board = Leaderboard(policies, method=method, alpha=alpha, ranker=ranker)
    board.add(list(entries))
    return board.snapshot()
