"""The leaderboard over every station's results, from the hub's journal: pairs under sequential Holm, rankings, progress.

The live hub and ``evalstop hub analyze`` run the same class; docs/hub_server.md.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..stats.methods import FACTS
from ..stats.ranking_groups import group_summary
from ..stats.registry import METHODS
from .designs import FAMILIES
from .errors import HubError
from .family import HolmPairs
from .rankings import MODELS, RANKERS, fit_model, model_rows, outcome_of
from .results import Trial, trials_of
from .schedule import Focus

if TYPE_CHECKING:
    from ..stats.ranking import Comparisons

__all__ = ["ANYTIME_METHODS", "EXACT_MODELS", "RANKERS", "REFIT_EVERY", "WARM_UP", "Leaderboard", "Trial", "leaderboard",
           "fit_models", "fitted_order", "model_point", "refit_point", "trials_of", "win_rate_ranking"]

#: The core's sequential tests valid at any stopping time with no horizon (stats.methods.FACTS).
ANYTIME_METHODS = frozenset(name for name in METHODS if FACTS[name].pvalue and not FACTS[name].needs_n_max)
#: Results between two Bradley-Terry refits of the order (or 5 % of the results, if more).
REFIT_EVERY = 10
#: Results every pair gets before the ``uncertain`` schedule trusts the ranking's order.
WARM_UP = 2
#: Up to this many results the ranking models are refitted on every result (then at steps of 5 %).
EXACT_MODELS = 1000


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


def model_point(n: int) -> int:
    """How many of ``n`` results the ranking models are fitted on: all of them up to
    :data:`EXACT_MODELS`, then the last of :data:`EXACT_MODELS` and steps of 5 % -- a model fit is
    O(results), so a board read after every result of a large hub would refit them all the time.

    >>> [model_point(n) for n in (90, 1000, 1049, 1050, 100_000)]
    [90, 1000, 1000, 1050, 97202]
    """
    m = min(n, EXACT_MODELS)
    while m >= EXACT_MODELS and m + m // 20 <= n:
        m += m // 20
    return m


class _Tally:
    """Each policy's wins (ties 1/2), trials and total score, counted per result."""

    def __init__(self, policies: Sequence[str]) -> None:
        self.wins = dict.fromkeys(policies, 0.0)
        self.played = dict.fromkeys(policies, 0)
        self.total = dict.fromkeys(policies, 0.0)

    def add(self, t: Trial) -> None:
        for me, mine, theirs in ((t.policy_a, t.score_a, t.score_b), (t.policy_b, t.score_b, t.score_a)):
            self.wins[me] = self.wins.get(me, 0.0) + (1.0 if mine > theirs else 0.5 if mine == theirs else 0.0)
            self.played[me] = self.played.get(me, 0) + 1
            self.total[me] = self.total.get(me, 0.0) + mine

    def copy(self) -> _Tally:
        out = _Tally(())
        out.wins, out.played, out.total = dict(self.wins), dict(self.played), dict(self.total)
        return out


