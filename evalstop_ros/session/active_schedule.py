"""``schedule: active``: the next round's task of a session, by seed 004's task-level acquisition.

A pure function of the configuration, the journaled embeddings, the scores so far and the round, so
the audit replays every choice (docs/session.md, docs/active.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..active.acquisition import expected_information_gain, select
from ..active.costs import CostModel
from ..active.embeddings import policy_embeddings, task_embeddings
from ..active.shrinkage import ShrinkageSurrogate
from ..active.surrogate import Surrogate
from .config import SessionConfig

__all__ = ["STREAM_ACTIVE", "Observation", "TaskChoice", "choose_task", "session_embeddings"]

#: The plan stream of the active scheduler (after :data:`~evalstop_ros.session.plan.STREAMS`).
STREAM_ACTIVE = 8
#: Digits kept of journaled floats (embeddings, scores): the audit compares within 1e-6.
DIGITS = 8


@dataclasses.dataclass(frozen=True)
class Observation:
    """One effective score: policy and task indices in configuration order, the metric value."""

    policy: int
    task: int
    value: float


@dataclasses.dataclass(frozen=True)
class TaskChoice:
    """What :func:`choose_task` decided, as journaled in ``schedule_choice``."""

    task: int
    explored: bool
    scores: tuple[float, ...]
    n_data: int
    data_sha256: str


def session_embeddings(config: SessionConfig) -> dict[str, list[list[float]]]:
    """Policy and task embeddings of a session (journaled once, so replay needs no sentence model)."""
    settings = config.active_settings()
    texts = [task.description.strip() or task.id.replace("_", " ") for task in config.tasks]
    seed = int(np.random.default_rng([config.seed, STREAM_ACTIVE]).integers(2**31))
    tasks = task_embeddings(texts, settings.embedding, seed=seed)
    policies = policy_embeddings(len(config.policies), seed=seed)
    return {"policy": np.round(policies, DIGITS).tolist(), "task": np.round(tasks, DIGITS).tolist()}


def _costs(config: SessionConfig) -> CostModel:
    settings = config.active_settings()
    groups = tuple(settings.task_groups.get(task.id, f"task:{task.id}") for task in config.tasks)
    return CostModel(groups=groups, switch=settings.switch_cost, within_group=settings.within_group_cost)


def data_digest(data: Sequence[Observation]) -> str:
    """SHA-256 of the observations the choice saw (journaled; the audit compares it)."""
    text = json.dumps([[o.policy, o.task, round(o.value, DIGITS)] for o in data], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def choose_task(config: SessionConfig, embeddings: dict[str, list[list[float]]], data: Sequence[Observation], *,
                round_number: int, current_task: int | None, open_pairs: NDArray[np.bool_]) -> TaskChoice:
    """The task of round ``round_number`` (module docstring).

    Parameters
    ----------
    open_pairs:
        ``(M, N)``: policy ``i`` still has an open test on task ``j``.  Tasks without one are
        not candidates; a task's EIG sums over its open policies only.
    """
    settings = config.active_settings()
    rng = np.random.default_rng([config.seed, STREAM_ACTIVE, round_number])
    tasks_open: NDArray[np.bool_] = np.asarray(open_pairs.any(axis=0), dtype=bool)
    strategy = settings.strategy if data else "random-task"
    eig = None
    if strategy != "random-task":
        outcome = "binary" if (settings.metric or config.metrics[0].name) == "success" else "binned"
        surrogate: Surrogate | ShrinkageSurrogate
        if settings.surrogate == "shrinkage":
            surrogate = ShrinkageSurrogate(len(config.policies), embeddings["task"], outcome=outcome,
                                           draws=settings.draws)
        else:
            seed = int(np.random.default_rng([config.seed, STREAM_ACTIVE, 0]).integers(2**31))
            surrogate = Surrogate(embeddings["policy"], embeddings["task"], outcome=outcome, epochs=settings.epochs,
                                  seed=seed)
        surrogate.fit([o.policy for o in data], [o.task for o in data], [o.value for o in data])
        eig = expected_information_gain(surrogate.predict(samples=settings.mc_samples, seed=round_number))
        eig = np.where(open_pairs, eig, 0.0)
    choice = select(strategy, eig, rng=rng, costs=_costs(config), current_task=current_task,
                    cost_sensitivity=settings.cost_sensitivity, epsilon=settings.epsilon,
                    policies=np.ones(len(config.policies), dtype=bool), tasks=tasks_open)
    return TaskChoice(task=choice.task, explored=choice.explored,
                      scores=tuple(round(float(x), DIGITS) for x in np.ravel(choice.scores)),
                      n_data=len(data), data_sha256=data_digest(data))
