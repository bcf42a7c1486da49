"""Offline synthesis of STEP's randomized rejection regions (seed 003, §IV-B..E, Eqs. 7-10).

For each step ``n = 1..N_max`` in turn we solve the linear program of Eq. 10,

.. math::

    \\max_{w_n} \\mathbf 1^\\top w_n \\quad \\text{s.t.}\\quad
    R_{n-1}^{(i)} + (P_n w_n)_i \\le F(n) \\;\\forall i, \\qquad 0 \\le w_n \\le 1,

over the candidate states ``S1 > S0`` (IX-E2), where row ``i`` of ``P_n`` is the unstopped
occupancy under the null point ``(p^{(i)}, p^{(i)})`` (Eq. 8, propagated by
:class:`~evalstop_ros.stats.step_occupancy.Occupancy` with both the reject region and its mirrored
accept region removed), ``R_{n-1}^{(i)}`` is the rejection probability spent so far and
``F(n) = n α / N_max`` is the uniform risk budget used in all of the paper's experiments.
Eq. 9 is read *cumulatively* (spec/step.md §2.2, pitfall 1): the increment-only reading
over-spends α.

The LP is solved exactly by column generation on HiGHS: states with no mass under any null are
unreachable and get ``w = 1`` for free; the restricted LP starts from the states that are each
affordable on their own and adds every state whose reduced cost ``1 - y^T P_j`` is positive until
none is left, which certifies optimality for the full LP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import highspy
import numpy as np
from numpy.typing import NDArray

from .step_occupancy import Occupancy

#: Risk-budget slack left unspent at every step to absorb LP round-off (HiGHS feasibility
#: tolerance is 1e-7 relative; we re-verify exactly after solving).
_BUDGET_SLACK = 1e-9
#: HiGHS options: dual simplex without presolve (the LPs are small and dense, presolve costs
#: more than it saves), silent.  Should HiGHS not reach optimality so, it retries with presolve.
_HIGHS_OPTIONS: dict[str, bool | int | float | str] = {"output_flag": False, "presolve": "off", "solver": "simplex"}
#: Reduced cost above which a state enters the restricted LP (pricing tolerance).
_PRICING_TOL = 1e-9
#: Relative overrun of a (scaled, unit) budget above which a null point enters as a row: HiGHS's
#: own primal feasibility tolerance, so rows in the model are never re-added.
_FEASIBILITY_TOL = 1e-7


def null_grid(n_max: int, alpha: float, size: int) -> NDArray[np.float64]:
    """Control points ``p^(i)`` of the diagonal null grid (seed 003 §IV-C, IX-E1/2).

    Evenly spaced in ``arcsin(sqrt(p))`` -- the Fisher-Rao geodesic coordinate of the Bernoulli
    pair ``(p, p)``, so neighbouring points have (nearly) equal KL gaps and the grid is dense near 0
    and 1 (spec pitfall 3) -- on ``[ε, 1 - ε]`` with ``ε = 1 - (1 - α)^{1/N_max}``: below ``ε``
    policy B scores no success in ``N_max`` trials with probability ``≥ 1 - α`` (and above
    ``1 - ε`` policy A never fails), and STEP never rejects unless ``S1 > S0``, so nulls outside
    the grid are safe (IX-E2).
    """
    eps = 1.0 - (1.0 - alpha) ** (1.0 / n_max)
    theta = np.linspace(np.arcsin(np.sqrt(eps)), np.arcsin(np.sqrt(1.0 - eps)), size)
    return np.sin(theta) ** 2


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
        r, c = block.shape
        self.highs.addRows(r, np.full(r, -highspy.kHighsInf), self.rhs[rows], block.size,
                           np.arange(r, dtype=np.int32) * c, np.tile(np.arange(c, dtype=np.int32), r),
                           np.ascontiguousarray(block).ravel())
        self.rows = np.concatenate((self.rows, rows))

    def add_cols(self, masses: NDArray[np.float64], cols: NDArray[np.intp]) -> None:
        """Add states ``cols`` (cost 1, bounds [0, 1]) with their entries in the model's rows."""
        block = masses[np.ix_(self.rows, cols)]  # (r, k), stored column-wise
        r, k = block.shape
        self.highs.addCols(k, np.ones(k), np.zeros(k), np.ones(k), block.size,
                           np.arange(k, dtype=np.int32) * r, np.tile(np.arange(r, dtype=np.int32), k),
                           np.ascontiguousarray(block.T).ravel())
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
    masses: NDArray[np.float64], budget: NDArray[np.float64], *, column_generation: bool = True
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
            violated = np.flatnonzero(masses @ w > rhs * (1.0 + _FEASIBILITY_TOL))
            violated = np.setdiff1d(violated, lp.rows)
            if violated.size:
                lp.add_rows(masses, violated)
                continue
            duals = np.zeros(n_points)
            duals[lp.rows] = row_duals
            reduced = 1.0 - duals @ masses
            reduced[lp.cols] = 0.0
            entering = np.flatnonzero(reduced > _PRICING_TOL)
            if entering.size == 0:  # feasible everywhere, no state improves it: optimal
                return w
            lp.add_cols(masses, entering)
    raise RuntimeError("STEP LP failed: HiGHS found no optimal solution")


def synthesize_weights(
    n_max: int,
    alpha: float,
    *,
    budget: float,
    grid_size: int = 129,
    column_generation: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[NDArray[np.float64]]:
    """Run the STEP synthesis, yielding ``w_n`` for ``n = 1..N_max`` in turn.

    ``alpha`` places the null grid (:func:`null_grid`); ``budget <= alpha`` is the total risk
    ``F(N_max)`` the LPs may spend.

    Step ``n`` yields an ``(n + 1, G_n)`` array: ``w_n(a, a + g)`` at ``[a, g - 1]`` for the
    gaps ``g = 1..G_n`` that still carry mass; larger gaps are unreachable without having stopped
    and take ``w = 1``.
    """
    grid = null_grid(n_max, alpha, grid_size)
    occupancy = Occupancy(grid, grid, n_max)
    spent = np.zeros(grid_size)
    for n in range(1, n_max + 1):
        occupancy.advance()
        allowed = np.maximum(budget * n / n_max - spent - _BUDGET_SLACK, 0.0)
        block = occupancy.reject_block(min(occupancy.half_width, n))
        reachable = np.asarray(block.any(axis=0), dtype=bool)
        valid_gap = np.flatnonzero(reachable.any(axis=0))
        gaps = int(valid_gap[-1]) + 1 if valid_gap.size else 0
        weights = np.ones((n + 1, gaps))
        a_idx, g_idx = np.nonzero(reachable[:, :gaps])
        columns = block[:, a_idx, g_idx]
        weights[a_idx, g_idx] = _solve_step(columns, allowed, column_generation=column_generation)
        rejected, _ = occupancy.stop(weights)
        spent += rejected
        if progress is not None:
            progress(n)
        yield weights
