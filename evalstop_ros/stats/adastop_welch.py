r"""AdaStop's Welch statistic and the null-centred bootstrap test run beside each permutation test.

Seed 002 with Welch (1947) and Hall and Wilson (1991); why both tests are required is in
docs/adastop.md and docs/statistics.md, with the skewness correction of the bootstrap test
(Hall 1992, :func:`hall_transform`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .hall import hall_cubic

__all__ = ["CHUNK", "HALL_SLOPE_MAX", "SKEWNESS", "SMALL_SAMPLE", "SPREAD_RATIO", "WelchReference", "difference_skewness",
           "hall_transform", "row_chunks", "shared_skewness", "spend_interim", "spread_warning", "welch_z", "welch_z_squared"]

#: Slack (in paths) of ``floor(level * B)``: the spent level is a sum of ratios.
_COUNT_TOL = 1e-9
#: Values (tests or comparisons times paths) of one array pass over many tests: their memory is a few such arrays.
CHUNK = 1 << 16
#: Largest / smallest standard deviation among compared agents above which, with fewer than
#: :data:`SMALL_SAMPLE` scores per agent, :func:`spread_warning` warns (docs/adastop.md: the study's
#: worlds with ratios 6.7-10 at 3-10 scores per interim).
SPREAD_RATIO = 3.0
#: Scores per agent below which unequal spreads leave equal-mean decisions to the bootstrap's approximation.
SMALL_SAMPLE = 20
#: Sample skewness (in absolute value) above which, at small N, Welch's t is itself skewed and the
#: equal-mean decisions are least reliable (docs/adastop.md: the study's exponential-like gamma row).
SKEWNESS = 1.0
#: Largest coefficient ``|a|`` of :func:`hall_transform`: its slope ``(1 + a z)^2`` stays >= 1/4 for
#: ``|z| <= 5`` (docs/adastop.md: the skewed row of the study measured 0.061 uncapped, 0.062 at 0.1).
HALL_SLOPE_MAX = 0.1
#: Within-agent sums of squares below this fraction of the raw ones are rounding noise: equal scores.
_SPREAD_RTOL = 1e-12


def welch_z(
    sums: NDArray[np.float64], squares: NDArray[np.float64], first: NDArray[np.intp], second: NDArray[np.intp],
    count: int,
) -> NDArray[np.float64]:
    r"""Welch's studentized mean difference of each comparison, on the normal scale; ``(J, B)``.

    ``sums`` and ``squares`` are ``(agents, B)`` per-agent sums and sums of squares of ``count``
    scores each; comparison ``j`` is agents ``first[j]`` and ``second[j]``.  With the unbiased
    variances :math:`v_1, v_2`, Welch's statistic and Satterthwaite's degrees of freedom are

    .. math::

        t = \frac{\bar x_1 - \bar x_2}{\sqrt{(v_1 + v_2) / n}}, \qquad
        \hat\nu = \frac{(n - 1) (v_1 + v_2)^2}{v_1^2 + v_2^2} \in [n - 1, 2 n - 2],

    and :math:`|t|` is mapped to the normal deviate of its :math:`t_{\hat\nu}` tail by Wallace's
    (1959) transformation :math:`z = \frac{8\hat\nu + 1}{8\hat\nu + 3}
    \sqrt{\hat\nu \log(1 + t^2/\hat\nu)}` (a Welch test's p-value, computed in a few array
    passes).  A pair whose agents each have equal scores gets ``inf`` if their means differ, else 0;
    with one score per agent (no variance) every statistic is 0.
    """
    return np.sqrt(welch_z_squared(sums, squares, first, second, count))


def welch_z_squared(
    sums: NDArray[np.float64], squares: NDArray[np.float64], first: NDArray[np.intp], second: NDArray[np.intp],
    count: int,
) -> NDArray[np.float64]:
    r"""The square of :func:`welch_z`, in a few in-place array passes (a maximum needs no square root).

    With :math:`D = \sum x_1 - \sum x_2` and the within-agent sums of squares :math:`SS_l = (n - 1) v_l`,
    :math:`t^2/\hat\nu = D^2 (SS_1^2 + SS_2^2) / (n (SS_1 + SS_2)^3)`.
    """
    if count < 2:
        return np.zeros((len(first), sums.shape[1]))
    within = np.square(sums)
    within /= -count
    within += squares  # per agent: sum of squared deviations (the variances times n - 1: the scale cancels)
    constant = within <= _SPREAD_RTOL * squares  # per agent: its scores all equal (up to rounding)
    np.maximum(within, 0.0, out=within)
    power = np.square(within)
    total = within[first]
    total += within[second]  # T = SS_1 + SS_2
    spread = power[first]
    spread += power[second]  # S = SS_1^2 + SS_2^2
    difference = sums[first]
    difference -= sums[second]
    np.square(difference, out=difference)  # D^2, D = n (mean_1 - mean_2)
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.square(total)
        ratio = np.multiply(difference, spread)
        ratio /= count
        spread /= nu  # S / T^2
        nu *= total  # T^3
        ratio /= nu  # t^2 / nu = D^2 S / (n T^3)
        z_square = np.log1p(ratio, out=ratio)
        np.divide(count - 1, spread, out=nu)  # nu = (n - 1) T^2 / S
        z_square *= nu
        nu *= 8
        nu += 3
        np.divide(2.0, nu, out=nu)
        np.subtract(1.0, nu, out=nu)  # (8 nu + 1) / (8 nu + 3)
        np.square(nu, out=nu)
        z_square *= nu
    degenerate = constant[first] & constant[second]
    if degenerate.any():  # each agent's scores all equal: a sure difference, or none
        differs = difference > _SPREAD_RTOL * count * (squares[first] + squares[second])
        z_square[degenerate] = np.where(differs[degenerate], np.inf, 0.0)
    return z_square


def shared_skewness(history: NDArray[np.float64]) -> float:
    """The bias-adjusted sample skewness ``G1`` of the most skewed agent (rows of ``history``), 0 if none.

    ``G1 = g1 sqrt(n (n - 1)) / (n - 2)`` (Joanes and Gill 1998, the adjusted Fisher-Pearson
    coefficient), sign kept, over the agents whose scores are not all equal; ``n >= 3`` scores.
    One value for all: agents scored in one evaluation share the kind of their scores (returns,
    durations, progress), and an agent whose few scores missed a long tail shows no skew itself.
    """
    count = history.shape[1]
    if count < 3 or not history.size:
        return 0.0
    deviation = history - history.mean(axis=1, keepdims=True)
    m2 = np.mean(np.square(deviation), axis=1)
    m3 = np.mean(deviation**3, axis=1)
    varied = m2 > _SPREAD_RTOL * np.mean(np.square(history), axis=1)
    if not varied.any():
        return 0.0
    g1 = m3[varied] / m2[varied] ** 1.5 * math.sqrt(count * (count - 1)) / (count - 2)
    return float(g1[np.argmax(np.abs(g1))])


def hall_transform(z: NDArray[np.float64], skew: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Hall's (1992) skewness-removing transformation of studentized statistics ``z`` (``(J, B)``, signed).

    ``skew`` (``(J,)``) is the skewness :math:`\gamma_D` of each comparison's mean difference; with
    :math:`a = \gamma_D / 3`, :math:`g(z) = z + a z^2 + a^2 z^3 / 3 + a / 2 = ((1 + a z)^3 - 1) / (3 a) + a / 2`,
    monotone for every :math:`a` (the first two terms and the constant are Johnson's 1978
    correction of t, whose Edgeworth term for a skewed mean is :math:`\gamma (2 z^2 + 1) / 6`).
    :math:`|a|` is capped at :data:`HALL_SLOPE_MAX`: the expansion holds for small :math:`a z`, and at
    :math:`z = -1/a` the cubic is flat, which would bury a clear difference in the discounted direction.
    """
    a = np.clip(np.asarray(skew, dtype=np.float64) / 3.0, -HALL_SLOPE_MAX, HALL_SLOPE_MAX)[:, None]
    z = np.asarray(z, dtype=np.float64)
    return np.where(np.isinf(z), z, hall_cubic(z, a))


