"""Offline synthesis of STEP's randomized rejection regions: the LP of seed 003 Eq. 10, step by step.

Dead time, symmetry and column generation are in docs/step_synthesis.md and docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import highspy
import numpy as np
from numpy.typing import NDArray
from threadpoolctl import ThreadpoolController

from .errors import StatsInputError
from .step_occupancy import Occupancy

#: Risk-budget slack left unspent at every step to absorb LP round-off (HiGHS feasibility
#: tolerance is 1e-7 relative; we re-verify exactly after solving).
_BUDGET_SLACK = 1e-9
#: HiGHS options: dual simplex without presolve (the LPs are small and dense, presolve costs
#: more than it saves), silent.  Should HiGHS not reach optimality so, it retries with presolve.
_HIGHS_OPTIONS: dict[str, bool | int | float | str] = {"output_flag": False, "presolve": "off", "solver": "simplex"}
#: Row floor of the synthesis's propagation (:class:`~.step_occupancy.Occupancy`): a row of a few
#: neighbouring null points holding less than this at each of them is dropped, and its mass counted
#: as spent risk, as if it had been rejected, so ``F(n)`` still bounds the true reject probability.
#: Under ``(p, p)`` only the rows within about 8 binomial SDs of ``n p`` stay (a third of them at
#: ``N_max`` 1000); at most about ``N_max^2`` times this is counted that was not spent.  Used above
#: :data:`EXACT_SYNTHESIS_MAX_N` only.
SYNTHESIS_FLOOR = 1e-15
#: Largest ``N_max`` synthesized with no row dropped (every shipped table; their exact Type-I check,
#: ``step_oc.check_type1``, reweights one propagation up to the same ``N_max``).
EXACT_SYNTHESIS_MAX_N = 500
#: Reduced cost above which a state enters the restricted LP (pricing tolerance).
_PRICING_TOL = 1e-9
#: Relative overrun of a (scaled, unit) budget above which a null point enters as a row: HiGHS's
#: own primal feasibility tolerance, so rows in the model are never re-added.
_FEASIBILITY_TOL = 1e-7
#: numpy's BLAS, held to one thread in each step's LP: its products (a few hundred rows by up to some
#: 10,000 states) are too small to share, and on a busy machine the threads spun for 20x their work
#: (docs/step_synthesis.md); the arithmetic is the same, so are the tables.
_BLAS = ThreadpoolController()


def null_grid(n_max: int, alpha: float, size: int) -> NDArray[np.float64]:
    """Control points ``p^(i)`` of the diagonal null grid (seed 003 §IV-C, IX-E1/2).

    Evenly spaced in ``arcsin(sqrt(p))`` -- the Fisher-Rao geodesic coordinate of the Bernoulli
    pair ``(p, p)``, so neighbouring points have (nearly) equal KL gaps and the grid is dense near 0
    and 1 (spec pitfall 3) -- on ``[ε, 1 - ε]`` with ``ε = 1 - (1 - α)^{1/N_max}``: below ``ε``
    policy B scores no success in ``N_max`` trials with probability ``≥ 1 - α`` (and above
    ``1 - ε`` policy A never fails), and STEP never rejects unless ``S1 > S0``, so nulls outside
    the grid are safe (IX-E2).  Symmetric about 1/2: the upper half is ``1 - p`` of the lower half.

    >>> grid = null_grid(100, 0.05, 129)
    >>> bool(np.all(grid[65:] == 1.0 - grid[63::-1])), float(grid[64])
    (True, 0.5)
    """
    eps = 1.0 - (1.0 - alpha) ** (1.0 / n_max)
    theta = np.linspace(np.arcsin(np.sqrt(eps)), np.pi / 4.0, (size + 1) // 2)
    lower = np.sin(theta) ** 2
    if size % 2:
        lower[-1] = 0.5
        return np.concatenate((lower, 1.0 - lower[-2::-1]))
    return np.concatenate((lower, 1.0 - lower[::-1]))


def _nonzeros(block: NDArray[np.float64]) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.float64]]:
    """The nonzero entries of a dense ``(k, r)`` block, line by line: ``(starts, index, values)`` as HiGHS
    takes a packed matrix.  HiGHS drops a dense block's zero entries itself (they lie below its
    ``small_matrix_value``), so its model is the same; the packing only skips copying them twice."""
    nonzero = block != 0.0
    starts = np.zeros(block.shape[0], dtype=np.int32)
    np.cumsum(nonzero.sum(axis=1)[:-1], out=starts[1:])
    return starts, np.nonzero(nonzero)[1].astype(np.int32), block[nonzero]


class _StepLP:
    """Eq. 10 for one step as a HiGHS model that grows by rows and columns.

    ``max sum(w)`` s.t. ``A w <= rhs``, ``0 <= w <= 1`` over a subset of the null points (rows)
    and candidate states (columns).  Adding rows or columns keeps HiGHS's basis, so every
    round re-optimises warm instead of from scratch.
    """

    def __init__(self, rhs: NDArray[np.float64], presolve: bool) -> None:
        self.highs = highspy.Highs()  # type: ignore[no-untyped-call]
        for name, value in _HIGHS_OPTIONS.items():
            self.highs.setOptionValue(name, value)
        if presolve:
            self.highs.setOptionValue("presolve", "on")
        self.highs.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.rhs = rhs
        self.rows = np.zeros(0, dtype=np.intp)
        self.cols = np.zeros(0, dtype=np.intp)

    def add_rows(self, masses: NDArray[np.float64], rows: NDArray[np.intp]) -> None:
        """Add the constraints of null points ``rows`` (over the columns already in the model)."""
        block = masses[np.ix_(rows, self.cols)]  # (r, c): row-wise = C order
        starts, index, values = _nonzeros(block)
        self.highs.addRows(rows.size, np.full(rows.size, -highspy.kHighsInf), self.rhs[rows], values.size,
                           starts, index, values)
        self.rows = np.concatenate((self.rows, rows))

    def add_cols(self, masses: NDArray[np.float64], cols: NDArray[np.intp]) -> None:
        """Add states ``cols`` (cost 1, bounds [0, 1]) with their entries in the model's rows."""
        k = cols.size
        starts, index, values = _nonzeros(masses[np.ix_(self.rows, cols)].T)  # (k, r): column-wise
        self.highs.addCols(k, np.ones(k), np.zeros(k), np.ones(k), values.size, starts, index, values)
        self.cols = np.concatenate((self.cols, cols))

    def solve(self) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        """``(w, y)``: weights of the model's columns, duals of its rows (``y >= 0``); ``None``
        if HiGHS did not reach optimality."""
        self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        solution = self.highs.getSolution()
        return np.asarray(solution.col_value), np.asarray(solution.row_dual)


