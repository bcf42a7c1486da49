"""Monte Carlo of the tests' level when an adaptive (adversarial) scheduler picks each round's task (docs/active.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..stats.registry import make_process
from ..stats.sequential import Decision

__all__ = ["FprResult", "per_task_fpr", "pooled_fpr"]


@dataclasses.dataclass(frozen=True)
class FprResult:
    """Rejection rates with their Monte Carlo standard errors.

    Attributes
    ----------
    per_task:
        ``(T,)`` share of replicates in which task ``t``'s test claimed "B better".
    family:
        Share in which any test did (the ``any`` / ``per-task`` claim's family-wise error).
    reps:
        Replicates.
    """

    per_task: NDArray[np.float64]
    family: float
    reps: int

    def se(self, rate: float) -> float:
        """Binomial standard error of a rate at the true value ``rate``."""
        return float(np.sqrt(rate * (1 - rate) / self.reps))


def per_task_fpr(method: str, null_success: Sequence[float], *, alpha: float, n_max: int, rounds: int,
                 reps: int, seed: int = 0, bins: int = 2) -> FprResult:
    """Level of per-task tests (``alternative="greater"``, each at ``alpha``) under the adversary.

    Task ``t`` has success probability ``null_success[t]`` for both policies (a worst-case null
    of the binary tests is on the boundary ``p_a = p_b``).  ``rounds`` rounds in all; a task
    leaves the rotation when its test decides or reaches ``n_max`` pairs.
    """
    rng = np.random.default_rng(seed)
    n_tasks = len(null_success)
    stop = np.zeros((reps, n_tasks), dtype=np.int64)  # pair count of a "B better" decision, 0: none
    drift = np.zeros((reps, n_tasks, n_max + 1))  # running sum of b - a after k pairs
    for t, p in enumerate(null_success):
        a = (rng.random((reps, n_max)) < p).astype(np.float64)
        b = (rng.random((reps, n_max)) < p).astype(np.float64)
        process = make_process(method, reps, alpha=alpha, alternative="greater", n_max=n_max,
                               seed=int(rng.integers(2**62)), bins=bins)
        for k in range(n_max):
            process.update(a[:, k], b[:, k])
        won = process.decision == Decision.B_BETTER
        stop[:, t] = np.where(won, process.stopping_trial, 0)
        drift[:, t, 1:] = np.cumsum(b - a, axis=1)
    counts = np.zeros((reps, n_tasks), dtype=np.int64)
    rows = np.arange(reps)
    for _ in range(rounds):
        decided = (stop > 0) & (counts >= stop)
        open_ = (counts < n_max) & ~decided
        if not open_.any():
            break
        lead = np.take_along_axis(drift, counts[:, :, None], axis=2)[:, :, 0]
        lead = np.where(open_, lead + 1e-9 * rng.random(lead.shape), -np.inf)
        chosen = lead.argmax(axis=1)
        live = open_.any(axis=1)
        counts[rows[live], chosen[live]] += 1
    rejected = (stop > 0) & (counts >= stop)
    return FprResult(rejected.mean(axis=0), float(rejected.any(axis=1).mean()), reps)


def pooled_fpr(method: str, success_a: Sequence[float], success_b: Sequence[float], *, alpha: float, rounds: int,
               reps: int, seed: int = 0, bins: int = 2) -> FprResult:
    """Level of one test pooled over tasks when the adversary picks each round's task.

    With ``mean(success_b) == mean(success_a)`` "B no better on average over the tasks" is true,
    yet the adversary keeps running the tasks where B happens to lead.
    """
    rng = np.random.default_rng(seed)
    pa, pb = np.asarray(success_a), np.asarray(success_b)
    process = make_process(method, reps, alpha=alpha, alternative="greater", n_max=rounds,
                           seed=int(rng.integers(2**62)), bins=bins)
    drift = np.zeros((reps, len(pa)))
    for _ in range(rounds):
        chosen = (drift + 1e-9 * rng.random(drift.shape)).argmax(axis=1)
        a = (rng.random(reps) < pa[chosen]).astype(np.float64)
        b = (rng.random(reps) < pb[chosen]).astype(np.float64)
        drift[np.arange(reps), chosen] += b - a
        process.update(a, b)
    rate = float((process.decision == Decision.B_BETTER).mean())
    return FprResult(np.array([rate]), rate, reps)
