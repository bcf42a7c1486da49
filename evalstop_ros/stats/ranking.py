"""Pairwise A/B comparisons and the ranking fitted to them (seed 001, RoboArena, Sec. 3.2, App. B.5).

:class:`Comparisons` in, a :class:`Ranking` with intervals out; the models are in :mod:`.ranking_fits`
and :mod:`.ranking_task`, coverage in docs/ranking.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .hall import hall_cubic_inverse

__all__ = ["PREFERENCES", "Comparisons", "FloatArray", "IntArray", "Ranking", "comparisons"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
#: Preference labels and their outcome code y (seed 001 App. B.1: 0 = loss, 1 = tie, 2 = win of A).
PREFERENCES = {"B": 0, "tie": 1, "A": 2}


@dataclasses.dataclass(frozen=True)
class Comparisons:
    """Pairwise A/B outcomes over a fixed pool of policies.

    Attributes
    ----------
    policies : tuple of str
        The pool; ``i`` and ``j`` index it.
    i, j : int arrays, shape (M,)
        Policy under label A and under label B in each comparison (never equal).
    outcome : int array, shape (M,)
        ``y`` in {0, 1, 2}: B preferred, tie, A preferred.
    progress_a, progress_b : float arrays, shape (M,)
        Progress of A and B in [0, 1] (the paper's 0-100 score / 100), NaN where not recorded.
    tasks : tuple of str
        The task instruction of each comparison (``""`` where not recorded).
    """

    policies: tuple[str, ...]
    i: IntArray
    j: IntArray
    outcome: IntArray
    progress_a: FloatArray
    progress_b: FloatArray
    tasks: tuple[str, ...]

    @property
    def n_policies(self) -> int:
        """Size of the pool."""
        return len(self.policies)

    def __len__(self) -> int:
        return int(self.i.size)

    def subset(self, index: ArrayLike) -> Comparisons:
        """The comparisons at ``index`` (same pool), e.g. a bootstrap resample or a prefix."""
        rows = np.asarray(index, dtype=np.int64)
        return Comparisons(
            self.policies, self.i[rows], self.j[rows], self.outcome[rows], self.progress_a[rows],
            self.progress_b[rows], tuple(self.tasks[k] for k in rows),
        )

    def win_matrix(self) -> tuple[FloatArray, IntArray]:
        """``(wins, games)``: ``wins[p, q]`` counts p preferred over q (ties count 1/2 to each).

        ``games[p, q]`` counts comparisons of p with q in either role; win rate = wins / games.
        """
        n = self.n_policies
        wins = np.zeros((n, n))
        games = np.zeros((n, n), dtype=np.int64)
        score_a = self.outcome / 2.0
        np.add.at(wins, (self.i, self.j), score_a)
        np.add.at(wins, (self.j, self.i), 1.0 - score_a)
        np.add.at(games, (self.i, self.j), 1)
        np.add.at(games, (self.j, self.i), 1)
        return wins, games


def comparisons(
    policy_a: Sequence[str],
    policy_b: Sequence[str],
    preference: Sequence[str],
    *,
    progress_a: ArrayLike | None = None,
    progress_b: ArrayLike | None = None,
    tasks: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
) -> Comparisons:
    """Build :class:`Comparisons` from policy names and preference labels ``A``/``B``/``tie``.

    ``policies`` fixes the pool and its order (default: sorted names seen).  Progress is in [0, 1]
    (NaN = not recorded).  Every bad value raises :class:`StatsInputError` naming the 1-based row.

    Examples
    --------
    >>> data = comparisons(["pi0", "pi0"], ["bin", "fast"], ["A", "tie"])
    >>> data.policies, data.outcome.tolist()
    (('bin', 'fast', 'pi0'), [2, 1])
    """
    m = len(policy_a)
    if len(policy_b) != m or len(preference) != m:
        raise StatsInputError(
            f"`policy_a`, `policy_b` and `preference` must have one entry per comparison; found "
            f"{m}, {len(policy_b)} and {len(preference)}"
        )
    pool = tuple(sorted(set(policy_a) | set(policy_b))) if policies is None else tuple(policies)
    if len(set(pool)) != len(pool):
        raise StatsInputError(f"`policies` must be distinct; found {pool!r}")
    index = {name: k for k, name in enumerate(pool)}
    i = np.empty(m, dtype=np.int64)
    j = np.empty(m, dtype=np.int64)
    y = np.empty(m, dtype=np.int64)
    for row, (a, b, pref) in enumerate(zip(policy_a, policy_b, preference, strict=True), start=1):
        for name in (a, b):
            if name not in index:
                raise StatsInputError(f"policy {name!r} at comparison {row} is not in `policies` {pool!r}")
        if a == b:
            raise StatsInputError(f"comparison {row} pits policy {a!r} against itself")
        if pref not in PREFERENCES:
            raise StatsInputError(
                f"`preference` must be one of {tuple(PREFERENCES)}; found {pref!r} at comparison {row}"
            )
        i[row - 1], j[row - 1], y[row - 1] = index[a], index[b], PREFERENCES[pref]
    return Comparisons(
        pool, i, j, y, _progress(progress_a, m, "progress_a"), _progress(progress_b, m, "progress_b"),
        tuple(tasks) if tasks is not None else ("",) * m,
    )


def _progress(values: ArrayLike | None, m: int, name: str) -> FloatArray:
    if values is None:
        return np.full(m, np.nan)
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (m,):
        raise StatsInputError(f"`{name}` must have one value per comparison ({m}); found shape {array.shape}")
    bad = ~np.isnan(array) & ((array < 0.0) | (array > 1.0))
    if bad.any():
        row = int(np.argmax(bad))
        raise StatsInputError(f"`{name}` must lie in [0, 1]; found {float(array[row])!r} at comparison {row + 1}")
    return array


@dataclasses.dataclass(frozen=True)
class Ranking:
    """A fitted ranking.

    Attributes
    ----------
    model : str
        ``bt``, ``davidson``, ``elo``, ``prog``, ``paired`` or ``task``.
    policies : tuple of str
        The pool, in input order.
    scores : float array
        One score per policy (higher is better): log-ability for ``bt``/``davidson``/``elo``/
        ``task``, mean progress in [0, 1] for ``prog``.
    se : float array
        Standard error of each score (NaN where undefined, e.g. a policy never compared).
    params : dict
        Model-specific fitted quantities (e.g. the Davidson tie parameter).
    se_method : str
        How ``se`` was obtained (printed beside the intervals).
    df : float array, optional
        Degrees of freedom of a Student-t interval per policy (PROG's ``N_p - 1``; BT's, Davidson's
        and PAIRED's Bell-McCaffrey df, :func:`~.ranking_sandwich.sandwich_standard_errors`; the task
        model's ``n_boot - 1`` for its bootstrap SD, :attr:`~.ranking_task.TaskFit.ranking`); ``None`` = normal.
    skewness : float array, optional
        Sample skewness of the ``df + 1`` observations averaged into each score (PROG); the
        interval is then Hall's skewness-corrected t interval (:meth:`interval`).  ``None`` =
        symmetric.
    boot_t : float array, optional
        Bootstrap replicates ``|T*|`` of each policy's studentised score, shape ``(B, N)``, sorted
        along the first axis (PROG's symmetric bootstrap-t); the interval is then
        ``score -+ q se`` with ``q`` their ``level`` quantile (:meth:`interval`).  ``None`` = none.
    calibrated : bool
        Whether ``score +- z se`` has been shown by simulation to cover at the stated level
        (``bench/ranking_coverage.py``, ``test/stats/test_ranking_coverage.py``).  The
        task model's conditional-information SE (``n_boot = 0``) is not.
    """

    model: str
    policies: tuple[str, ...]
    scores: FloatArray
    se: FloatArray
    params: dict[str, float] = dataclasses.field(default_factory=dict)
    se_method: str = "sandwich (robust) information"
    calibrated: bool = True
    df: FloatArray | None = None
    skewness: FloatArray | None = None
    boot_t: FloatArray | None = None

    def interval(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Intervals ``score -+ z se`` at ``level`` (NaN where the SE is undefined).

        ``z`` is the normal quantile, or Student's t with ``df`` degrees of freedom where given.
        With ``skewness`` (a mean of ``n = df + 1`` observations with sample skewness ``g``) the
        interval is Hall's (1992, "On the removal of skewness by transformation", JRSS B 54:221)
        inversion of the studentised mean ``T = (score - mu) / se`` through the monotone
        transformation that removes the ``n^-1/2`` skewness term of its Edgeworth expansion,

        .. math:: h(T) = T + \\frac{g T^2}{3\\sqrt n} + \\frac{g^2 T^3}{27 n} + \\frac{g}{6\\sqrt n}
                  \\in [-z, z], \\qquad \\mu \\in [\\text{score} - se\\, h^{-1}(z),\\; \\text{score} - se\\, h^{-1}(-z)],

        ``h^-1`` in closed form (``h(T) = ((1 + aT)^3 - 1) / 3a + g / 6 sqrt(n)`` with
        ``a = g / 3 sqrt(n)``); it is the plain t interval when ``g = 0``.

        With ``boot_t`` (``B`` bootstrap replicates of ``|T*|`` per policy) the interval is the
        **symmetric bootstrap-t** ``score -+ q se``, ``q`` the ``ceil((B + 1) level)``-th smallest
        ``|T*|`` (Hall 1988, "Theoretical comparison of bootstrap confidence intervals", Ann. Stat.
        16:927, Sec. 3; Hall 1992, "The Bootstrap and Edgeworth Expansion", Sec. 3.6: two-sided
        coverage error ``O(n^-2)``, against ``O(n^-1)`` for the t and Hall's intervals); where ``q``
        is infinite (more than ``1 - level`` of the resamples have a zero SD, a handful of rollouts)
        the interval is the one above without ``boot_t``.

        >>> r = Ranking("bt", ("a", "b"), np.array([0.5, -0.5]), np.array([0.1, 0.2]))
        >>> [round(float(x), 3) for x in r.interval(0.95)[0]]
        [0.304, -0.892]
        """
        if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
            raise StatsInputError(f"`level` must lie in (0, 1); found {level!r}")
        low, high = self._analytic_interval(level)
        if self.boot_t is None:
            return low, high
        b = self.boot_t.shape[0]
        q = self.boot_t[min(b, max(1, math.ceil((b + 1) * level - 1e-9))) - 1]  # 1e-9: (B + 1) level an integer
        finite = np.isfinite(q)
        return (np.where(finite, self.scores - q * self.se, low),
                np.where(finite, self.scores + q * self.se, high))

    def _analytic_interval(self, level: float) -> tuple[FloatArray, FloatArray]:
        """The normal, Student-t or Hall interval of :meth:`interval` (``boot_t`` ignored)."""
        from scipy.special import ndtri, stdtrit  # here: a hub or a CLI verb starts without scipy

        z = ndtri(0.5 + level / 2.0) if self.df is None else stdtrit(self.df, 0.5 + level / 2.0)  # N, t quantiles
        if self.skewness is None or self.df is None:
            return self.scores - z * self.se, self.scores + z * self.se
        quantile = np.asarray(z, dtype=np.float64)
        a = np.nan_to_num(self.skewness) / (3.0 * np.sqrt(self.df + 1.0))

        def inverse(u: FloatArray) -> FloatArray:
            return hall_cubic_inverse(u, a)

        return self.scores - self.se * inverse(quantile), self.scores - self.se * inverse(-quantile)

    @property
    def ranks(self) -> IntArray:
        """Rank of each policy, 1 = best (ties in score share the better rank order by input)."""
        order = np.argsort(-self.scores, kind="stable")
        ranks = np.empty(order.size, dtype=np.int64)
        ranks[order] = np.arange(1, order.size + 1)
        return ranks

    def table(self) -> list[dict[str, float | int | str | None]]:
        """``[{"policy", "score", "se", "rank"}, ...]`` best first (the ``--json`` layout)."""
        rows: list[dict[str, float | int | str | None]] = [
            {"policy": name, "score": float(score), "se": None if np.isnan(se) else float(se), "rank": int(rank)}
            for name, score, se, rank in zip(self.policies, self.scores, self.se, self.ranks, strict=True)
        ]
        return sorted(rows, key=lambda row: int(row["rank"] or 0))
