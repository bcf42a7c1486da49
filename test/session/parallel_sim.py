"""Rounds on several runners with outcome-dependent durations, fed to a sequential test in plan order or
in completion order (docs/parallel.md, "Checked by Monte Carlo"; test_parallel_validity.py, bench/parallel_order.py).

A paired round (policy A, then B, on one runner) lasts as long as its two episodes; a success
ends at once (``end_on_success``), A's failures are caught fast and B's run to the timeout, so the
rounds B wins finish first.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from evalstop_ros.stats.registry import make_process
from evalstop_ros.stats.sequential import Decision

#: Episode seconds: a success, A's failure (caught fast), B's failure (runs to the timeout).
SUCCESS_S, FAIL_A_S, FAIL_B_S = 2.0, 1.0, 10.0


def completion_order(success_a: NDArray[np.bool_], success_b: NDArray[np.bool_], runners: int,
                     rng: np.random.Generator) -> NDArray[np.int64]:
    """``(R, n)`` round indices in the order the rounds finish when ``runners`` runners take the rounds
    in plan order (the next free runner takes the next round)."""
    jitter = rng.uniform(0.0, 0.5, size=success_a.shape)
    duration = (np.where(success_a, SUCCESS_S, FAIL_A_S) + np.where(success_b, SUCCESS_S, FAIL_B_S) + jitter)
    reps, rounds = success_a.shape
    free = np.zeros((reps, runners))
    done = np.empty((reps, rounds))
    rows = np.arange(reps)
    for k in range(rounds):
        runner = free.argmin(axis=1)
        done[:, k] = free[rows, runner] + duration[:, k]
        free[rows, runner] = done[:, k]
    return np.argsort(done, axis=1, kind="stable")


def rejection_rates(method: str, p: float, runners: int, replications: int, n_max: int, alpha: float,
                    seed: int) -> dict[str, float]:
    """Type-I error (a decision for B, ``alternative: greater``) of ``method`` under the null ``p_A = p_B = p``,
    fed the same rounds in plan order and in completion order."""
    rng = np.random.default_rng(seed)
    success_a = rng.random((replications, n_max)) < p
    success_b = rng.random((replications, n_max)) < p
    order = completion_order(success_a, success_b, runners, rng)
    rows = np.arange(replications)[:, None]
    out = {}
    for name, index in (("plan", np.broadcast_to(np.arange(n_max), order.shape)), ("completion", order)):
        a, b = success_a[rows, index].astype(float), success_b[rows, index].astype(float)
        process = make_process(method, replications, alpha=alpha, alternative="greater", n_max=n_max, seed=seed)
        for k in range(n_max):
            process.update(a[:, k], b[:, k])
        out[name] = float(np.mean(process.decision == Decision.B_BETTER))
    return out