def _solve_step(
    masses: NDArray[np.float64], budget: NDArray[np.float64], *, column_generation: bool = True,
    overwrite: bool = False,
) -> NDArray[np.float64]:
    """Solve Eq. 10 for one step: ``max sum(w)`` s.t. ``masses @ w <= budget``, ``0 <= w <= 1``.

    ``masses`` is ``(M, C)`` (null points x candidate states), all entries ``>= 0``.  Without
    ``column_generation`` the LP is solved over all candidates and null points at once.

    With it, the LP is solved over a few rows and columns and grown until it certifies itself
    optimal for the full LP: null points whose budget the weights overrun enter as rows (primal
    feasibility), states with positive reduced cost ``1 - y^T P_j`` enter as columns (dual
    feasibility).  When neither is left the weights are feasible for every null point and
    optimal (only ~M fractional weights and a few dozen binding null points remain at a vertex).
    """
    n_points, n_candidates = masses.shape
    weights = np.zeros(n_candidates)
    if n_candidates == 0:
        return weights
    # Rows scaled to a unit budget: HiGHS's feasibility tolerance (absolute) becomes relative to
    # each null point's budget instead of swamping budgets of ~1e-4; a null point with nothing
    # left to spend keeps its zero right-hand side (any state it can reach then gets w = 0).
    scale = np.where(budget > 0, budget, 1.0)
    if overwrite:  # the caller's array: scaled where it lies (no copy of the (M, C) matrix)
        masses /= scale[:, None]
    else:
        masses = masses / scale[:, None]
    rhs = budget / scale
    if column_generation:
        # The fraction of the tightest budget one state uses on its own (inf: no budget left).
        spent_out = budget <= 0
        tightest = masses.max(axis=0)
        if spent_out.any():
            tightest[(masses[spent_out] > 0).any(axis=0)] = np.inf
        cols = np.flatnonzero(tightest <= 1.0)
        if cols.size < 2 * n_points:
            cols = np.sort(np.argsort(tightest, kind="stable")[: 2 * n_points])
        # Start from the null points that bind each state hardest.
        cost = masses[:, cols]
        if spent_out.any():
            cost = np.where(spent_out[:, None], np.where(cost > 0, np.inf, 0.0), cost)
        rows = np.unique(np.argmax(cost, axis=0)) if cols.size else np.arange(1)
    else:
        cols, rows = np.arange(n_candidates), np.arange(n_points)
    for presolve in (False, True):
        lp = _StepLP(rhs, presolve)
        lp.add_rows(masses, rows)
        lp.add_cols(masses, cols)
        while (solved := lp.solve()) is not None:
            x, row_duals = solved
            w = np.zeros(n_candidates)
            w[lp.cols] = np.clip(x, 0.0, 1.0)
            spending = lp.cols[x > 0.0]  # the other weights are 0
            spend = masses[:, spending] @ w[spending]
            outside = np.ones(n_points, dtype=bool)
            outside[lp.rows] = False
            violated = np.flatnonzero((spend > rhs * (1.0 + _FEASIBILITY_TOL)) & outside)
            if violated.size:
                lp.add_rows(masses, violated)
                continue
            binding = row_duals != 0.0  # the other null points' duals, in the model or not, are 0
            reduced = 1.0 - row_duals[binding] @ masses[lp.rows[binding]]
            reduced[lp.cols] = 0.0
            entering = np.flatnonzero(reduced > _PRICING_TOL)
            if entering.size == 0:  # feasible everywhere, no state improves it: optimal
                return w
            lp.add_cols(masses, entering)
    raise RuntimeError("STEP LP failed: HiGHS found no optimal solution")