def win_rate_ranking(policies: Sequence[str], trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """Policies by win rate over their A/B trials (ties 1/2), then by mean score, then name."""
    tally = _Tally(policies)
    for t in trials:
        tally.add(t)
    return _win_rows(tally)


def _win_rows(tally: _Tally) -> list[dict[str, Any]]:
    wins, played, total = tally.wins, tally.played, tally.total

    def order(p: str) -> tuple[float, float, str]:
        return (-wins[p] / played[p], -total[p] / played[p], p) if played[p] else (1.0, 1.0, p)

    return [{"rank": rank, "policy": p, "trials": played[p], "win_rate": wins[p] / played[p] if played[p] else None,
             "mean_score": total[p] / played[p] if played[p] else None}
            for rank, p in enumerate(sorted(wins, key=order), 1)]


def _intervals(data: Comparisons, alpha: float) -> dict[str, dict[str, float | None]]:
    """Per policy, the anytime-valid ``1 - alpha`` intervals of its win rate and mean score."""
    if not len(data):
        return {}

    def finite(value: float) -> float | None:
        return None if math.isnan(value) else float(value)

    return {row.policy: {"win_low": finite(row.win_low), "win_high": finite(row.win_high),
                         "score_low": finite(row.progress_low), "score_high": finite(row.progress_high)}
            for row in group_summary(data, ["all"] * len(data), alpha=alpha)}


class _Columns:
    """The counted results as the core's comparison arrays (:func:`~.rankings.comparisons_of`'s
    coding), grown in place: a prefix is a view, never a copy of every result."""

    def __init__(self, policies: Sequence[str], trials: Sequence[Trial]) -> None:
        self.policies = tuple(policies)
        self._index = {name: k for k, name in enumerate(self.policies)}
        self.n = 0
        self._ints = np.zeros((3, max(64, len(trials))), dtype=np.int64)  # i, j, outcome
        self._floats = np.zeros((2, max(64, len(trials))))  # progress of A and of B
        self._tasks: list[str] = []
        for t in trials:
            self.add(t)

    def add(self, t: Trial) -> None:
        if self.n == self._ints.shape[1]:
            self._ints = np.concatenate([self._ints, np.zeros_like(self._ints)], axis=1)
            self._floats = np.concatenate([self._floats, np.zeros_like(self._floats)], axis=1)
        self._ints[:, self.n] = (self._index[t.policy_a], self._index[t.policy_b], outcome_of(t.score_a, t.score_b))
        self._floats[:, self.n] = (t.score_a, t.score_b)
        self._tasks.append(t.task)
        self.n += 1

    def first(self, n: int) -> Comparisons:
        """The first ``n`` results (views of the arrays: later results do not change them)."""
        from ..stats.ranking import Comparisons

        return Comparisons(self.policies, self._ints[0, :n], self._ints[1, :n], self._ints[2, :n],
                           self._floats[0, :n], self._floats[1, :n], tuple(self._tasks[:n]))


def fit_models(names: Sequence[str], data: Comparisons, level: float) -> dict[str, dict[str, Any]]:
    """The rows of every model of ``names`` fitted to ``data`` (:func:`~.rankings.model_rows`)."""
    return {model: model_rows(model, data, level) for model in names}


def fitted_order(data: Comparisons) -> list[str]:
    """The policies of ``data`` by their Bradley-Terry scores, best first (ties by name)."""
    fit = fit_model("bt", data)
    return [p for _, p in sorted(zip(-fit.scores, fit.policies, strict=True))]


class Leaderboard:
    """The leaderboard, built incrementally from journal entries: :meth:`add` then :meth:`snapshot`.

    :param policies: The hub's registered policies (more are taken from ``policy_added`` entries).
    :param method: Anytime-valid method of the pairwise tests (``mixture``, the default, ``nscore``, ``wsr``, ``savi``).
    :param alpha: Family-wise level over all pairs; also ``1 - level`` of the intervals.
    :param ranker: Primary ranking: ``winrate`` or a model of :data:`~.rankings.MODELS`.
    :param models: Ranking models fitted for :meth:`snapshot` (with SEs and intervals).
    :param budget: Results after which the evaluation is over (0: no budget).
    :param family: The pairs' family (:data:`~.family.FAMILIES`: ``declared``, the default, or ``all-pairs``).
    """

    def __init__(self, policies: Sequence[str], *, method: str = "mixture", alpha: float = 0.05,
                 ranker: str = "bt", models: Sequence[str] = MODELS, budget: int = 0,
                 family: str = FAMILIES[0]) -> None:
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
        if family not in FAMILIES:
            raise HubError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        self.design = family
        self.policies = sorted(set(policies))
        self.method, self.alpha, self.ranker, self.models, self.budget = method, alpha, ranker, tuple(models), budget
        self.trials: list[Trial] = []
        self.family: HolmPairs | None = None
        self.as_of_seq = 0
        self.as_of: float | None = None
        #: The Bradley-Terry order last fitted, and on how many results (0: none yet).
        self._fitted_order: tuple[int, list[str]] = (0, list(self.policies))
        self._claims_key = b""
        self._claims_cache: dict[frozenset[str], str] = {}
        self._tally = _Tally(self.policies)
        self._columns = _Columns(self.policies, [])
        #: Fitted models by (results fitted, policies): filled by snapshots, read by later ones.
        self._models: dict[tuple[int, tuple[str, ...]], dict[str, dict[str, Any]]] = {}
        self._models_lock = threading.Lock()
        #: Where fits past :data:`EXACT_MODELS` results run: ``fit_apart(fit_models, *args)`` (the hub: a
        #: worker process at low priority, so that seconds of fitting hold no lease up); ``None``: here.
        self.fit_apart: Callable[..., dict[str, dict[str, Any]]] | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        """A new family over the current policies, every counted result replayed into it."""
        self.family = (HolmPairs(self.policies, method=self.method, alpha=self.alpha, family=self.design)
                       if len(self.policies) > 1 else None)
        self._claims_key = b""
        self._tally = _Tally(self.policies)
        self._columns = _Columns(self.policies, self.trials)
        for t in self.trials:
            self._feed(t)
            self._tally.add(t)
        self._fitted_order = (0, list(self.policies))

    def _count(self, t: Trial) -> None:
        self.trials.append(t)
        self._columns.add(t)
        self._tally.add(t)
        self._feed(t)

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
                if new:  # a result for a policy the journal never registered (a partial export)
                    self.trials.append(t)
                    self.policies = sorted([*self.policies, *new])
                    self._rebuild()
                else:
                    self._count(t)

    # -- progress and the schedule's focus -------------------------------------------------
    def order(self) -> list[str]:
        """The current order, best first: Bradley-Terry scores of the first :func:`refit_point`
        results, then adjacent policies swapped wherever sequential Holm decided the other way."""
        due = self.order_due()
        if due is not None:
            self.install_order(due[0], fitted_order(due[1]))
        return self._swapped(self._fitted_order[1], self._claims())

    def order_due(self) -> tuple[int, Comparisons] | None:
        """The refit of the order that is due, as ``(m, the first m results)`` (to fit with
        :func:`fitted_order`, e.g. outside a lock, and :meth:`install_order`), or ``None``."""
        m = refit_point(len(self.trials))
        return (m, self._columns.first(m)) if m and m != self._fitted_order[0] else None

    def install_order(self, m: int, order: list[str]) -> None:
        """Take the Bradley-Terry order of the first ``m`` results (one assignment: readers in other
        threads see the old order or the new one, never half of each)."""
        if m > self._fitted_order[0]:
            self._fitted_order = (m, order)

    def _swapped(self, fitted: Sequence[str], better: Mapping[frozenset[str], str]) -> list[str]:
        order = [p for p in fitted if p in self.policies] + [p for p in self.policies if p not in fitted]
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
        return self._progress(self.order(), self._claims(), len(self.trials))

    def _progress(self, order: list[str], claims: Mapping[frozenset[str], str], n: int) -> dict[str, Any]:
        adjacent = [{"better": order[k], "worse": order[k + 1],
                     "decided": claims.get(frozenset(order[k:k + 2])) == order[k]} for k in range(len(order) - 1)]
        settled = bool(adjacent) and all(a["decided"] for a in adjacent)
        spent = self.budget > 0 and n >= self.budget
        reason = ("every adjacent pair is decided" if settled else
                  f"the budget of {self.budget} results is spent" if spent else "")
        return {"order": order, "adjacent": adjacent, "settled": settled, "budget": self.budget or None,
                "budget_spent": spent, "finished": settled or spent, "reason": reason, "n_results": n}

    def focus(self, *, refit: bool = True) -> Focus:
        """The ``uncertain`` schedule's view: open pairs, and the open adjacent pairs of :meth:`order`
        (every open pair during the warm-up: :data:`WARM_UP` results per pair, or the family's
        declaring warm-up if longer). ``refit=False``: with
        the order last installed, never fitting one (the hub fits a due order outside its lease lock)."""
        family = self.family
        if family is None:
            return Focus(frozenset(), frozenset())
        claims = self._claims()
        open_ = frozenset((c.policy_a, c.policy_b) for c in family.comparisons if c.pair not in claims)
        if int(family.n.min()) < max(WARM_UP, family.warm_up):
            return Focus(open_, open_)
        order = self.order() if refit else self._swapped(self._fitted_order[1], claims)
        adjacent = {tuple(sorted(order[k:k + 2])) for k in range(len(order) - 1)}
        return Focus(open_, frozenset(pair for pair in open_ if pair in adjacent))

    # -- the board -------------------------------------------------------------------------
    def rankings(self) -> dict[str, dict[str, Any]]:
        """Every model of ``models`` fitted to the first :func:`model_point` counted results (empty
        before the first result)."""
        fitted = self._fitted(self._columns, model_point(len(self.trials)))
        return {model: fitted[model] for model in self.models if model in fitted}

    def _fitted(self, columns: _Columns, m: int) -> dict[str, dict[str, Any]]:
        """The models and the primary ranker fitted to the first ``m`` results (kept for the next read)."""
        if not m or len(columns.policies) < 2:
            return {}
        key = (m, columns.policies)
        names = [*self.models, *([self.ranker] if self.ranker not in (*self.models, "winrate") else [])]
        with self._models_lock:  # one fit at a time; a reader arriving meanwhile takes its result
            if key not in self._models:
                data = columns.first(m)
                apart = self.fit_apart if m > EXACT_MODELS else None
                self._models = {key: apart(fit_models, names, data, 1.0 - self.alpha) if apart is not None
                                else fit_models(names, data, 1.0 - self.alpha)}
            return self._models[key]

    def snapshot(self) -> dict[str, Any]:
        """The leaderboard now (JSON-ready): primary ranking with intervals, every model's ranking,
        every pair's state under sequential Holm, what the family-wise level covers, and progress."""
        return self.capture()()

    def capture(self) -> Callable[[], dict[str, Any]]:
        """What a snapshot needs, taken now in O(policies) (the results' arrays by reference: later
        results do not change them); call the returned function -- without the lock the feeding
        takes -- for :meth:`snapshot` as of this moment."""
        n, columns, tally = len(self.trials), self._columns, self._tally.copy()
        family = self.family
        head = {"n_results": n, "as_of_seq": self.as_of_seq, "as_of": self.as_of, "method": self.method,
                "alpha": self.alpha, "ranker": self.ranker}
        statement = family.statement() if family is not None else {
            "procedure": "sequential Holm", "design": self.design, "pairs": 0, "hypotheses": 0, "alpha": self.alpha,
            "method": self.method}
        pairs = [row.to_dict() for row in family.rows()] if family is not None else []
        claims, due, fitted_order_now = self._claims(), self.order_due(), self._fitted_order[1]

        def render() -> dict[str, Any]:
            fitted_order_then = fitted_order_now
            if due is not None:  # fitted here, outside the caller's lock, and kept for the leases
                fitted_order_then = fitted_order(due[1])
                self.install_order(due[0], fitted_order_then)
            progress = self._progress(self._swapped(fitted_order_then, claims), claims, n)
            m = model_point(n)
            fitted = self._fitted(columns, m)
            models = {model: fitted[model] for model in self.models if model in fitted}
            ranking = _win_rows(tally)
            bands = _intervals(columns.first(n), self.alpha)
            for row in ranking:
                row.update(bands.get(row["policy"], {}))
            if self.ranker != "winrate" and n:
                model = {row["policy"]: row for row in fitted[self.ranker]["rows"]}
                ranking.sort(key=lambda row: model[row["policy"]]["rank"])
                for rank, row in enumerate(ranking, 1):
                    fitted = model[row["policy"]]
                    row.update(rank=rank, score=fitted["score"], se=fitted["se"], low=fitted["low"], high=fitted["high"])
            return {**head, "ranking": ranking, "models": models, "models_as_of": m, "family": statement,
                    "pairs": pairs, "progress": progress}

        return render


def leaderboard(policies: Sequence[str], entries: Iterable[Mapping[str, Any]], *, method: str = "mixture",
                alpha: float = 0.05, ranker: str = "bt", models: Sequence[str] = MODELS,
                budget: int = 0, family: str = FAMILIES[0]) -> dict[str, Any]:
    """The leaderboard of the journal ``entries`` in one go (what ``evalstop hub analyze`` prints)."""
    board = Leaderboard(policies, method=method, alpha=alpha, ranker=ranker, models=models, budget=budget,
                        family=family)
    board.add(list(entries))
    return board.snapshot()
