"""The leaderboard over every station's results, from the hub's journal.

One class, :class:`Leaderboard`, turns the journal's ``result`` entries (in journal order) into
the leaderboard; the hub feeds it its live journal as it grows and ``evalstop hub analyze`` an
exported one (:func:`leaderboard`), so the two agree by construction and the tests compare them.

* **Comparisons**: all ``P (P - 1) / 2`` policy pairs form one family under sequential Holm at
  family-wise level ``alpha`` (:class:`~.family.HolmPairs`: the statistics core's
  :class:`~evalstop_ros.stats.holm.SequentialHolm` and
  :class:`~evalstop_ros.stats.holm.DirectionalTests`, the engine of a local K-policy session;
  seed ``000_*`` §VI-B).  A "better" claim anywhere on the board is false with probability at
  most ``alpha``, however often the board is read.
* **Rankings**: the primary ranking (``ranker``: ``winrate`` or a model of :mod:`.rankings`) and
  every model of ``models`` (Bradley-Terry, Davidson, Elo, PROG, paired progress, the task-aware
  model of seed ``001_*`` Sec. 3.2) with SEs and intervals; each policy's win rate and mean
  score also carry an anytime-valid interval (:func:`~evalstop_ros.stats.ranking_groups.group_summary`).
* **Progress** (:meth:`Leaderboard.progress`): the current order (Bradley-Terry, with adjacent
  policies swapped where Holm decided otherwise), which adjacent pairs are decided, and whether
  the ranking is settled (every adjacent pair decided) or the budget of results spent; the
  ``uncertain`` schedule takes its :class:`~.schedule.Focus` from here (:meth:`Leaderboard.focus`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..stats.methods import FACTS
from ..stats.ranking_groups import group_summary
from ..stats.registry import METHODS
from .errors import HubError
from .family import HolmPairs
from .rankings import MODELS, RANKERS, comparisons_of, fit_model, model_rows
from .results import Trial, trials_of
from .schedule import Focus

__all__ = ["ANYTIME_METHODS", "RANKERS", "REFIT_EVERY", "WARM_UP", "Leaderboard", "Trial", "leaderboard", "refit_point",
           "trials_of", "win_rate_ranking"]

#: The core's sequential tests valid at any stopping time with no horizon (stats.methods.FACTS).
ANYTIME_METHODS = frozenset(name for name in METHODS if FACTS[name].pvalue and not FACTS[name].needs_n_max)
#: Results between two Bradley-Terry refits of the order (or 5 % of the results, if more).
REFIT_EVERY = 10
#: Results every pair gets before the ``uncertain`` schedule trusts the ranking's order.
WARM_UP = 2


def refit_point(n: int) -> int:
    """How many of ``n`` results the order is fitted on: the last of 1, then steps of
    :data:`REFIT_EVERY` or 5 % (whichever is more), not above ``n``.  A function of ``n`` alone,
    so the live board -- whose order is asked for at every lease, after any number of new
    results -- and an offline analysis of the same journal fit the same results.

    >>> [refit_point(n) for n in (0, 1, 10, 11, 25, 230)]
    [0, 1, 1, 11, 21, 221]
    """
    m = 1 if n else 0
    while m and m + max(REFIT_EVERY, m // 20) <= n:
        m += max(REFIT_EVERY, m // 20)
    return m


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


def _intervals(policies: Sequence[str], trials: Sequence[Trial], alpha: float) -> dict[str, dict[str, float | None]]:
    """Per policy, the anytime-valid ``1 - alpha`` intervals of its win rate and mean score."""
    if not trials:
        return {}

    def finite(value: float) -> float | None:
        return None if math.isnan(value) else float(value)

    data = comparisons_of(policies, trials)
    return {row.policy: {"win_low": finite(row.win_low), "win_high": finite(row.win_high),
                         "score_low": finite(row.progress_low), "score_high": finite(row.progress_high)}
            for row in group_summary(data, ["all"] * len(trials), alpha=alpha)}


class Leaderboard:
    """The leaderboard, built incrementally from journal entries: :meth:`add` then :meth:`snapshot`.

    :param policies: The hub's registered policies (more are taken from ``policy_added`` entries).
    :param method: Anytime-valid method of the pairwise tests (``mixture``, the default, ``nscore``, ``wsr``, ``savi``).
    :param alpha: Family-wise level over all pairs; also ``1 - level`` of the intervals.
    :param ranker: Primary ranking: ``winrate`` or a model of :data:`~.rankings.MODELS`.
    :param models: Ranking models fitted for :meth:`snapshot` (with SEs and intervals).
    :param budget: Results after which the evaluation is over (0: no budget).
    """

    def __init__(self, policies: Sequence[str], *, method: str = "mixture", alpha: float = 0.05,
                 ranker: str = "bt", models: Sequence[str] = MODELS, budget: int = 0) -> None:
        if method not in ANYTIME_METHODS:
            raise HubError(f"the hub reads its pairwise tests after every result, so it needs an anytime-valid "
                           f"test without a horizon; choose one of {sorted(ANYTIME_METHODS)}")
        if ranker not in RANKERS:
            raise HubError(f"unknown ranker {ranker!r}; known: {', '.join(RANKERS)}")
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            raise HubError(f"unknown ranking model(s) {unknown}; known: {', '.join(MODELS)}")
        if not 0.0 < alpha < 1.0:
            raise HubError(f"alpha must lie in (0, 1); found {alpha!r}")
        if budget < 0:
            raise HubError(f"the budget is a number of results >= 0; found {budget!r}")
        self.policies = sorted(set(policies))
        self.method, self.alpha, self.ranker, self.models, self.budget = method, alpha, ranker, tuple(models), budget
        self.trials: list[Trial] = []
        self.family: HolmPairs | None = None
        self.as_of_seq = 0
        self.as_of: float | None = None
        self._order: list[str] = list(self.policies)
        self._order_n = -1
        self._claims_key = b""
        self._claims_cache: dict[frozenset[str], str] = {}
        self._rebuild()

    def _rebuild(self) -> None:
        """A new family over the current policies, every counted result replayed into it."""
        self.family = HolmPairs(self.policies, method=self.method, alpha=self.alpha) if len(self.policies) > 1 else None
        self._claims_key = b""
        for t in self.trials:
            self._feed(t)
        self._order_n = -1

    def _feed(self, t: Trial) -> None:
        if self.family is not None:
            if t.policy_a < t.policy_b:
                self.family.add(t.policy_a, t.policy_b, t.score_a, t.score_b)
            else:
                self.family.add(t.policy_b, t.policy_a, t.score_b, t.score_a)

    def add(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Feed journal entries in order (only ``policy_added`` and ``result`` ones matter)."""
        for entry in entries:
            body = entry["body"]
            if entry["kind"] == "result":  # the board is as of its last counted result
                self.as_of_seq = int(entry.get("seq", self.as_of_seq + 1))
                self.as_of = float(entry["at"]) if "at" in entry else self.as_of
            if entry["kind"] == "policy_added" and body["policy"] not in self.policies:
                self.policies = sorted([*self.policies, body["policy"]])
                self._rebuild()
            elif entry["kind"] == "result":
                (t,) = trials_of([entry])
                new = {t.policy_a, t.policy_b} - set(self.policies)
                self.trials.append(t)
                if new:  # a result for a policy the journal never registered (a partial export)
                    self.policies = sorted([*self.policies, *new])
                    self._rebuild()
                else:
                    if self.family is None:
                        self._rebuild()
                    else:
                        self._feed(t)

    # -- progress and the schedule's focus -------------------------------------------------
    def order(self) -> list[str]:
        """The current order, best first: Bradley-Terry scores of the first :func:`refit_point`
        results, then adjacent policies swapped wherever sequential Holm decided the other way."""
        m = refit_point(len(self.trials))
        if m and m != self._order_n:
            fit = fit_model("bt", comparisons_of(self.policies, self.trials[:m]))
            self._order = [p for _, p in sorted(zip(-fit.scores, fit.policies))]
            self._order_n = m
        order = [p for p in self._order if p in self.policies] + [p for p in self.policies if p not in self._order]
        better = self._claims()
        for _ in range(len(order)):
            swapped = False
            for k in range(len(order) - 1):
                if better.get(frozenset(order[k:k + 2])) == order[k + 1]:
                    order[k], order[k + 1] = order[k + 1], order[k]
                    swapped = True
            if not swapped:
                break
        return order

    def _claims(self) -> dict[frozenset[str], str]:
        if self.family is None:
            return {}
        decided = self.family.engine.decision[:, 0].tobytes()
        if self._claims_key != decided:
            self._claims_key, self._claims_cache = decided, self._claims_now()
        return self._claims_cache

    def _claims_now(self) -> dict[frozenset[str], str]:
        assert self.family is not None
        return {frozenset((row.policy_a, row.policy_b)): row.better for row in self.family.rows() if row.better is not None}

    def progress(self) -> dict[str, Any]:
        """Whether the ranking is settled (every adjacent pair of :meth:`order` decided, in its
        direction) or the budget spent, with the adjacent pairs' states (JSON-ready)."""
        order = self.order()
        claims = self._claims()
        adjacent = [{"better": order[k], "worse": order[k + 1],
                     "decided": claims.get(frozenset(order[k:k + 2])) == order[k]} for k in range(len(order) - 1)]
        settled = bool(adjacent) and all(a["decided"] for a in adjacent)
        spent = self.budget > 0 and len(self.trials) >= self.budget
        reason = ("every adjacent pair is decided" if settled else
                  f"the budget of {self.budget} results is spent" if spent else "")
        return {"order": order, "adjacent": adjacent, "settled": settled, "budget": self.budget or None,
                "budget_spent": spent, "finished": settled or spent, "reason": reason, "n_results": len(self.trials)}

    def focus(self) -> Focus:
        """The ``uncertain`` schedule's view: open pairs, and the open adjacent pairs of :meth:`order`
        (every open pair during the warm-up, :data:`WARM_UP` results per pair)."""
        family = self.family
        if family is None:
            return Focus(frozenset(), frozenset())
        claims = self._claims()
        open_ = frozenset((c.policy_a, c.policy_b) for c in family.comparisons if c.pair not in claims)
        if int(family.n.min()) < WARM_UP:
            return Focus(open_, open_)
        order = self.order()
        adjacent = {tuple(sorted(order[k:k + 2])) for k in range(len(order) - 1)}
        return Focus(open_, frozenset(pair for pair in open_ if pair in adjacent))

    # -- the board -------------------------------------------------------------------------
    def rankings(self) -> dict[str, dict[str, Any]]:
        """Every model of ``models`` fitted to the counted results (empty before the first result)."""
        if not self.trials or len(self.policies) < 2:
            return {}
        data = comparisons_of(self.policies, self.trials)
        return {model: model_rows(model, data, 1.0 - self.alpha) for model in self.models}

    def snapshot(self) -> dict[str, Any]:
        """The leaderboard now (JSON-ready): primary ranking with intervals, every model's ranking,
        every pair's state under sequential Holm, what the family-wise level covers, and progress."""
        models = self.rankings()
        ranking = win_rate_ranking(self.policies, self.trials)
        bands = _intervals(self.policies, self.trials, self.alpha)
        for row in ranking:
            row.update(bands.get(row["policy"], {}))
        if self.ranker != "winrate" and self.trials:
            chosen = models.get(self.ranker) or model_rows(self.ranker, comparisons_of(self.policies, self.trials),
                                                           1.0 - self.alpha)
            model = {row["policy"]: row for row in chosen["rows"]}
            ranking.sort(key=lambda row: model[row["policy"]]["rank"])
            for rank, row in enumerate(ranking, 1):
                m = model[row["policy"]]
                row.update(rank=rank, score=m["score"], se=m["se"], low=m["low"], high=m["high"])
        family = self.family
        statement = family.statement() if family is not None else {
            "procedure": "sequential Holm", "pairs": 0, "hypotheses": 0, "alpha": self.alpha, "method": self.method}
        return {"n_results": len(self.trials), "as_of_seq": self.as_of_seq, "as_of": self.as_of,
                "method": self.method, "alpha": self.alpha, "ranker": self.ranker, "ranking": ranking,
                "models": models, "family": statement, "pairs": [row.to_dict() for row in family.rows()] if family is not None else [],
                "progress": self.progress()}


def leaderboard(policies: Sequence[str], entries: Iterable[Mapping[str, Any]], *, method: str = "mixture",
                alpha: float = 0.05, ranker: str = "bt", models: Sequence[str] = MODELS,
                budget: int = 0) -> dict[str, Any]:
    """The leaderboard of the journal ``entries`` in one go (what ``evalstop hub analyze`` prints)."""
    board = Leaderboard(policies, method=method, alpha=alpha, ranker=ranker, models=models, budget=budget)
    board.add(list(entries))
    return board.snapshot()
