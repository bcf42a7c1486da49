"""Algorithm 1 of seed 004 on a synthetic world: cost accounting and the task-level query."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.active import ActiveError
from evalstop_ros.active.loop import run_selection
from evalstop_ros.active.world import make_world


def test_task_level_queries_run_every_policy_and_pay_the_switch_costs() -> None:
    world = make_world("openvla", seed=1)
    m, _ = world.shape
    trace = run_selection(world, "random-task", budget=40.0, seed=1, embedding="random", epochs=5, holdout=2)
    # every query: M policies x d = 3 rollouts at c_eval 0.5, plus c_switch 0, 1 or 3 (App. D)
    step = np.diff(trace.cost) - 0.5 * m * 3
    assert set(np.round(step, 9)) <= {0.0, 1.0, 3.0}
    assert np.all(np.diff(trace.rollouts) == m * 3)
    assert trace.cost[0] == 0.5 * m * 3  # initialisation: one task, every policy, no switch charged
    assert trace.cost[-1] >= 40.0 > trace.cost[-2]


def test_pair_level_queries_run_one_policy() -> None:
    world = make_world("metaworld", outcome="binned", seed=2)
    trace = run_selection(world, "cost-eig", budget=25.0, seed=2, embedding="random", epochs=5, holdout=2,
                          mc_samples=3)
    assert np.all(np.diff(trace.rollouts) == 3)
    assert np.all(np.isfinite(trace.l1)) and np.all(trace.l1 < 1)
    assert np.all(np.isfinite(trace.log_likelihood))


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ActiveError, match="`strategy` should be one of"):
        run_selection(make_world(seed=0), "thompson", budget=1.0)
    with pytest.raises(ActiveError, match="`kind` should be one of"):
        make_world("hamster")
