"""STEP synthesis internals (seed 003 Eq. 10): the LP's columns and its row and column generation."""

import numpy as np
from scipy.optimize import linprog

from evalstop_ros.stats.step_occupancy import Occupancy
from evalstop_ros.stats.step_synthesis import _mirror_pairs, _solve_step, _StepLP, null_grid


def test_paired_gather_equals_both_states_gathered_in_full():
    """Occupancy.pair_mass gathers each group of points over the rows it holds only: it equals, bit for
    bit, the mass of each pair's lower state plus that of its mirror read from the whole band."""
    n_max = 120
    lower = null_grid(n_max, 0.05, 61)[:31]  # 31 points: the last group has 3
    occupancy = Occupancy(lower, lower, n_max, floor=1e-9)
    for n in range(1, 91):
        occupancy.advance()
        gaps = min(occupancy.half_width, n)
        threshold = int(2.0 * np.sqrt(n)) + 1  # a crude region: w = 1 from this gap on
        occupancy.stop((np.arange(1, gaps + 1)[None, :] >= threshold) * np.ones((n + 1, 1)))
    n = occupancy.n
    assert occupancy._lo.max() > 0 and occupancy._hi.min() < n  # the floor dropped rows of some groups
    reachable = occupancy.reach(min(occupancy.half_width, n))
    low, high, gap = _mirror_pairs(reachable, n)
    assert np.any(high == low) and np.any(high != low)
    column = occupancy.half_width + 1 + gap
    expected = occupancy.mass[:, low, column] + np.where(high != low, occupancy.mass[:, high, column], 0.0)
    paired = occupancy.pair_mass(low, high, gap)
    assert np.array_equal(paired.view(np.int64), expected.view(np.int64))


def test_the_grown_lp_is_optimal_for_the_full_lp():
    """Row and column generation (only the states with w > 0 summed for the spend, only the null points
    with a nonzero dual for the pricing) ends at an optimum of the full LP: the same objective as HiGHS
    on all rows and columns, and within every budget up to HiGHS's tolerance."""
    rng = np.random.default_rng(11)
    for trial in range(6):
        points, states = 24, 400
        masses = rng.random((points, states)) ** 4 * (rng.random((points, states)) < 0.35)  # sparse, as the band
        budget = rng.uniform(0.5, 3.0, points)
        budget[trial % points] = 0.0 if trial % 3 == 0 else budget[trial % points]  # a null point with nothing left
        weights = _solve_step(masses, budget)
        full = linprog(-np.ones(states), A_ub=masses, b_ub=budget, bounds=(0.0, 1.0), method="highs")
        assert full.status == 0
        assert abs(weights.sum() + full.fun) <= 1e-7 * states, trial
        # HiGHS's feasibility tolerance (1e-7) on rows scaled to a unit budget (1 where none is left)
        assert np.all(masses @ weights <= budget + 1e-7 * np.where(budget > 0, budget, 1.0)), trial


def test_the_lp_model_holds_the_nonzero_entries_of_its_blocks():
    """_StepLP hands HiGHS each block's nonzero entries only; its matrix is the dense block's, zeros left out."""
    rng = np.random.default_rng(3)
    masses = rng.random((6, 9)) * (rng.random((6, 9)) < 0.5)
    lp = _StepLP(np.ones(6), presolve=False)
    lp.add_rows(masses, np.array([4, 1]))
    lp.add_cols(masses, np.array([0, 3, 8, 5]))
    lp.add_rows(masses, np.array([2]))
    lp.add_cols(masses, np.array([7]))
    model = lp.highs.getLp().a_matrix_
    dense = np.zeros((lp.rows.size, lp.cols.size))
    if model.format_ == model.format_.kRowwise:
        for row, (start, stop) in enumerate(zip(model.start_[:-1], model.start_[1:])):
            dense[row, np.asarray(model.index_[start:stop], dtype=np.intp)] = model.value_[start:stop]
    else:
        for col, (start, stop) in enumerate(zip(model.start_[:-1], model.start_[1:])):
            dense[np.asarray(model.index_[start:stop], dtype=np.intp), col] = model.value_[start:stop]
    assert np.array_equal(dense, masses[np.ix_(lp.rows, lp.cols)])
    assert model.start_[-1] == np.count_nonzero(masses[np.ix_(lp.rows, lp.cols)])
