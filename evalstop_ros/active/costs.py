"""The cost model of seed 004 (§III, App. D): evaluation cost per rollout plus switch costs (docs/active.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .errors import ActiveError

__all__ = ["CostModel"]


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Evaluation and switch costs (seed 004 App. D; defaults: MetaWorld's).

    Attributes
    ----------
    groups:
        Group label of every task (same label: ``within_group`` switch cost).
    evaluation:
        ``c_eval`` per rollout (0.5 on every dataset of the paper).
    switch:
        Task switch between groups.
    within_group:
        Task switch inside a group.
    policy_switch:
        Loading another policy (0 in the paper).

    Examples
    --------
    >>> costs = CostModel(groups=("drawer", "drawer", "window"))
    >>> costs.task_switch(0, 1), costs.task_switch(1, 2), costs.task_switch(2, 2)
    (0.0, 1.0, 0.0)
    >>> costs.query(task=2, policies=1, rollouts=3, previous_task=0)
    2.5
    """

    groups: tuple[str, ...]
    evaluation: float = 0.5
    switch: float = 1.0
    within_group: float = 0.0
    policy_switch: float = 0.0

    def __post_init__(self) -> None:
        for name in ("evaluation", "switch", "within_group", "policy_switch"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ActiveError(f"`{name}` must be a finite cost >= 0; found {value!r}")

    @classmethod
    def uniform(cls, n_tasks: int, **costs: float) -> CostModel:
        """Every task its own group: each task change costs ``switch``."""
        return cls(groups=tuple(str(j) for j in range(n_tasks)), **costs)

    def task_switch(self, current: int | None, task: int) -> float:
        """``c_switch(T_cur, T_j)``; 0 for the same task and for the first task (nothing to reset from)."""
        if current is None or current == task:
            return 0.0
        return self.within_group if self.groups[current] == self.groups[task] else self.switch

    def switch_vector(self, current: int | None) -> NDArray[np.float64]:
        """``c_switch(T_cur, T_j)`` for every task ``j`` (Eq. 2's denominator input)."""
        return np.array([self.task_switch(current, j) for j in range(len(self.groups))])

    def query(self, *, task: int, policies: int, rollouts: int, previous_task: int | None,
              policy_changes: int = 0) -> float:
        """Cost of one query: ``policies x rollouts`` evaluations, the task switch, policy reloads."""
        return (self.evaluation * policies * rollouts + self.task_switch(previous_task, task)
                + self.policy_switch * policy_changes)

    def total(self, tasks: Sequence[int], policies: Sequence[int] | None = None) -> float:
        """``c_total`` of an executed sequence of rollouts (module docstring)."""
        cost = self.evaluation * len(tasks)
        cost += sum(self.task_switch(a, b) for a, b in zip(tasks[:-1], tasks[1:]))
        if policies is not None:
            cost += self.policy_switch * sum(a != b for a, b in zip(policies[:-1], policies[1:]))
        return float(cost)
