"""Type-I error of the tests ``schedule: active`` allows, against an adaptive adversarial scheduler.

Monte Carlo (evalstop_ros.active.validity): the scheduler runs, after every round, the open task
whose pairs favour B the most -- a predictable choice like seed 004's acquisitions, but aimed at
false claims.  Nulls on the binary boundary ``p_a = p_b`` (worst case of the binary tests).
Bound: rate <= alpha + 2 SE, SE = sqrt(alpha (1 - alpha) / reps).
"""

from __future__ import annotations

import pytest

from evalstop_ros.active.validity import per_task_fpr, pooled_fpr
from evalstop_ros.stats.registry import METHODS

REPS = 4000


@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_task_test_keeps_its_level(method: str) -> None:
    alpha = 0.05
    result = per_task_fpr(method, [0.5, 0.3, 0.8], alpha=alpha, n_max=50, rounds=120, reps=REPS, seed=11)
    bound = alpha + 2 * result.se(alpha)
    for task, rate in enumerate(result.per_task):
        assert rate <= bound, f"{method}, task {task}: FPR {rate:.4f} > alpha + 2 SE = {bound:.4f}"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_any_claim_with_bonferroni_over_tasks_keeps_the_family_level(method: str) -> None:
    alpha, tasks = 0.05, 2  # per-task level alpha / T = 0.025 (claim 'any', task_correction 'bonferroni')
    result = per_task_fpr(method, [0.5, 0.3], alpha=alpha / tasks, n_max=50, rounds=100, reps=REPS, seed=12)
    bound = alpha + 2 * result.se(alpha)
    assert result.family <= bound, f"{method}: family-wise FPR {result.family:.4f} > {bound:.4f}"


def test_pooled_test_loses_its_level_under_adaptive_task_choice() -> None:
    # Why config refuses claim 'pooled' with schedule 'active': B is better on task 0 and worse
    # on task 1 by as much, so B is no better on average -- but the scheduler keeps running the
    # task where B leads, and even the anytime-valid N-SCORE then "finds" B better.
    result = pooled_fpr("nscore", [0.2, 0.8], [0.8, 0.2], alpha=0.05, rounds=100, reps=1000, seed=13)
    assert result.family > 0.5, f"pooled FPR {result.family:.3f}: the adversary should break the pooled null"
