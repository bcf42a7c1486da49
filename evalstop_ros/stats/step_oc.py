"""Exact operating characteristics of a STEP table by forward propagation (seed 003 §V-B metrics, IX-E1/E2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .step_occupancy import Occupancy
from .step_table import StepTable

#: Points propagated together (memory ~ chunk x N_max x band x 8 bytes x 2).
_CHUNK = 32


@dataclasses.dataclass(frozen=True)
class StepOC:
    """Exact operating characteristics at each ``(p0, p1)`` (arrays, or floats for scalars).

    ``power_b_better`` is P(RejectNull by N_max) -- the Type-I error where ``p1 <= p0`` --,
    ``power_a_better`` is P(AcceptNull), ``expected_stop`` is ``E[min(τ, N_max)]`` with
    undecided runs counted as ``N_max``.
    """

    p0: NDArray[np.float64]
    p1: NDArray[np.float64]
    power_b_better: NDArray[np.float64]
    power_a_better: NDArray[np.float64]
    expected_stop: NDArray[np.float64]


def _propagate(table: StepTable, p0: NDArray[np.float64], p1: NDArray[np.float64],
               floor: float = 0.0) -> tuple[NDArray[np.float64], ...]:
    """Rejected, accepted (each plus the dropped mass, :class:`~.step_occupancy.Occupancy`) and the stopping-time sum."""
    occupancy = Occupancy(p0, p1, table.n_max, floor=floor)
    rejected = np.zeros(p0.size)
    accepted = np.zeros(p0.size)
    stop_sum = np.zeros(p0.size)
    for n in range(1, table.n_max + 1):
        occupancy.advance()
        gaps = min(occupancy.half_width, n)
        r, a = occupancy.stop(table.dense_step(n, gaps))
        rejected += r
        accepted += a
        stop_sum += n * (r + a)
    stop_sum += table.n_max * (1.0 - rejected - accepted)
    return rejected + occupancy.dropped, accepted + occupancy.dropped, stop_sum


def operating_characteristics(
    table: StepTable,
    p0: ArrayLike,
    p1: ArrayLike,
    *,
    progress: Callable[[int], None] | None = None,
    floor: float = 0.0,
) -> StepOC:
    """Exact decision probabilities and expected stopping time of ``table`` at ``(p0, p1)``.

    ``floor`` > 0 drops rows of negligible mass (:class:`~.step_occupancy.Occupancy`): both
    decision probabilities are then upper bounds, each above the exact value by at most the
    dropped mass, and ``expected_stop`` within ``N_max`` times it.

    Examples
    --------
    >>> from evalstop_ros.stats.step_table import load_table
    >>> oc = operating_characteristics(load_table(100, 0.05), 0.35, 0.65)
    >>> print(f"{oc.power_b_better[0]:.3f} {oc.expected_stop[0]:.1f}")
    0.992 36.3
    """
    p0_arr, p1_arr = (np.atleast_1d(np.asarray(p, dtype=np.float64)).ravel() for p in (p0, p1))
    p0_arr, p1_arr = np.broadcast_arrays(p0_arr, p1_arr)
    for name, values in (("p0", p0_arr), ("p1", p1_arr)):
        if not np.all((values >= 0) & (values <= 1)):
            bad = float(values[~((values >= 0) & (values <= 1))][0])
            raise StatsInputError(f"`{name}` must lie in [0, 1]; found {bad!r}")
    parts = []
    for start in range(0, p0_arr.size, _CHUNK):
        parts.append(_propagate(table, p0_arr[start : start + _CHUNK], p1_arr[start : start + _CHUNK], floor))
        if progress is not None:
            progress(min(start + _CHUNK, p0_arr.size))
    rejected, accepted, stop = (np.concatenate(column) for column in zip(*parts))
    return StepOC(p0_arr.copy(), p1_arr.copy(), rejected, accepted, stop)


@dataclasses.dataclass(frozen=True)
class Type1Report:
    """Exact Type-I error of a STEP table over a dense diagonal null grid."""

    n_max: int
    alpha: float
    grid_size: int
    max_fpr: float
    argmax_p: float

    @property
    def passes(self) -> bool:
        """``max_fpr <= alpha``: no tolerance (the synthesis keeps a margin for the error between
        its grid points, :data:`~.step_table.BUDGET_FRACTION`)."""
        return self.max_fpr <= self.alpha


def dense_null_grid(size: int) -> NDArray[np.float64]:
    """``size`` interior points evenly spaced in ``arcsin(sqrt(p))`` on (0, 1): dense at the ends."""
    theta = np.linspace(0.0, np.pi / 2.0, size + 2)[1:-1]
    return np.sin(theta) ** 2


#: Largest ``N_max`` of :func:`diagonal_reject_probability` in :func:`check_type1`: the mass at
#: ``p = 1/2`` goes down to ``4^-N_max`` and the likelihood ratio up to ``4^N_max``, both inside
#: float64's normal range (about ``2^±1022``) with room to spare up to here.
REWEIGHT_MAX_N = 500
#: Points reweighted at once by :func:`diagonal_reject_probability` (8 MB of powers at ``N_max`` 500).
_REWEIGHT_BLOCK = 1024
#: Row floor of :func:`check_type1`'s per-point propagation above :data:`REWEIGHT_MAX_N`: the mass it
#: drops is added to the reject probability (a rigorous upper bound, above the exact value by at
#: most about ``N_max^2`` times this).
TYPE1_FLOOR = 1e-15


def diagonal_reject_probability(
    table: StepTable,
    p: ArrayLike,
    *,
    progress: Callable[[int], None] | None = None,
) -> NDArray[np.float64]:
    """P(RejectNull by N_max) at every null ``p0 = p1 = p``, exactly, from one propagation.

    On the diagonal the probability of a sequence of ``n`` pairs depends on it only through its
    ``k`` successes out of ``2n``: ``p^k (1 - p)^(2n - k) = 4^-n (2p)^k (2(1 - p))^(2n - k)``.  The
    weights ``w_n`` do not depend on ``p``, so the mass stopped in each reject state at ``p = 1/2``
    (Eq. 5, propagated with no floor), summed per ``(successes, failures)``, gives every ``p``
    by that likelihood ratio.  All terms are positive (no cancellation): the result is exact up to
    float64 round-off, as the per-point propagation of :func:`operating_characteristics` at
    ``floor`` 0, for any number of points at the cost of one.  ``progress`` gets the points done
    in proportion to the steps propagated.
    """
    if table.n_max > REWEIGHT_MAX_N:
        raise StatsInputError(f"the likelihood-ratio reweighting holds up to N_max {REWEIGHT_MAX_N} in float64; "
                              f"found {table.n_max} (operating_characteristics propagates each point)")
    points = np.atleast_1d(np.asarray(p, dtype=np.float64)).ravel()
    if not np.all((points >= 0) & (points <= 1)):
        raise StatsInputError(f"`p` must lie in [0, 1]; found {float(points[~((points >= 0) & (points <= 1))][0])!r}")
    n_max = table.n_max
    occupancy = Occupancy(np.array([0.5]), np.array([0.5]), n_max)
    stopped = np.zeros((2 * n_max + 1, 2 * n_max + 1))  # [successes, failures] of the 2n trials
    for n in range(1, n_max + 1):
        occupancy.advance()
        weights = table.dense_step(n, min(occupancy.half_width, n))
        gaps = weights.shape[1]
        mass = occupancy.reject_block(gaps)[0] * weights  # state (a, a + g): 2a + g successes
        successes = 2 * np.arange(n + 1)[:, None] + np.arange(1, gaps + 1)[None, :]
        inside = successes <= 2 * n  # beyond: S1 > n, never reached (no mass)
        by_successes = np.bincount(successes[inside], weights=mass[inside], minlength=2 * n + 1)
        k = np.arange(2 * n + 1)
        stopped[k, 2 * n - k] += by_successes
        occupancy.stop(weights)
        if progress is not None:
            progress(points.size * n // n_max)
    # the factor of the smaller side is summed first, so that no partial sum overflows:
    # sum_k (2p)^k stopped[k, j] <= 2 for p <= 1/2 (and the mirror for p > 1/2)
    # (in blocks of :data:`_REWEIGHT_BLOCK` points: the powers take ``8 (2 N_max + 1)`` bytes per point)
    exponents = np.arange(2 * n_max + 1)
    result = np.empty(points.size)
    for start in range(0, points.size, _REWEIGHT_BLOCK):
        block = slice(start, start + _REWEIGHT_BLOCK)
        here, out = points[block], result[block]
        low = here <= 0.5
        for side, first, second, table_side in ((low, 2.0 * here, 2.0 * (1.0 - here), stopped),
                                                (~low, 2.0 * (1.0 - here), 2.0 * here, stopped.T)):
            if side.any():
                partial = (first[side, None] ** exponents) @ table_side
                out[side] = np.einsum("ij,ij->i", partial, second[side, None] ** exponents)
    return result


def check_type1(
    table: StepTable,
    *,
    grid_size: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> Type1Report:
    """Max over a dense diagonal grid of P(RejectNull) -- STEP's exact worst-case Type-I error.

    By the mirror symmetry the AcceptNull error on the diagonal is identical.  Up to ``N_max``
    :data:`REWEIGHT_MAX_N` (every shipped table) computed by :func:`diagonal_reject_probability`:
    exact up to float64 round-off, one propagation for the whole grid.  Above it each point is
    propagated with the row floor :data:`TYPE1_FLOOR`: a rigorous upper bound.
    """
    grid = dense_null_grid(grid_size)
    if table.n_max <= REWEIGHT_MAX_N:
        reject = diagonal_reject_probability(table, grid, progress=progress)
    else:
        reject = operating_characteristics(table, grid, grid, progress=progress, floor=TYPE1_FLOOR).power_b_better
    worst = int(np.argmax(reject))
    return Type1Report(table.n_max, table.alpha, grid_size, float(reject[worst]), float(grid[worst]))
