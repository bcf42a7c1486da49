"""Rank quality against an oracle (Pearson, MMRV; seed 001 Sec. 5.2), a RoboArena-like simulator, sample-efficiency curves."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import expit

from .errors import StatsInputError
from .ranking import Comparisons, FloatArray, Ranking, comparisons

__all__ = [
    "ArenaWorld", "Coverage", "EfficiencyCurve", "coverage_of", "efficiency_curve", "interval_coverage", "mmrv", "pearson",
    "simulate_arena",
]


def _pair(scores: ArrayLike, oracle: ArrayLike) -> tuple[FloatArray, FloatArray]:
    m = np.asarray(scores, dtype=np.float64)
    o = np.asarray(oracle, dtype=np.float64)
    if m.shape != o.shape or m.ndim != 1 or m.size < 2:
        raise StatsInputError(f"`scores` and `oracle` must be 1-D of equal length >= 2; found {m.shape} and {o.shape}")
    if not (np.isfinite(m).all() and np.isfinite(o).all()):
        raise StatsInputError("`scores` and `oracle` must be finite")
    return m, o


def pearson(scores: ArrayLike, oracle: ArrayLike) -> float:
    """Pearson correlation of ``scores`` with ``oracle`` (seed 001 Sec. 5.2); 0 for constant scores.

    >>> round(pearson([1.0, 2.0, 3.0], [0.1, 0.2, 0.4]), 3)
    0.982
    """
    m, o = _pair(scores, oracle)
    if np.ptp(m) == 0.0 or np.ptp(o) == 0.0:
        return 0.0
    return float(stats.pearsonr(m, o).statistic)


def mmrv(scores: ArrayLike, oracle: ArrayLike) -> float:
    """Mean Maximum Rank Violation of ``scores`` against ``oracle`` (seed 001 Sec. 5.2; lower is better).

    >>> mmrv([1.0, 2.0, 3.0], [0.1, 0.2, 0.4]), mmrv([2.0, 1.0, 3.0], [0.1, 0.2, 0.4])
    (0.0, 0.06666666666666667)
    """
    m, o = _pair(scores, oracle)
    violated = (m[:, None] < m[None, :]) != (o[:, None] < o[None, :])
    return float((np.abs(o[:, None] - o[None, :]) * violated).max(axis=1).mean())


@dataclasses.dataclass(frozen=True)
class ArenaWorld:
    """A planted RoboArena-like world (task types, difficulties, specialists, evaluator noise).

    Policy ``p`` on task type ``k`` succeeds with ``q = sigma(ability_p + special_{p,k} -
    difficulty_k)``.  A failed rollout still makes partial progress ``U(0, partial_max)``.  The
    evaluator prefers the rollout with more progress, ties when the two differ by less than
    ``tie_margin`` (both succeed, or both fail alike), and reports progress with a per-evaluator
    calibration offset (SD ``evaluator_sd``, shared by the pair) plus noise (SD ``noise_sd``),
    clipped to [0, 1] and rounded to 0.05, as a 0-100 slider would be.

    ``pair_weight`` (N,) makes the pairing imbalanced: each comparison draws its two policies
    without replacement with probabilities proportional to ``pair_weight`` (uniform when
    ``None``); ``flip`` is the probability that the evaluator reports the opposite preference
    (A and B swapped, ties kept), a careless or adversarial click.  ``harshness`` (N,) confounds
    evaluators with policies: the calibration offset of a comparison has mean
    ``-(harshness[A] + harshness[B]) / 2`` (some policies are mostly run by harsh graders), which
    moves reported progress but not the preference (made on what was seen).

    ``drift`` models a campaign whose tasks follow the capability frontier (seed 001 Sec. 1,
    "adaptable"): comparison ``n`` of ``M`` has every difficulty shifted by
    ``drift * (n / M - 1/2)``, and policy ``p`` joins the pool at ``entry[p] * M`` (pairs are drawn
    among the policies present).  The oracle is taken at zero shift.
    """

    ability: FloatArray
    special: FloatArray  # (N, K)
    difficulty: FloatArray  # (K,)
    type_weight: FloatArray  # (K,)
    partial_max: float = 0.7
    tie_margin: float = 0.1
    evaluator_sd: float = 0.15
    noise_sd: float = 0.1
    drift: float = 0.0
    entry: FloatArray | None = None
    pair_weight: FloatArray | None = None
    flip: float = 0.0
    harshness: FloatArray | None = None

    @classmethod
    def planted(cls, rng: np.random.Generator, *, n_policies: int = 7, n_types: int = 8,
                task_effects: bool = True, drift: float = 0.0) -> ArenaWorld:
        """A random world; ``task_effects=False`` removes specialists and varying difficulty.

        With ``drift``, policies join at times spread evenly over the first half of the campaign.
        """
        ability = rng.normal(0.0, 0.8, n_policies)
        entry = rng.permutation(np.linspace(0.0, 0.5, n_policies)) if drift else None
        if not task_effects:
            return cls(ability, np.zeros((n_policies, 1)), np.zeros(1), np.ones(1), drift=drift, entry=entry)
        special = rng.normal(0.0, 1.5, (n_policies, n_types))
        special -= special.mean(axis=1, keepdims=True)  # specialists: strong on some types, weak on others
        difficulty = np.linspace(-2.5, 2.5, n_types)  # from easy (both solve) to hard (both fail)
        return cls(ability, special, difficulty, np.full(n_types, 1.0 / n_types), drift=drift, entry=entry)

    @classmethod
    def hard(cls, rng: np.random.Generator, *, n_policies: int = 15, n_types: int = 8) -> ArenaWorld:
        """A RoboArena-like hard world for coverage: specialists, heavily imbalanced pairing (the
        most-paired policy is drawn ~20 times as often as the least), rare task types (weights
        falling geometrically by half), 8 % flipped preferences and slider progress.
        """
        base = cls.planted(rng, n_policies=n_policies, n_types=n_types)
        weight = rng.permutation(0.5 ** np.arange(n_types))  # rarity independent of difficulty
        pairing = np.exp(rng.permutation(np.linspace(0.0, np.log(20.0), n_policies)))
        return dataclasses.replace(base, type_weight=weight / weight.sum(), pair_weight=pairing / pairing.sum(),
                                   flip=0.08)

    def solve_rates(self) -> FloatArray:
        """``q[p, k]``."""
        return np.asarray(expit(self.ability[:, None] + self.special - self.difficulty[None, :]))

    def oracle(self) -> FloatArray:
        """Expected progress of each policy over the task distribution (seed 001 Sec. 5.1's oracle)."""
        q = self.solve_rates()
        return np.asarray((q + (1.0 - q) * self.partial_max / 2.0) @ self.type_weight)


def simulate_arena(world: ArenaWorld, n_comparisons: int, rng: np.random.Generator) -> Comparisons:
    """Draw ``n_comparisons`` A/B comparisons (uniform random pairs and task types) from ``world``."""
    n = world.ability.size
    time = np.arange(n_comparisons) / max(n_comparisons, 1)
    entry = np.zeros(n) if world.entry is None else world.entry
    first = np.empty(n_comparisons, dtype=np.int64)
    second = np.empty(n_comparisons, dtype=np.int64)
    if world.pair_weight is not None and world.entry is None:  # stationary weighted pairing, vectorised
        first[:] = rng.choice(n, n_comparisons, p=world.pair_weight)
        second[:] = first
        clash = np.ones(n_comparisons, dtype=bool)
        while clash.any():  # the second policy: drawn by weight among the others (rejection)
            second[clash] = rng.choice(n, int(clash.sum()), p=world.pair_weight)
            clash = second == first
    for row, now in enumerate(time if world.pair_weight is None or world.entry is not None else ()):
        present = np.flatnonzero(entry <= now)
        if present.size < 2:
            present = np.argsort(entry)[:2]
        weight = None if world.pair_weight is None else world.pair_weight[present] / world.pair_weight[present].sum()
        first[row], second[row] = rng.choice(present, 2, replace=False, p=weight)
    kind = rng.choice(world.type_weight.size, n_comparisons, p=world.type_weight)
    shift = world.drift * (time - 0.5)
    logit = world.ability[:, None] + world.special - world.difficulty[None, :]
    progress = []
    for who in (first, second):
        success = rng.random(n_comparisons) < expit(logit[who, kind] - shift)
        progress.append(np.where(success, 1.0, rng.uniform(0.0, world.partial_max, n_comparisons)))
    gap = progress[0] - progress[1]
    preference = np.where(gap > world.tie_margin, "A", np.where(gap < -world.tie_margin, "B", "tie"))
    if world.flip > 0.0:
        flipped = rng.random(n_comparisons) < world.flip
        preference = np.where(flipped & (preference == "A"), "B",
                              np.where(flipped & (preference == "B"), "A", preference))
    bias = rng.normal(0.0, world.evaluator_sd, n_comparisons)
    if world.harshness is not None:
        bias -= (world.harshness[first] + world.harshness[second]) / 2.0
    seen = [
        np.round(np.clip(true + bias + rng.normal(0.0, world.noise_sd, n_comparisons), 0.0, 1.0) * 20.0) / 20.0
        for true in progress
    ]
    names = [f"policy_{p}" for p in range(n)]
    return comparisons(
        [names[p] for p in first], [names[p] for p in second], preference.tolist(),
        progress_a=seen[0], progress_b=seen[1], tasks=[f"type_{k}" for k in kind], policies=names,
    )


@dataclasses.dataclass(frozen=True)
class EfficiencyCurve:
    """Mean and SE over repetitions of Pearson r and MMRV per model and sample size (seed 001 Fig. 7).

    ``*_diff`` / ``*_diff_se``: the paired difference (``paired_with`` model minus this model,
    same data) and its SE; empty without ``paired_with``.
    """

    sizes: tuple[int, ...]
    pearson_mean: dict[str, FloatArray]
    pearson_se: dict[str, FloatArray]
    mmrv_mean: dict[str, FloatArray]
    mmrv_se: dict[str, FloatArray]
    pearson_diff: dict[str, FloatArray] = dataclasses.field(default_factory=dict)
    pearson_diff_se: dict[str, FloatArray] = dataclasses.field(default_factory=dict)
    mmrv_diff: dict[str, FloatArray] = dataclasses.field(default_factory=dict)
    mmrv_diff_se: dict[str, FloatArray] = dataclasses.field(default_factory=dict)


def efficiency_curve(
    world_factory: Callable[[np.random.Generator], ArenaWorld],
    fitters: dict[str, Callable[[Comparisons], Ranking]],
    sizes: Sequence[int],
    *,
    reps: int,
    seed: int = 0,
    paired_with: str | None = None,
) -> EfficiencyCurve:
    """Rank quality against the number of comparisons, averaged over ``reps`` planted worlds.

    Each repetition draws a world and one stream of ``max(sizes)`` comparisons; every size uses
    the stream's first ``n`` comparisons (nested subsets, as data arrive in a campaign), so the
    models are compared on the same data (paired, which shrinks the SE of their differences).
    """
    rng = np.random.default_rng(seed)
    shape = (reps, len(sizes))
    r_values = {name: np.zeros(shape) for name in fitters}
    v_values = {name: np.zeros(shape) for name in fitters}
    for rep in range(reps):
        world = world_factory(rng)
        data = simulate_arena(world, max(sizes), rng)
        oracle = world.oracle()
        for col, size in enumerate(sizes):
            part = data.subset(np.arange(size))
            for name, fit in fitters.items():
                raw = fit(part).scores
                scores = np.where(np.isnan(raw), np.nanmin(raw), raw)  # an unseen policy ranks last
                r_values[name][rep, col] = pearson(scores, oracle)
                v_values[name][rep, col] = mmrv(scores, oracle)

    def se(values: FloatArray) -> FloatArray:
        return np.asarray(values.std(axis=0, ddof=1) / np.sqrt(reps)) if reps > 1 else np.full(len(sizes), np.nan)

    def diffs(values: dict[str, FloatArray]) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
        if paired_with is None:
            return {}, {}
        base = values[paired_with]
        return ({k: (base - v).mean(axis=0) for k, v in values.items() if k != paired_with},
                {k: se(base - v) for k, v in values.items() if k != paired_with})

    return EfficiencyCurve(
        tuple(sizes),
        {k: v.mean(axis=0) for k, v in r_values.items()}, {k: se(v) for k, v in r_values.items()},
        {k: v.mean(axis=0) for k, v in v_values.items()}, {k: se(v) for k, v in v_values.items()},
        *diffs(r_values), *diffs(v_values),
    )


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How often a model's intervals ``score +- z se`` cover its estimand.

    ``coverage`` is the mean over datasets of the fraction of policies covered, ``coverage_se``
    its Monte Carlo SE (datasets are independent; the policies within one are not, so the SE is
    taken over datasets).  ``se_ratio`` is, per policy, the mean reported SE over the true SD of
    the score across datasets (1 = calibrated).  ``hit`` is, per dataset and policy, 1 where the
    interval covers, 0 where it misses and NaN where the policy has no SE.
    """

    level: float
    reps: int
    coverage: float
    coverage_se: float
    se_ratio: FloatArray
    hit: FloatArray


def interval_coverage(
    world: ArenaWorld, fit: Callable[[Comparisons], Ranking], n_comparisons: int, *, reps: int,
    level: float = 0.95, seed: int = 0, progress: Callable[[int, int], None] | None = None,
) -> Coverage:
    """Simulate ``reps`` datasets of ``n_comparisons`` from one ``world`` and score ``fit``'s intervals.

    The estimand of a model is what its score converges to on data from ``world`` (BT's
    log-abilities of the best-fitting BT model, PROG's expected reported progress, ...), not the
    oracle: every model estimates its own quantity, and an interval is calibrated when it covers
    that.  The intervals are the ranking's own (:meth:`~.ranking.Ranking.interval`).  It is approximated by the mean score over the ``reps`` datasets (which adds a relative
    ``1/reps`` to the variance of the miss distance, negligible at the sizes used).
    """
    if not 0.0 < level < 1.0:
        raise StatsInputError(f"`level` must lie in (0, 1); found {level!r}")
    if reps < 2:
        raise StatsInputError(f"`reps` must be at least 2; found {reps!r}")
    rng = np.random.default_rng(seed)
    scores, errors, lows, highs = [], [], [], []
    for rep in range(reps):
        ranking = fit(simulate_arena(world, n_comparisons, rng))
        low, high = ranking.interval(level)
        scores.append(ranking.scores)
        errors.append(ranking.se)
        lows.append(low)
        highs.append(high)
        if progress is not None:
            progress(rep + 1, reps)
    return coverage_of(np.asarray(scores), np.asarray(errors), np.asarray(lows), np.asarray(highs), level)


def coverage_of(score: FloatArray, error: FloatArray, low: FloatArray, high: FloatArray, level: float) -> Coverage:
    """Score intervals already computed, one row per dataset (:func:`interval_coverage`'s tally).

    The estimand is the mean score over the rows; ``bench/ranking_coverage_pool.py`` uses it on
    saved cells of several batches.
    """
    centre = np.nanmean(score, axis=0)
    hit = np.where(np.isnan(error), np.nan, ((low <= centre) & (centre <= high)).astype(float))
    covered = np.nanmean(hit, axis=1)
    return Coverage(
        level, len(score), float(covered.mean()), float(covered.std(ddof=1) / np.sqrt(len(score))),
        np.asarray(np.nanmean(error, axis=0) / np.nanstd(score, axis=0, ddof=1)), hit,
    )
