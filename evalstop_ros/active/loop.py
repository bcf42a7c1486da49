"""Algorithm 1 of seed 004: active experiment selection on a simulated world, with its metrics (docs/active.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray

from .acquisition import STRATEGIES, expected_information_gain, select
from .embeddings import policy_embeddings, task_embeddings
from .errors import ActiveError
from .shrinkage import ShrinkageSurrogate
from .surrogate import Surrogate
from .world import World

__all__ = ["SURROGATES", "Trace", "run_selection"]

#: Surrogates Algorithm 1 can run on: seed 004's MLP and the shrinkage GP.
SURROGATES = ("mlp", "shrinkage")


@dataclasses.dataclass(frozen=True)
class Trace:
    """Metrics after the initialisation and after every query of one run."""

    strategy: str
    cost: NDArray[np.float64]
    rollouts: NDArray[np.int64]
    l1: NDArray[np.float64]
    log_likelihood: NDArray[np.float64]
    tasks_visited: NDArray[np.int64]


def run_selection(world: World, strategy: str, *, budget: float, seed: int = 0, embedding: str = "verb",
                  repeats: int = 3, epsilon: float = 0.1, mc_samples: int = 10, cost_sensitivity: float = 1.0,
                  epochs: int = 30, lr: float = 1e-4, holdout: int = 10, surrogate_kind: str = "mlp") -> Trace:
    """Run Algorithm 1 with ``strategy`` until ``budget`` cost is spent (module docstring).

    ``surrogate_kind``: ``"mlp"`` (seed 004's, :class:`~.surrogate.Surrogate`, warm-started
    between queries with the paper's lr 1e-4 (App. B-B), ``epochs`` full-batch epochs per query)
    or ``"shrinkage"`` (:class:`~.shrinkage.ShrinkageSurrogate`, closed form).
    """
    if strategy not in STRATEGIES:
        raise ActiveError(f"`strategy` should be one of {STRATEGIES}; found {strategy!r}")
    if surrogate_kind not in SURROGATES:
        raise ActiveError(f"`surrogate_kind` should be one of {SURROGATES}; found {surrogate_kind!r}")
    rng = np.random.default_rng([seed, 1])
    m, n = world.shape
    tasks_embedded = task_embeddings(world.descriptions, embedding, seed=seed)
    surrogate: Surrogate | ShrinkageSurrogate
    if surrogate_kind == "shrinkage":
        surrogate = ShrinkageSurrogate(m, tasks_embedded, outcome=world.outcome)
    else:
        surrogate = Surrogate(policy_embeddings(m, seed=seed), tasks_embedded, outcome=world.outcome, epochs=epochs,
                              lr=lr, seed=seed)
    grid = np.indices((m, n)).reshape(2, -1).repeat(holdout, axis=1)
    held = world.sample(grid[0], grid[1], np.random.default_rng([seed, 2]))
    truth = world.true_mean()
    policies: list[NDArray[np.int64]] = []
    tasks: list[NDArray[np.int64]] = []
    outcomes: list[NDArray[np.float64]] = []
    log: dict[str, list[float]] = {"cost": [], "rollouts": [], "l1": [], "ll": [], "visited": []}

    def run(policy: NDArray[np.int64], task: int) -> None:
        p = np.repeat(policy, repeats)
        t = np.full(p.shape, task)
        policies.append(p)
        tasks.append(t)
        outcomes.append(world.sample(p, t, rng))
        surrogate.fit(np.concatenate(policies), np.concatenate(tasks), np.concatenate(outcomes), warm_start=True)
        log["rollouts"].append(sum(len(x) for x in policies))
        log["l1"].append(float(np.abs(surrogate.mean() - truth).mean()))
        log["ll"].append(surrogate.log_likelihood(grid[0], grid[1], held))
        log["visited"].append(len(np.unique(np.concatenate(tasks))))

    current = int(rng.integers(n))
    cost = world.costs.query(task=current, policies=m, rollouts=repeats, previous_task=None)
    run(np.arange(m), current)
    log["cost"].append(cost)
    while cost < budget:
        eig = None
        if strategy not in ("random", "random-task"):
            eig = expected_information_gain(surrogate.predict(samples=mc_samples, seed=int(rng.integers(2**31))))
        choice = select(strategy, eig, rng=rng, costs=world.costs, current_task=current,
                        cost_sensitivity=cost_sensitivity, epsilon=epsilon, policies=np.ones(m, dtype=bool))
        chosen = np.arange(m) if choice.policy is None else np.array([choice.policy])
        cost += world.costs.query(task=choice.task, policies=len(chosen), rollouts=repeats, previous_task=current)
        current = choice.task
        run(chosen, current)
        log["cost"].append(cost)
    return Trace(strategy, np.array(log["cost"]), np.array(log["rollouts"], dtype=np.int64), np.array(log["l1"]),
                 np.array(log["ll"]), np.array(log["visited"], dtype=np.int64))
