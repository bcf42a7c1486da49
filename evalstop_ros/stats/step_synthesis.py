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
Eq. 9 is read *cumulatively* (seed 003 Eqs. 7-10, with Eq. 9's budget F(n) cumulative): the increment-only reading
over-spends α.

The LP is solved exactly by column generation on HiGHS: states with no mass under any null are
unreachable and get ``w = 1`` for free; the restricted LP starts from the states that are each
affordable on their own and adds every state whose reduced cost ``1 - y^T P_j`` is positive until
none is left, which certifies optimality for the full LP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import scipy.optimize
from numpy.typing import NDArray

from .step_occupancy import Occupancy

#: Risk-budget slack left unspent at every step to absorb LP round-off (HiGHS feasibility
#: tolerance is 1e-7 relative; we re-verify exactly after solving).
_BUDGET_SLACK = 1e-9


def null_grid(n_max: int, alpha: float, size: int) -> NDArray[np.float64]:
    """Control points ``p^(i)`` of the diagonal null grid (seed 003 §IV-C, IX-E1/2).

    Evenly spaced in ``arcsin(sqrt(p))`` -- the Fisher-Rao geodesic coordinate of the Bernoulli
    pair ``(p, p)``, so neighbouring points have (nearly) equal KL gaps and the grid is dense near 0
    and 1 (seed 003 IX-E2) -- on ``[ε, 1 - ε]`` with ``ε = 1 - (1 - α)^{1/N_max}``: below ``ε``
    policy B scores no success in ``N_max`` trials with probability ``≥ 1 - α`` (and above
    ``1 - ε`` policy A never fails), and STEP never rejects unless ``S1 > S0``, so nulls outside
    the grid are safe (IX-E2).
    """
    eps = 1.0 - (1.0 - alpha) ** (1.0 / n_max)
    theta = np.linspace(np.arcsin(np.sqrt(eps)), np.arcsin(np.sqrt(1.0 - eps)), size)
    return np.sin(theta) ** 2


def _solve_step(
    masses: NDArray[np.float64], budget: NDArray[np.float64], *, column_generation: bool = True
) -> NDArray[np.float64]:
    """Solve Eq. 10 for one step: ``max sum(w)`` s.t. ``masses @ w <= budget``, ``0 <= w <= 1``.

    ``masses`` is ``(M, C)`` (null points x candidate states), all entries ``>= 0``.  Without
    ``column_generation`` the LP is solved over all candidates at once (the baseline of
    ``bench/step_synthesis.py``).
    """
    n_candidates = masses.shape[1]
    weights = np.zeros(n_candidates)
    if n_candidates == 0:
        return weights
    if column_generation:
        scale = np.where(budget > 0, budget, np.inf)[:, None]
        cost = (masses / scale).max(axis=0)  # the fraction of the tightest budget one state uses
        active = np.flatnonzero(cost <= 1.0)
        if active.size < 2 * masses.shape[0]:
            active = np.sort(np.argsort(cost, kind="stable")[: 2 * masses.shape[0]])
    else:
        active = np.arange(n_candidates)
    while True:
        sub = masses[:, active]
        result = scipy.optimize.linprog(
            -np.ones(active.size),
            A_ub=sub,
            b_ub=budget,
            bounds=(0.0, 1.0),
            method="highs",
        )
        if result.status != 0:
            raise RuntimeError(f"STEP LP failed: {result.message}")
        duals = -result.ineqlin.marginals  # y >= 0 for the maximisation
        reduced = 1.0 - duals @ masses
        reduced[active] = 0.0
        entering = np.flatnonzero(reduced > 1e-9)
        if entering.size == 0:
            assert result.x is not None  # a solved LP has a solution
            weights[active] = np.clip(result.x, 0.0, 1.0)
            return weights
        active = np.union1d(active, entering)


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
        reachable: NDArray[np.bool_] = np.asarray(block.any(axis=0), dtype=bool)
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