def risk_budget(n: int, n_max: int, budget: float, dead_time: int) -> float:
    """``F(n)``: the risk the first ``n`` steps may spend in total (module docstring).

    >>> [round(risk_budget(n, 10, 0.05, 4), 4) for n in (4, 5, 10)]
    [0.0, 0.0083, 0.05]
    """
    return 0.0 if n <= dead_time else budget * (n - dead_time) / (n_max - dead_time)


def _mirror_pairs(reachable: NDArray[np.bool_], n: int) -> tuple[NDArray[np.intp], ...]:
    """The tied pairs among the states ``(a, g)`` marked in ``reachable`` ``(n + 1, gaps)`` at step
    ``n``: ``(a_low, a_high, g)``, one row per pair with a state marked (``a_low == a_high`` for a
    state that is its own mirror), ordered by ``(a_low, g)``; ``g`` is the 0-based gap index."""
    a, g = np.arange(reachable.shape[0])[:, None], np.arange(reachable.shape[1])[None, :]
    mirror = n - a - (g + 1)  # (a, a + g + 1) <-> (n - a - g - 1, n - a): the same gap
    inside = mirror >= 0
    mirror_reached = np.zeros_like(reachable)
    mirror_reached[inside] = reachable[mirror[inside], np.broadcast_to(g, reachable.shape)[inside]]
    low, g_idx = np.nonzero((reachable | mirror_reached) & (a <= mirror))
    return low, n - low - (g_idx + 1), g_idx


def synthesize_weights(
    n_max: int,
    alpha: float,
    *,
    budget: float,
    dead_time: int = 0,
    grid_size: int = 129,
    column_generation: bool = True,
    floor: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[NDArray[np.float64]]:
    """Run the STEP synthesis, yielding ``w_n`` for ``n = 1..N_max`` in turn.

    ``alpha`` places the null grid (:func:`null_grid`); ``budget <= alpha`` is the total risk
    ``F(N_max)`` the LPs may spend, none of it in the first ``dead_time`` steps
    (:func:`risk_budget`).

    Step ``n`` yields an ``(n + 1, G_n)`` array: ``w_n(a, a + g)`` at ``[a, g - 1]`` for the
    gaps ``g = 1..G_n`` that still carry mass; larger gaps are unreachable without having stopped
    and take ``w = 1``.

    ``floor``: the propagation's row floor (default :data:`SYNTHESIS_FLOOR` above
    :data:`EXACT_SYNTHESIS_MAX_N`, else 0: exact).  Dropped rows, and states of at most ``floor``
    mass at every null point (which take ``w = 1`` without entering the LP), are counted as spent
    risk, so ``F(n)`` bounds the reject probability all the same.
    """
    if not 0 <= dead_time < n_max:
        raise StatsInputError(f"dead_time must lie in [0, n_max); found {dead_time} for n_max {n_max}")
    lower = null_grid(n_max, alpha, grid_size)[: (grid_size + 1) // 2]  # the rest mirrors it
    if floor is None:
        floor = SYNTHESIS_FLOOR if n_max > EXACT_SYNTHESIS_MAX_N else 0.0
    occupancy = Occupancy(lower, lower, n_max, floor=floor)
    spent = np.zeros(lower.size)
    buffer = np.empty(0)
    for n in range(1, n_max + 1):
        dropped = occupancy.dropped.copy()
        occupancy.advance()
        spent += occupancy.dropped - dropped  # counted as rejected: the budget stays a rigorous bound
        block = occupancy.reject_block(min(occupancy.half_width, n))
        reachable = occupancy.reach(block.shape[2])
        valid_gap = np.flatnonzero(reachable.any(axis=0))
        gaps = int(valid_gap[-1]) + 1 if valid_gap.size else 0
        if n <= dead_time:
            weights = np.zeros((n + 1, gaps))  # nothing stops yet: no mass moves
        else:
            # states of at most `floor` mass at every point take w = 1 outside the LP: reserve a bound of it
            unpriced = (n + 1) * gaps * occupancy.floor
            allowed = np.maximum(risk_budget(n, n_max, budget, dead_time) - spent - _BUDGET_SLACK - unpriced, 0.0)
            weights = np.ones((n + 1, gaps))
            low, high, g_idx = _mirror_pairs(reachable[:, :gaps], n)
            if buffer.size < lower.size * low.size:  # one buffer for the steps' columns: no fresh pages each step
                buffer = np.empty(lower.size * low.size * 5 // 4)
            columns = occupancy.pair_mass(low, high, g_idx, out=buffer[: lower.size * low.size].reshape(lower.size, low.size))
            with _BLAS.limit(limits=1, user_api="blas"):
                w = _solve_step(columns, allowed, column_generation=column_generation, overwrite=True)
            weights[low, g_idx] = w
            weights[high, g_idx] = w
            rejected, _ = occupancy.stop(weights)
            spent += rejected
        if progress is not None:
            progress(n)
        yield weights
