"""Acquisition functions and the six strategies of seed 004 (§IV-B, Eq. 1-2, App. F): EIG/BALD and cost-aware EIG."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray

from .costs import CostModel
from .errors import ActiveError

__all__ = ["PAIR_STRATEGIES", "STRATEGIES", "TASK_STRATEGIES", "Selection", "entropy", "expected_information_gain",
           "select"]

PAIR_STRATEGIES = ("random", "eig", "cost-eig")
TASK_STRATEGIES = ("random-task", "task-eig", "cost-task-eig")
STRATEGIES = PAIR_STRATEGIES + TASK_STRATEGIES


def entropy(q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Shannon entropy (nats) over the last axis, ``0 log 0 = 0``."""
    q = np.clip(q, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0)
    return np.asarray(-terms.sum(axis=-1), dtype=np.float64)


def expected_information_gain(samples: NDArray[np.float64]) -> NDArray[np.float64]:
    """BALD (Eq. 1) of every pair from MC samples of shape ``(S, M, N, B)``; returns ``(M, N)``.

    >>> q = np.array([[[[0.9, 0.1]]], [[[0.1, 0.9]]]])  # two samples that disagree
    >>> round(float(expected_information_gain(q)[0, 0]), 4)  # h(0.5) - h(0.1) = ln 2 - 0.3251
    0.3681
    >>> float(expected_information_gain(np.full((3, 1, 1, 2), 0.5))[0, 0])  # agreement: no gain
    0.0
    """
    if samples.ndim != 4:
        raise ActiveError(f"`samples` must have shape (S, M, N, B); found {samples.shape}")
    gain = entropy(samples.mean(axis=0)) - entropy(samples).mean(axis=0)
    return np.asarray(np.maximum(gain, 0.0), dtype=np.float64)  # rounding can leave -1e-17


@dataclasses.dataclass(frozen=True)
class Selection:
    """One acquisition decision.

    Attributes
    ----------
    task:
        Chosen task index.
    policy:
        Chosen policy index (pair-level strategies), ``None`` for a task-level query.
    explored:
        The epsilon draw made it a uniform choice.
    scores:
        The acquisition values the argmax ran over: ``(M, N)`` pair-level, ``(N,)`` task-level.
    """

    task: int
    policy: int | None
    explored: bool
    scores: NDArray[np.float64]


def _argmax(scores: NDArray[np.float64], allowed: NDArray[np.bool_], rng: np.random.Generator) -> int:
    masked = np.where(allowed, scores, -np.inf)
    best = np.flatnonzero(masked >= masked.max() - 1e-12 * max(1.0, abs(float(masked.max()))))
    return int(rng.choice(best))


def select(strategy: str, eig: NDArray[np.float64] | None, *, rng: np.random.Generator, costs: CostModel,
           current_task: int | None, cost_sensitivity: float = 1.0, epsilon: float = 0.1,
           policies: NDArray[np.bool_] | None = None, tasks: NDArray[np.bool_] | None = None) -> Selection:
    """Choose the next query by ``strategy`` (module table).

    Parameters
    ----------
    strategy:
        One of :data:`STRATEGIES`.
    eig:
        ``(M, N)`` EIGs (:func:`expected_information_gain`); may be ``None`` for the random ones
        (then ``policies`` gives the number of policies).
    rng:
        The generator of the epsilon draw, the random strategies and the tie breaks.
    costs, current_task, cost_sensitivity:
        Eq. 2's ``c_switch``, ``T_cur`` (``None`` before the first query) and ``lambda``.
    epsilon:
        Probability of a uniform choice instead of the argmax.
    policies, tasks:
        Masks of the candidates (default: all).  A task-level sum runs over ``policies`` only.
    """
    if strategy not in STRATEGIES:
        raise ActiveError(f"`strategy` should be one of {STRATEGIES}; found {strategy!r}")
    if not 0.0 <= epsilon <= 1.0:
        raise ActiveError(f"`epsilon` must lie in [0, 1]; found {epsilon!r}")
    if cost_sensitivity < 0:
        raise ActiveError(f"`cost_sensitivity` must be >= 0; found {cost_sensitivity!r}")
    n_tasks = len(costs.groups)
    if eig is not None:
        n_policies = eig.shape[0]
    elif policies is not None:
        n_policies = len(policies)
    else:
        raise ActiveError("pass `eig` or the `policies` mask: the number of policies is unknown")
    policy_ok = np.ones(n_policies, dtype=bool) if policies is None else np.asarray(policies, dtype=bool)
    task_ok = np.ones(n_tasks, dtype=bool) if tasks is None else np.asarray(tasks, dtype=bool)
    if not policy_ok.any() or not task_ok.any():
        raise ActiveError("no candidate is left: every policy or every task is masked out")
    pair_ok = policy_ok[:, None] & task_ok[None, :]
    explored = bool(rng.random() < epsilon) or strategy in ("random", "random-task")
    if strategy in ("eig", "cost-eig", "task-eig", "cost-task-eig"):
        if eig is None or eig.shape != (n_policies, n_tasks):
            raise ActiveError(f"strategy {strategy!r} needs `eig` of shape ({n_policies}, {n_tasks})")
    divisor = cost_sensitivity * costs.switch_vector(current_task) + 1.0
    if strategy in PAIR_STRATEGIES:
        if explored:
            flat = int(rng.choice(np.flatnonzero(pair_ok.ravel())))
            scores = np.zeros((n_policies, n_tasks)) if eig is None else eig
        else:
            assert eig is not None
            scores = eig / divisor[None, :] if strategy == "cost-eig" else eig
            flat = _argmax(scores.ravel(), pair_ok.ravel(), rng)
        policy, task = divmod(flat, n_tasks)
        return Selection(task=task, policy=policy, explored=explored, scores=scores)
    if explored:
        task = int(rng.choice(np.flatnonzero(task_ok)))
        scores = np.zeros(n_tasks) if eig is None else eig[policy_ok].sum(axis=0)
        return Selection(task=task, policy=None, explored=True, scores=scores)
    assert eig is not None
    scores = eig[policy_ok].sum(axis=0)
    if strategy == "cost-task-eig":
        scores = scores / divisor
    return Selection(task=_argmax(scores, task_ok, rng), policy=None, explored=False, scores=scores)