def difference_skewness(history: NDArray[np.float64], first: NDArray[np.intp], second: NDArray[np.intp],
                        skew: float) -> NDArray[np.float64]:
    r"""Skewness of each comparison's mean difference when every agent's scores have skewness ``skew``.

    With ``n`` scores each and sample variances :math:`v_l`: :math:`\gamma_D = \gamma (v_1^{3/2} -
    v_2^{3/2}) / (\sqrt{n} (v_1 + v_2)^{3/2})` (third cumulant of :math:`\bar x_1 - \bar x_2` over its
    variance to the power 3/2); 0 when both agents' scores are constant.
    """
    count = history.shape[1]
    if count < 2 or skew == 0.0:
        return np.zeros(len(first))
    v = history.var(axis=1, ddof=1)
    total = v[first] + v[second]
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = skew * (v[first] ** 1.5 - v[second] ** 1.5) / (math.sqrt(count) * total**1.5)
    return np.where(total > 0, gamma, 0.0)


def spend_interim(
    statistic: NDArray[np.float64], alive: NDArray[np.bool_], spent: NDArray[np.float64], *, k: int, alpha: float,
    n_interims: int,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """One interim of group-sequential Monte Carlo or permutation tests, a test per row (seed 002 Eqs. 10-12).

    ``statistic`` ``(T, B)`` holds each test's ``B`` paths' values, path 0 the observed data;
    ``alive`` ``(T, B)`` the paths that stayed within every earlier boundary and ``spent`` ``(T,)``
    the level spent so far (both updated in place).  A boundary is the smallest value whose
    exceedances among the survivors keep the spent level at most ``k alpha / K``: an order statistic
    of the survivors (found by selection, ``np.partition``); ``inf`` when the allowance rounds to no
    path.  Returns the boundaries and whether each test's path 0 crossed (strictly).
    """
    tests, b = statistic.shape
    allowed = np.floor((k * alpha / n_interims - spent) * b + _COUNT_TOL)
    survivors = np.count_nonzero(alive, axis=1)
    take = np.minimum(np.maximum(allowed, 0), survivors - 1).astype(np.intp)  # exceedances the boundary leaves
    column = b - 1 - take  # the survivor with ``take`` above it, the dead (-inf) first
    ordered = np.partition(np.where(alive, statistic, -np.inf), np.unique(column), axis=1)
    boundary = ordered[np.arange(tests), column]
    spending = allowed > 0
    boundary[~spending] = np.inf
    spent += np.count_nonzero(alive & (statistic > boundary[:, None]), axis=1) / b
    alive &= (statistic <= boundary[:, None]) | ~spending[:, None]
    return boundary, statistic[:, 0] > boundary


def row_chunks(rows: NDArray[np.intp], width: int, b: int) -> list[NDArray[np.intp]]:
    """``rows`` in runs whose gathered ``(rows, width, B)`` statistics hold at most about :data:`CHUNK` values."""
    size = max(1, CHUNK // max(1, width * b))
    return [rows[i:i + size] for i in range(0, len(rows), size)]


class WelchReference:
    """The bootstrap test of every intersection hypothesis, beside the permutation test (module docstring).

    Parameters
    ----------
    comparisons : sequence of (int, int)
        The comparisons as agent index pairs.
    groups : sequence of int arrays
        Sets of comparisons that intersection hypotheses share (the closed test's blocks).
    tests : sequence of int sequences
        Per intersection hypothesis, its groups: it holds their comparisons, and its statistic
        is their largest :func:`welch_z` (the largest of its groups' largest).
    n_agents, n_per_interim, n_interims, alpha, n_permutations, seed :
        As in :class:`~evalstop_ros.stats.adastop.AdaStop`; the resampling indices are drawn
        from ``seed`` (a stream of their own).

    Notes
    -----
    Path 0 is the observed data.  A path's interim-``k`` scores come from the bootstrap law of
    interim ``k`` (all scores so far), its earlier ones from the earlier interims' laws: the
    boundaries of interims already analysed are never revised.  At each interim every path's
    statistics go through :func:`hall_transform` with the skewness of the observed scores (one
    coefficient per comparison for all paths: a resample of five scores gives no usable skewness).
    Cost per interim: one draw of ``L N (B - 1)`` indices and a gather, as the normal draws it replaces.
    """

    def __init__(
        self, comparisons: Sequence[tuple[int, int]], groups: Sequence[NDArray[np.intp]], tests: Sequence[Sequence[int]],
        *, n_agents: int, n_per_interim: int, n_interims: int, alpha: float, n_permutations: int, seed: int,
    ) -> None:
        pairs = np.asarray(comparisons, dtype=np.intp)
        self._first, self._second = pairs[:, 0], pairs[:, 1]
        self.groups = [np.asarray(g, dtype=np.intp) for g in groups]
        #: ``(tests, most groups)``: each test's groups, padded with its first (a maximum ignores repeats)
        self._tests = np.array([np.resize(t, max(map(len, tests))) for t in tests], dtype=np.intp)
        self.n_agents, self.n, self.k_max, self.alpha, self.b = n_agents, n_per_interim, n_interims, alpha, n_permutations
        self._rng = np.random.default_rng([seed, 0x57E1C4])
        #: ``(L, k N)`` every agent's scores so far (the bootstrap's sample; 0 once out of the rotation)
        self._history = np.zeros((n_agents, 0))
        #: ``(L, B)`` per agent: sums and sums of squares, column 0 the observed (centred) scores
        self._sums = np.zeros((n_agents, self.b))
        self._squares = np.zeros((n_agents, self.b))
        self.crossed = np.zeros(len(tests), dtype=bool)
        self.alive = np.ones((len(tests), self.b), dtype=bool)
        self.spent = np.zeros(len(tests))
        self.boundary = np.full(len(tests), math.inf)
        self.interim = 0

    def update(self, block: NDArray[np.float64], open_tests: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Interim ``k``: ``block`` ``(L, N)`` scores, centred (0 for agents no longer run); the tests crossed so far.

        Each reference path's interim-``k`` scores are drawn with replacement from the agent's own
        scores so far, centred at the agent's mean (Hall and Wilson 1991: resample under the null,
        studentize).  Only ``open_tests`` (still needed, not yet crossed here) are updated.
        """
        k, n, b = self.interim + 1, self.n, self.b
        self._history = np.concatenate([self._history, block], axis=1)
        centred = self._history - self._history.mean(axis=1, keepdims=True)  # each agent at mean 0: the null
        picks = self._rng.integers(0, k * n, size=(self.n_agents, n * (b - 1)))
        draws = np.take_along_axis(centred, picks, axis=1).reshape(self.n_agents, n, b - 1)
        self._sums[:, 0] += block.sum(axis=1)
        self._squares[:, 0] += np.square(block).sum(axis=1)
        self._sums[:, 1:] += draws.sum(axis=1)
        self._squares[:, 1:] += np.einsum("lnb,lnb->lb", draws, draws)
        self.boundary[:] = math.inf
        todo = np.flatnonzero(open_tests & ~self.crossed)
        if todo.size:
            needed = np.unique(self._tests[todo])
            used = np.unique(np.concatenate([self.groups[g] for g in needed]))
            z = np.zeros((len(self._first), b))
            first, second = self._first[used], self._second[used]
            sign = np.sign(self._sums[first] - self._sums[second])
            z_signed = sign * np.sqrt(welch_z_squared(self._sums, self._squares, first, second, k * n))
            agents = np.unique(np.concatenate([first, second]))  # all still scored (their tests are open)
            skew = shared_skewness(self._history[agents])
            z[used] = np.abs(hall_transform(z_signed, difference_skewness(self._history, first, second, skew)))
            largest = np.zeros((len(self.groups), b))  # per group (the groups no open test holds: unused)
            for g in needed:
                largest[g] = z[self.groups[g]].max(axis=0)
            for rows in row_chunks(todo, self._tests.shape[1], b):
                alive, spent = self.alive[rows], self.spent[rows]
                self.boundary[rows], self.crossed[rows] = spend_interim(
                    largest[self._tests[rows]].max(axis=1), alive, spent, k=k, alpha=self.alpha, n_interims=self.k_max)
                self.alive[rows], self.spent[rows] = alive, spent
        self.interim = k
        return self.crossed.copy()


def spread_warning(
    scores: NDArray[np.float64], n_scores: Sequence[int], agents: Sequence[str], comparisons: Sequence[tuple[int, int]],
) -> str | None:
    """One line when equal-mean decisions rest on a weak approximation, else None (docs/adastop.md).

    ``scores`` is the ``(rows, L)`` table in interim order; agent ``l`` used its first ``n_scores[l]``
    rows.  With fewer than :data:`SMALL_SAMPLE` scores per agent, warns when the compared agents'
    standard deviations differ by more than :data:`SPREAD_RATIO`, or when with such spreads one
    agent's sample skewness exceeds :data:`SKEWNESS` in absolute value.
    """
    used = sorted({l for pair in comparisons for l in pair})
    fewest = min(n_scores[l] for l in used)
    columns = {l: scores[: n_scores[l], l] for l in used if n_scores[l] >= 3}
    spread = {l: float(np.std(x, ddof=1)) for l, x in columns.items()}
    positive = {l: sd for l, sd in spread.items() if sd > 0}
    if fewest >= SMALL_SAMPLE or len(positive) < 2:
        return None
    low, high = min(positive, key=positive.__getitem__), max(positive, key=positive.__getitem__)
    ratio = positive[high] / positive[low]
    if ratio <= SPREAD_RATIO:
        return None
    skew = {l: float(np.mean((columns[l] - columns[l].mean()) ** 3)) / float(np.std(columns[l])) ** 3 for l in positive}
    worst = max(skew, key=lambda l: abs(skew[l]))
    skewed = f"; {agents[worst]}'s scores are skewed ({skew[worst]:+.1f})" if abs(skew[worst]) > SKEWNESS else ""
    return (f"warning: spreads differ {ratio:.1f}x (sd {positive[low]:.3g} of {agents[low]}, {positive[high]:.3g} "
            f"of {agents[high]}) with {fewest} scores per agent{skewed}: for equal means the decisions rest on "
            f"a bootstrap of Welch's statistic, not on the exact permutation law (docs/adastop.md)")
