"""STEP at run time: look up the synthesized regions after each trial and decide (seed 003 §IV).

Randomization replayable from the seed; ``"two-sided"`` uses the table at ``α/2`` (seed 003 Eq. 9).
STEP defines no p-value or e-value: both are NaN.  Decision rule and levels: docs/statistics.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .levels import split_alpha
from .sequential import Decision, SequentialResult, run_sequence
from .step_oc import StepOC, Type1Report, check_type1, operating_characteristics
from .step_table import StepTable, load_table, synthesize_table
from .validation import check_alpha, check_alternative, check_binary, check_positive_int

__all__ = [
    "StepOC",
    "StepProcess",
    "StepTable",
    "Type1Report",
    "check_type1",
    "load_table",
    "operating_characteristics",
    "step_test",
    "step_uniforms",
    "synthesize_table",
    "table_alpha",
]


def table_alpha(alpha: float, alternative: str) -> float:
    """Per-direction level of the table a test at family level ``alpha`` needs."""
    return split_alpha(alpha, 2) if alternative == "two-sided" else alpha


def step_uniforms(seed: int, n: int, size: int) -> NDArray[np.float64]:
    """The randomization draws ``U_n`` for trial ``n`` (1-based) of ``size`` sequences."""
    return np.random.default_rng([seed, n]).random(size)


class StepProcess:
    """STEP over ``n_sequences`` paired Bernoulli sequences (see the module docstring).

    Parameters
    ----------
    n_sequences:
        Independent sequences run side by side (1 online; many for Monte Carlo).
    alpha:
        Family level; see the module docstring for how it maps to the table.
    alternative:
        ``"two-sided"``, ``"greater"`` (B better) or ``"less"`` (A better).
    n_max:
        Pre-declared horizon (trials per policy); the guarantee holds only within it.
    seed:
        Seed of the randomization, fixed before the data.
    table:
        A table to use instead of looking one up (must match ``n_max`` and the table level).
    """

    name = "step"

    def __init__(
        self,
        n_sequences: int = 1,
        *,
        alpha: float = 0.05,
        alternative: str = "two-sided",
        n_max: int = 100,
        seed: int = 0,
        table: StepTable | None = None,
    ) -> None:
        self.alpha = check_alpha(alpha)
        self.alternative = check_alternative(alternative)
        self.n_max = check_positive_int(n_max, "n_max")
        level = table_alpha(self.alpha, self.alternative)
        if table is None:
            table = load_table(self.n_max, level)
        elif table.n_max != self.n_max or not np.isclose(table.alpha, level):
            raise StatsInputError(
                f"`table` is for n_max={table.n_max}, alpha={table.alpha:g}; this test needs "
                f"n_max={self.n_max}, alpha={level:g}"
            )
        self.table = table
        self.seed = int(seed)
        size = check_positive_int(n_sequences, "n_sequences")
        self.n = 0
        self.successes_a = np.zeros(size, dtype=np.int64)
        self.successes_b = np.zeros(size, dtype=np.int64)
        self.decision = np.zeros(size, dtype=np.int8)
        self.stopping_trial = np.zeros(size, dtype=np.int64)

    def update(self, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> None:
        """Feed trial ``n + 1``: binary outcomes, 0 or 1 for every sequence."""
        if self.n >= self.n_max:
            raise StatsInputError(f"STEP is defined for at most n_max={self.n_max} trials")
        for name, values in (("scores_a", scores_a), ("scores_b", scores_b)):
            check_binary(values, name, method="STEP", trial=self.n + 1)
        self.n += 1
        live = self.decision == Decision.CONTINUE
        self.successes_a += live & (np.asarray(scores_a) == 1.0)
        self.successes_b += live & (np.asarray(scores_b) == 1.0)
        gap = self.successes_b - self.successes_a
        low = np.minimum(self.successes_a, self.successes_b)
        weight = self.table.reject_weight(self.n, low, np.abs(gap))
        draw = step_uniforms(self.seed, self.n, live.size)
        fire = live & (draw < weight)
        self.decision[fire & (gap > 0)] = Decision.B_BETTER
        self.decision[fire & (gap < 0)] = Decision.A_BETTER
        self.stopping_trial[fire] = self.n

    def pvalue(self) -> NDArray[np.float64]:
        """STEP defines no p-value (spec §7): NaN."""
        return np.full(self.decision.shape, np.nan)

    def evalue(self) -> NDArray[np.float64]:
        """STEP defines no e-value: NaN."""
        return np.full(self.decision.shape, np.nan)


def step_test(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    n_max: int = 100,
    seed: int = 0,
) -> SequentialResult:
    """Run STEP over a recorded paired Bernoulli sequence in collection order.

    Parameters
    ----------
    scores_a, scores_b:
        Outcomes of policy A (baseline, pi_0) and policy B (pi_1), paired by trial; each 0 or 1.
    alpha, alternative, n_max, seed:
        See :class:`StepProcess`.

    Returns
    -------
    SequentialResult
        The first decision and its trial; NaN p-values (STEP defines none).

    Examples
    --------
    >>> res = step_test([0, 1] * 10, [1, 1] * 10, alpha=0.05, alternative="greater", n_max=50)
    >>> res.decision.name, res.stopping_trial
    ('B_BETTER', 11)
    """
    a = np.asarray(scores_a, dtype=np.float64)
    b = np.asarray(scores_b, dtype=np.float64)
    for name, values in (("scores_a", a), ("scores_b", b)):
        check_binary(values, name, method="STEP")
    process = StepProcess(1, alpha=alpha, alternative=alternative, n_max=n_max, seed=seed)
    return run_sequence(process, a, b, alternative=alternative, n_max=n_max)
