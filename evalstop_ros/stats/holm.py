"""Sequential Holm over directional anytime-valid p-values (Holm 1979; seed 000 §IV, Eqs. 16-17)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .levels import split_alpha
from .sequential import Decision, PairedProcess
from .validation import check_alpha

__all__ = ["HOLM_SIDES", "DirectionalTests", "SequentialHolm", "check_weights", "holm", "holm_step", "side_alpha"]

#: Directional hypotheses of each ``alternative``: ``+1`` is "``policy_b`` better", ``-1``
#: "``policy_a`` better", in this order.
HOLM_SIDES: Mapping[str, tuple[int, ...]] = MappingProxyType({"two-sided": (1, -1), "greater": (1,), "less": (-1,)})


def _holm_rejections(pvalues: NDArray[np.float64], alpha: float,
                     weights: NDArray[np.float64] | None = None) -> NDArray[np.bool_]:
    """Holm's step-down on every column of an ``(H, R)`` array at once (inputs trusted; ``weights``
    ``(H,)`` positive, summing to 1, for the weighted step-down of :func:`holm`)."""
    h = pvalues.shape[0]
    if weights is None:
        order = np.argsort(pvalues, axis=0, kind="stable")
        ranked = np.take_along_axis(pvalues, order, axis=0)
        passes = ranked <= (alpha / (h - np.arange(h)))[:, None]
    else:  # Holm 1979 Sec. 5: by p / w, rank k tested at alpha w_(k) / (the weight not yet rejected)
        order = np.argsort(pvalues / weights[:, None], axis=0, kind="stable")
        ranked = np.take_along_axis(pvalues, order, axis=0)
        ranked_w = weights[order]
        remaining = np.flip(np.cumsum(np.flip(ranked_w, axis=0), axis=0), axis=0)
        passes = ranked <= alpha * ranked_w / remaining
    n_rejected = np.cumprod(passes, axis=0).sum(axis=0)  # ranks before the first failure
    rejected: NDArray[np.bool_] = np.zeros_like(passes)
    np.put_along_axis(rejected, order, np.arange(h)[:, None] < n_rejected[None, :], axis=0)
    return rejected


def holm(pvalues: ArrayLike, alpha: float, weights: ArrayLike | None = None) -> NDArray[np.bool_]:
    """Holm's step-down procedure: which hypotheses to reject at family-wise level ``alpha``.

    With the p-values sorted as :math:`p_{(1)} \\le \\dots \\le p_{(m)}`, let :math:`k^*` be
    the first rank with :math:`p_{(k)} > \\alpha / (m - k + 1)`; Holm rejects the hypotheses
    of ranks :math:`1, \\dots, k^* - 1` (all of them if there is no such rank) [1]_.  For
    sequential tests the p-values must be anytime-valid, taken at one analysis time.

    With ``weights`` :math:`w_i > 0` (fixed before the data; normalised to sum 1), the weighted
    step-down of [1]_ (Sec. 5): ranks by :math:`p_i / w_i`, rank :math:`k` tested at
    :math:`\\alpha w_{(k)} / \\sum_{l \\ge k} w_{(l)}` -- Bretz et al. 2009's graphical
    procedure whose rejected weight is shared in proportion.  Equal weights are Holm's.

    >>> holm([0.01, 0.04, 0.03, 0.005], 0.05)
    array([ True, False, False,  True])
    >>> holm([0.02, 0.004, 0.3], 0.05, weights=[0.6, 0.2, 0.2])  # 0.004 <= 0.05 * 0.2, then 0.02 <= 0.05 * 0.6 / 0.8
    array([ True,  True, False])
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise StatsInputError(f"`pvalues` must be a non-empty one-dimensional sequence; found shape {p.shape}")
    bad = ~((p >= 0.0) & (p <= 1.0))  # also catches NaN
    if bad.any():
        index = int(np.argmax(bad))
        raise StatsInputError(f"`pvalues` must lie in [0, 1]; found {float(p[index])!r} at index {index}")
    rejected: NDArray[np.bool_] = _holm_rejections(p[:, None], check_alpha(alpha), check_weights(weights, p.size))[:, 0]
    return rejected


def check_weights(weights: ArrayLike | None, h: int) -> NDArray[np.float64] | None:
    """``weights`` as ``(h,)`` positive floats summing to 1 (``None`` stays ``None``: Holm's equal weights).

    >>> check_weights([2, 1, 1], 3).tolist()
    [0.5, 0.25, 0.25]
    """
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (h,):
        raise StatsInputError(f"`weights` must hold one weight per hypothesis ({h}); found shape {w.shape}")
    bad = ~(np.isfinite(w) & (w > 0.0))
    if bad.any():
        index = int(np.argmax(bad))
        raise StatsInputError(f"`weights` must be positive and finite; found {float(w[index])!r} at index {index}")
    normalised: NDArray[np.float64] = w / w.sum()
    return normalised


