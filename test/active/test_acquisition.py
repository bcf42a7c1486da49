"""BALD (seed 004 Eq. 1), cost-aware EIG (Eq. 2) and the six strategies (App. F)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalstop_ros.active import ActiveError, CostModel, expected_information_gain, select
from evalstop_ros.active.acquisition import STRATEGIES, TASK_STRATEGIES, entropy


def test_bald_bernoulli_matches_the_closed_form() -> None:
    # I = h(mean p) - mean h(p), h the binary entropy (Eq. 1 with a Bernoulli Q).
    p = np.array([0.1, 0.7, 0.4])
    samples = np.stack([1 - p, p], axis=-1)[:, None, None, :]
    h = lambda x: -x * math.log(x) - (1 - x) * math.log(1 - x)  # noqa: E731
    expected = h(p.mean()) - np.mean([h(x) for x in p])
    assert expected_information_gain(samples)[0, 0] == pytest.approx(expected, abs=1e-12)


def test_bald_is_bounded_by_log_of_the_classes() -> None:
    rng = np.random.default_rng(0)
    samples = rng.dirichlet(np.ones(25) * 0.1, size=(10, 4, 6))
    gain = expected_information_gain(samples)
    assert gain.shape == (4, 6)
    assert np.all(gain >= 0) and np.all(gain <= math.log(25))
    one_hot = np.eye(25)[rng.integers(25, size=(25, 1, 1))]  # samples that disagree completely
    assert expected_information_gain(one_hot)[0, 0] == pytest.approx(entropy(one_hot.mean(axis=0))[0, 0])


def test_cost_aware_eig_prefers_the_current_task_when_gains_tie() -> None:
    costs = CostModel.uniform(3, switch=1.0)
    eig = np.array([[0.2, 0.3, 0.3]])
    rng = np.random.default_rng(1)
    plain = select("eig", eig, rng=rng, costs=costs, current_task=2, epsilon=0.0)
    aware = select("cost-eig", eig, rng=rng, costs=costs, current_task=0, epsilon=0.0, cost_sensitivity=1.0)
    assert plain.task in (1, 2)
    assert aware.task == 0  # 0.2 / 1 beats 0.3 / (1 + 1)
    assert aware.scores[0].tolist() == pytest.approx([0.2, 0.15, 0.15])


def test_task_level_sums_over_open_policies_and_respects_masks() -> None:
    costs = CostModel(groups=("x", "x", "y"), switch=5.0)
    eig = np.array([[0.1, 0.0, 0.4], [0.1, 0.5, 0.0]])
    rng = np.random.default_rng(2)
    assert select("task-eig", eig, rng=rng, costs=costs, current_task=None, epsilon=0.0).task == 1
    masked = select("task-eig", eig, rng=rng, costs=costs, current_task=None, epsilon=0.0,
                    tasks=np.array([True, False, True]))
    assert masked.task == 2
    aware = select("cost-task-eig", eig, rng=rng, costs=costs, current_task=0, epsilon=0.0)
    assert aware.task == 1 and aware.policy is None  # same group: no switch cost


def test_epsilon_and_random_strategies_are_uniform() -> None:
    costs = CostModel.uniform(4)
    rng = np.random.default_rng(3)
    picks = [select("random-task", None, rng=rng, costs=costs, current_task=None,
                    policies=np.ones(2, dtype=bool)).task for _ in range(4000)]
    counts = np.bincount(picks, minlength=4)
    assert np.all(np.abs(counts - 1000) < 4 * math.sqrt(4000 * 0.25 * 0.75)), counts
    eig = np.array([[1.0, 0.0, 0.0, 0.0]])
    explored = [select("eig", eig, rng=rng, costs=costs, current_task=None, epsilon=0.1) for _ in range(2000)]
    rate = np.mean([s.explored for s in explored])
    assert abs(rate - 0.1) < 4 * math.sqrt(0.1 * 0.9 / 2000), rate


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"strategy": "greedy"}, "`strategy` should be one of"),
    ({"epsilon": 1.5}, "`epsilon` must lie in"),
    ({"cost_sensitivity": -1.0}, "`cost_sensitivity` must be >= 0"),
    ({"eig": None, "strategy": "eig"}, "the number of policies is unknown"),
    ({"tasks": np.zeros(2, dtype=bool)}, "no candidate is left"),
])
def test_bad_input_is_refused(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"strategy": "task-eig", "eig": np.ones((1, 2)), "rng": np.random.default_rng(0),
                               "costs": CostModel.uniform(2), "current_task": None}
    args.update(kwargs)
    strategy = args.pop("strategy")
    eig = args.pop("eig")
    with pytest.raises(ActiveError, match=message):
        select(strategy, eig, **args)  # type: ignore[arg-type]


def test_strategy_table_is_the_papers() -> None:
    assert set(STRATEGIES) == {"random", "eig", "cost-eig", "random-task", "task-eig", "cost-task-eig"}
    assert set(TASK_STRATEGIES) < set(STRATEGIES)


def test_cost_model_totals_app_d() -> None:
    # MetaWorld (App. D): c_eval 0.5, +1 when the object changes, 0 for the same object.
    costs = CostModel(groups=("drawer", "drawer", "window"))
    assert costs.total([0, 0, 1, 2, 2]) == pytest.approx(5 * 0.5 + 0 + 1)
    with pytest.raises(ActiveError, match="`switch` must be a finite cost"):
        CostModel(groups=("a",), switch=-1.0)
