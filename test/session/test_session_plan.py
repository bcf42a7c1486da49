"""Tests of evalstop_ros.session.plan: determinism, balance, blinding and tokens."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import math
import re
from collections import Counter

import pytest
from session_sim import make_config

from evalstop_ros.session.plan import LABELS, Plan

THREE = ["pi0", "pi1", "pi2"]
TWO_TASKS = [
    {"id": "a", "initial_conditions": [{"id": f"a{i}", "reset_instructions": "r"} for i in range(3)]},
    {"id": "b", "initial_conditions": [{"id": f"b{i}", "reset_instructions": "r"} for i in range(2)]},
]


def test_plan_is_a_pure_function_of_the_config():
    config = make_config(policies=THREE, tasks=TWO_TASKS)
    one, two = Plan(config), Plan(config)
    for k in range(1, 40):
        assert one.round_order(k, THREE) == two.round_order(k, THREE)
        assert one.condition(k) == two.condition(k)
        assert one.label("pi1", k) == two.label("pi1", k)
        assert one.token("s", k) == two.token("s", k)
    assert one.step_seed(2, 1) == two.step_seed(2, 1)


def test_another_seed_gives_another_plan():
    one, two = Plan(make_config(policies=THREE, seed=1)), Plan(make_config(policies=THREE, seed=2))
    assert [one.round_order(k, THREE) for k in range(1, 20)] != [two.round_order(k, THREE) for k in range(1, 20)]
    assert one.step_seed(0, 0) != two.step_seed(0, 0)


def test_streams_do_not_depend_on_each_other():
    # Asking for conditions or tokens first must not change the order of any round.
    plan = Plan(make_config(policies=THREE))
    before = [plan.round_order(k, THREE) for k in range(1, 10)]
    for k in range(1, 50):
        plan.condition(k), plan.token("s", k), plan.label("pi0", k)
    assert [plan.round_order(k, THREE) for k in range(1, 10)] == before


def test_round_order_is_a_permutation_of_the_active_policies_in_config_order():
    plan = Plan(make_config(policies=THREE))
    for k in range(1, 30):
        assert sorted(plan.round_order(k, THREE)) == THREE
        assert sorted(plan.round_order(k, ["pi2", "pi0"])) == ["pi0", "pi2"]
    # The answer does not depend on how the caller ordered the active set.
    assert plan.round_order(7, ["pi2", "pi0"]) == plan.round_order(7, ["pi0", "pi2"])


def test_round_order_puts_every_policy_in_every_position_equally_often():
    plan = Plan(make_config(policies=THREE))
    rounds = 3000
    counts = Counter((position, policy) for k in range(1, rounds + 1)
                     for position, policy in enumerate(plan.round_order(k, THREE)))
    expected, se = rounds / 3, math.sqrt(rounds * (1 / 3) * (2 / 3))
    for position, policy in itertools.product(range(3), THREE):
        assert abs(counts[position, policy] - expected) < 4 * se, (position, policy, counts[position, policy], expected, se)


def test_shuffled_cycle_visits_every_condition_once_per_cycle():
    plan = Plan(make_config())
    ids = [plan.condition(k).initial_condition.id for k in range(1, 31)]
    for start in range(0, 30, 3):
        assert sorted(ids[start:start + 3]) == ["c0", "c1", "c2"]
    assert len({tuple(ids[s:s + 3]) for s in range(0, 30, 3)}) > 1  # the order is re-drawn per cycle


def test_shuffled_cycle_balances_tasks_and_each_tasks_conditions():
    plan = Plan(make_config(tasks=TWO_TASKS))
    draws = [plan.condition(k) for k in range(1, 25)]  # 12 task cycles
    for start in range(0, 24, 2):
        assert sorted(d.task.id for d in draws[start:start + 2]) == ["a", "b"]
    a_ids = [d.initial_condition.id for d in draws if d.task.id == "a"]
    b_ids = [d.initial_condition.id for d in draws if d.task.id == "b"]
    assert all(sorted(a_ids[s:s + 3]) == ["a0", "a1", "a2"] for s in range(0, 12, 3))
    assert all(sorted(b_ids[s:s + 2]) == ["b0", "b1"] for s in range(0, 12, 2))


def test_iid_schedule_draws_conditions_uniformly():
    plan = Plan(make_config(condition_schedule="iid"))
    draws = 3000
    counts = Counter(plan.condition(k).initial_condition.id for k in range(1, draws + 1))
    se = math.sqrt(draws * (1 / 3) * (2 / 3))
    assert all(abs(counts[c] - draws / 3) < 4 * se for c in ("c0", "c1", "c2")), counts
    # i.i.d.: some window of three draws repeats a condition (a cycle never does).
    ids = [plan.condition(k).initial_condition.id for k in range(1, 31)]
    assert any(len(set(ids[s:s + 3])) < 3 for s in range(0, 30, 3))


def test_condition_index_starts_at_one():
    with pytest.raises(ValueError, match=r"`k` must be a positive integer; found 0"):
        Plan(make_config()).condition(0)


def test_per_session_labels_are_distinct_neutral_and_fixed():
    config = make_config(policies=THREE)
    plan = Plan(config)
    labels = {p: plan.label(p, 1) for p in THREE}
    assert sorted(labels.values()) == sorted(LABELS[:3]) == ["X", "Y", "Z"]
    assert all(plan.label(p, k) == labels[p] for p in THREE for k in range(2, 20))


def test_per_session_label_mapping_is_random_across_seeds():
    mappings = {tuple(Plan(make_config(policies=THREE, seed=s)).label(p, 1) for p in THREE) for s in range(20)}
    assert len(mappings) > 1


def test_per_round_labels_are_distinct_within_a_round_and_redrawn_across_rounds():
    plan = Plan(make_config(policies=THREE, blinding="per-round"))
    per_round = [tuple(plan.label(p, k) for p in THREE) for k in range(1, 30)]
    assert all(sorted(labels) == ["X", "Y", "Z"] for labels in per_round)
    assert len(set(per_round)) > 1


def test_token_is_12_hex_characters_of_an_hmac():
    plan = Plan(make_config(seed=9))
    token = plan.token("session-1", 17)
    assert re.fullmatch(r"[0-9a-f]{12}", token)
    secret = hashlib.sha256(b"evalstop-token\x009\x00session-1").digest()
    assert token == hmac.new(secret, b"17", hashlib.sha256).hexdigest()[:12]


def test_tokens_differ_by_trial_session_and_seed():
    plan, other_seed = Plan(make_config(seed=9)), Plan(make_config(seed=10))
    tokens = [plan.token("s", t) for t in range(1, 200)]
    assert len(set(tokens)) == len(tokens)
    assert plan.token("s", 1) != plan.token("t", 1)
    assert plan.token("s", 1) != other_seed.token("s", 1)


def test_step_seeds_differ_by_comparison_and_metric():
    plan = Plan(make_config())
    seeds = {plan.step_seed(c, m) for c in range(5) for m in range(2)}
    assert len(seeds) == 10


# -- multi-task and AdaStop --------------------------------------------------------------------
def test_task_condition_cycles_each_tasks_conditions_on_its_own():
    plan = Plan(make_config(tasks=TWO_TASKS))
    a_ids = [plan.task_condition(0, j).id for j in range(1, 13)]
    assert all(sorted(a_ids[s:s + 3]) == ["a0", "a1", "a2"] for s in range(0, 12, 3))
    assert [plan.task_condition(1, j).id for j in range(1, 5)] == [Plan(make_config(tasks=TWO_TASKS)).task_condition(
        1, j).id for j in range(1, 5)]
    with pytest.raises(ValueError, match=r"`j` must be a positive integer; found 0"):
        plan.task_condition(0, 0)


def test_iid_task_condition_draws_uniformly():
    plan = Plan(make_config(tasks=TWO_TASKS, condition_schedule="iid"))
    draws = 3000
    counts = Counter(plan.task_condition(0, j).id for j in range(1, draws + 1))
    se = math.sqrt(draws * (1 / 3) * (2 / 3))
    assert all(abs(counts[c] - draws / 3) < 4 * se for c in ("a0", "a1", "a2")), counts


def test_interim_order_runs_n_trials_of_each_active_agent_in_a_random_order():
    plan = Plan(make_config(policies=THREE))
    orders = [plan.interim_order(k, ["pi2", "pi0"], 4) for k in range(1, 20)]
    assert all(sorted(order) == ["pi0"] * 4 + ["pi2"] * 4 for order in orders)
    assert len(set(orders)) > 1  # re-drawn every interim
    assert plan.interim_order(3, ["pi0", "pi2"], 4) == orders[2]  # the caller's order does not matter
    assert Plan(make_config(policies=THREE)).interim_order(3, ["pi0", "pi2"], 4) == orders[2]


def test_adastop_seed_is_fixed_by_the_session_seed():
    assert Plan(make_config(seed=3)).adastop_seed() == Plan(make_config(seed=3)).adastop_seed()
    assert Plan(make_config(seed=3)).adastop_seed() != Plan(make_config(seed=4)).adastop_seed()