def holm_step(
    pvalues: NDArray[np.float64], decision: NDArray[np.int8], *, alpha: float, sides: Sequence[int],
    weights: NDArray[np.float64] | None = None,
) -> NDArray[np.int8]:
    """One analysis: Holm over the ``(m * S, R)`` directional p-values, comparison-major
    (weighted by ``weights``, ``(m * S,)`` summing to 1, if given).

    Returns a copy of ``decision`` (``(m, R)``) in which every comparison still ``CONTINUE``
    with a hypothesis Holm rejects takes the claim of its first rejected side (``+1``:
    ``B_BETTER``, ``-1``: ``A_BETTER``).  Inputs are trusted.

    >>> holm_step(np.array([[0.001], [0.9], [0.04], [0.5]]), np.zeros((2, 1), np.int8), alpha=0.05, sides=(1, -1))
    array([[1],
           [0]], dtype=int8)
    """
    rejected = _holm_rejections(pvalues, alpha, weights).reshape(decision.shape[0], len(sides), -1)  # (m, S, R)
    first = rejected.argmax(axis=1)  # each comparison's first rejected side (0 if none)
    claim = np.where(np.asarray(sides)[first] == 1, Decision.B_BETTER, Decision.A_BETTER)
    out: NDArray[np.int8] = np.where((decision == Decision.CONTINUE) & rejected.any(axis=1), claim, decision).astype(np.int8)
    return out


def side_alpha(alpha: float, m: int, alternative: str) -> float:
    """Level of each one-sided process: the family's ``alpha / H``, ``H = m * S`` directional hypotheses.

    >>> side_alpha(0.05, 2, "two-sided"), side_alpha(0.05, 2, "greater")
    (0.0125, 0.025)
    """
    return split_alpha(alpha, m * len(HOLM_SIDES[alternative]))


class DirectionalTests:
    """One comparison under sequential Holm: a one-sided process per side of ``alternative``.

    :param method: Registered anytime-valid method (``nscore``, ``wsr``, ``savi``).
    :param side_alpha: Level of each one-sided process: the family's ``alpha / H`` (or one level
        per side: ``alpha w`` of a weighted family, its smallest Holm threshold).
    :param lanes: Sequences ``R`` run side by side.
    :param options: ``n_max``, ``seed``, ``bins``, ``c`` of
        :func:`~evalstop_ros.stats.registry.make_process`.

    Built by :class:`evalstop_ros.stats.engine.HolmEngine` (the family's level split over
    its hypotheses), which shows an example.
    """

    def __init__(self, method: str, *, side_alpha: float | Sequence[float], alternative: str, lanes: int = 1,
                 **options: float | int | None) -> None:
        from .registry import make_process

        self.sides = HOLM_SIDES[alternative]
        levels = [side_alpha] * len(self.sides) if isinstance(side_alpha, float) else list(side_alpha)
        self.processes: list[PairedProcess] = [
            make_process(method, lanes, alpha=level, alternative="greater" if side == 1 else "less",
                         **options)  # type: ignore[arg-type]
            for side, level in zip(self.sides, levels, strict=True)
        ]

    def update(self, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> None:
        """Feed one pair per lane to every side."""
        for process in self.processes:
            process.update(scores_a, scores_b)

    def side_pvalues(self) -> NDArray[np.float64]:
        """``(S, R)``: each side's running-minimum p-value."""
        return np.stack([process.pvalue() for process in self.processes])

    def pvalue(self, sides: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """``(R,)``: ``min(1, S min_s p_s)``, the comparison's (two-sided) p-value (of ``sides`` if
        given: :meth:`side_pvalues` already read)."""
        side = self.side_pvalues() if sides is None else sides
        combined: NDArray[np.float64] = np.minimum(1.0, len(self.sides) * side.min(axis=0))
        return combined

    def evalue(self) -> NDArray[np.float64]:
        """``(R,)``: mean of the sides' e-values (an e-value for equality)."""
        mean: NDArray[np.float64] = np.mean([process.evalue() for process in self.processes], axis=0)
        return mean


class SequentialHolm:
    """The analyses of sequential Holm over ``m`` comparisons and ``R`` lanes.

    Analysis step ``n`` applies :func:`holm_step` to every directional p-value: an open
    comparison's after exactly ``n`` pairs, a decided one's from its stop.  Every newly rejected
    hypothesis decides its comparison at step ``n``; after step ``n_max`` the comparisons still
    open are ``BUDGET_EXHAUSTED`` (no stopping step).

    ``weights`` (``(m * S,)``, positive, summing to 1; :func:`check_weights`): the weighted
    step-down of :func:`holm` at every analysis (``None``: Holm's equal weights).

    Two ways to feed it, one rule: :meth:`analyse` takes step ``n``'s p-values of every lane at
    once (lock-step, the Monte Carlo family); :meth:`run` (``R = 1``) analyses every step that
    per-comparison trajectories of unequal length allow: step ``n`` runs once every open
    comparison has ``n`` pairs.

    Attributes
    ----------
    decision : ndarray of int8, shape (m, R)
    stopping_step : ndarray of int64, shape (m, R)
        Step of each decision, 0 if none.
    step : int
        Steps analysed.
    """

    def __init__(self, m: int, *, alpha: float, alternative: str, n_max: int | None, lanes: int = 1,
                 weights: ArrayLike | None = None) -> None:
        self.alpha = alpha
        self.sides = HOLM_SIDES[alternative]
        self.weights = check_weights(weights, m * len(self.sides))
        self.n_max = n_max
        self.step = 0
        self.decision = np.zeros((m, lanes), dtype=np.int8)
        self.stopping_step = np.zeros((m, lanes), dtype=np.int64)
        self._p = np.ones((m * len(self.sides), lanes))

    def _conclude(self, decision: NDArray[np.int8]) -> None:
        """Record step ``self.step``'s decisions (and the budget after ``n_max``)."""
        self.stopping_step[(decision != self.decision) & (self.decision == Decision.CONTINUE)] = self.step
        self.decision = np.where(self.decision == Decision.CONTINUE, decision, self.decision).astype(np.int8)
        if self.n_max is not None and self.step >= self.n_max:
            self.decision[self.decision == Decision.CONTINUE] = Decision.BUDGET_EXHAUSTED

    def analyse(self, pvalues: NDArray[np.float64]) -> None:
        """Step ``step + 1`` in lock-step: ``pvalues`` ``(m * S, R)``, rows of decided comparisons ignored."""
        open_rows = np.repeat(self.decision == Decision.CONTINUE, len(self.sides), axis=0)
        self._p = np.where(open_rows, pvalues, self._p)  # a decided comparison keeps its values
        self.step += 1
        self._conclude(holm_step(self._p, self.decision, alpha=self.alpha, sides=self.sides, weights=self.weights))

    def side_pvalues(self) -> NDArray[np.float64]:
        """``(m * S, R)``: the p-values of the last analysis (a decided comparison's from its stop)."""
        return self._p

    def _open_until(self, j: int) -> int:
        """Last step at which comparison ``j`` counts as open: its stop if decided, else the budget."""
        stop = int(self.stopping_step[j, 0])
        if self.decision[j, 0] != Decision.CONTINUE and stop:
            return stop
        return self.n_max if self.n_max is not None else np.iinfo(np.int64).max

    def run(self, trajectories: Sequence[Sequence[Sequence[float]]]) -> None:
        """Analyse every further step the trajectories allow (``R = 1``).

        ``trajectories[j][n - 1]`` holds comparison ``j``'s side p-values after ``n`` pairs.
        After :meth:`restart` the steps are analysed again from the first *keeping* the
        decisions made: a decided comparison counts as open (its trajectory) until its stop.
        """
        while (self.decision == Decision.CONTINUE).any() and (self.n_max is None or self.step < self.n_max):
            n = self.step + 1
            until = [self._open_until(j) for j in range(len(trajectories))]
            if any(until[j] >= n and len(trajectories[j]) < n for j in range(len(trajectories))):
                return  # an open comparison lacks pair n
            rows = [value for j, trajectory in enumerate(trajectories)
                    for value in trajectory[min(n, until[j]) - 1]]
            before = np.array([[Decision.CONTINUE if until[j] >= n else int(self.decision[j, 0])]
                               for j in range(len(trajectories))], dtype=np.int8)
            self._p = np.array(rows, dtype=np.float64)[:, None]
            self.step = n
            self._conclude(holm_step(self._p, before, alpha=self.alpha, sides=self.sides, weights=self.weights))

    def restart(self) -> None:
        """Analyse again from the first step (an earlier pair changed), keeping the decisions."""
        self.step = 0

    def outcome(self, j: int) -> tuple[Decision, int | None]:
        """Comparison ``j``'s decision and stopping step (``R = 1``)."""
        return Decision(int(self.decision[j, 0])), int(self.stopping_step[j, 0]) or None

