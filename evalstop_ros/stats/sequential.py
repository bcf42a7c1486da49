"""The shape every sequential test in the core shares (a vectorised process over ``R`` sequences) and the drivers that run one.

A sequence stops at its first decision and stays frozen (seed 003 §IV, seed 000 Alg. 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import IntEnum
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .validation import check_pairs, check_positive_int


class Decision(IntEnum):
    """Outcome of a paired sequential comparison (values match ``ComparisonStatus.msg``)."""

    CONTINUE = 0
    B_BETTER = 1
    A_BETTER = 2
    BUDGET_EXHAUSTED = 3


class PairedProcess(Protocol):
    """What :func:`run_sequence` and :func:`run_batch` need from a test."""

    #: Short method name, e.g. ``"nscore"``.
    name: str
    #: The family-wise level the test controls.
    alpha: float
    #: Number of paired trials fed so far.
    n: int
    #: ``(R,)`` :class:`Decision` values; ``CONTINUE`` until the sequence stops.
    decision: NDArray[np.int8]
    #: ``(R,)`` 1-based trial at which the decision was made, 0 while undecided.
    stopping_trial: NDArray[np.int64]

    def update(self, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> None:
        """Feed one paired trial to every sequence."""

    def pvalue(self) -> NDArray[np.float64]:
        """``(R,)`` anytime-valid p-values now (NaN where the method defines none)."""

    def evalue(self) -> NDArray[np.float64]:
        """``(R,)`` e-values now (NaN where the method defines none)."""


@dataclasses.dataclass(frozen=True)
class SequentialResult:
    """Result of running one test over one recorded paired sequence, in collection order.

    Attributes
    ----------
    method, alpha, alternative:
        The test that was run.
    decision:
        ``B_BETTER``/``A_BETTER`` at the first crossing, ``BUDGET_EXHAUSTED`` when ``n_max``
        trials passed without one, ``CONTINUE`` when the data ran out earlier.
    stopping_trial:
        1-based trial of the decision, or ``None``.
    n_observed:
        Trials consumed (the analysis stops reading at the decision).
    pvalues, evalues:
        Trajectories after each consumed trial (NaN where undefined, e.g. STEP p-values).
    """

    method: str
    alpha: float
    alternative: str
    decision: Decision
    stopping_trial: int | None
    n_observed: int
    pvalues: NDArray[np.float64]
    evalues: NDArray[np.float64]

    @property
    def pvalue(self) -> float:
        """The last anytime-valid p-value (NaN if undefined or no data)."""
        return float(self.pvalues[-1]) if self.pvalues.size else float("nan")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation (NaN becomes ``None``)."""

        def clean(values: NDArray[np.float64]) -> list[float | None]:
            return [None if v != v else v for v in values.tolist()]  # v != v: NaN

        return {
            "method": self.method,
            "alpha": self.alpha,
            "alternative": self.alternative,
            "decision": self.decision.name.lower(),
            "stopping_trial": self.stopping_trial,
            "n_observed": self.n_observed,
            "pvalue": None if np.isnan(self.pvalue) else self.pvalue,
            "pvalues": clean(self.pvalues),
            "evalues": clean(self.evalues),
        }


@dataclasses.dataclass(frozen=True)
class BatchOutcome:
    """Decisions of ``R`` Monte Carlo sequences: ``(R,)`` arrays of decision and stopping trial."""

    decision: NDArray[np.int8]
    stopping_trial: NDArray[np.int64]


def run_sequence(
    process: PairedProcess,
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alternative: str,
    n_max: int | None = None,
) -> SequentialResult:
    """Replay a recorded paired sequence through a fresh ``process`` (with ``R = 1``).

    Pairs are consumed in collection order and the analysis reports the *first* stop, which is
    the only reading the anytime/STEP guarantees cover (seed 003 §IV).
    """
    a, b = check_pairs(scores_a, scores_b)
    if a.ndim != 1:
        raise StatsInputError(f"`scores_a` must be one-dimensional; found shape {a.shape}")
    limit = a.size if n_max is None else min(a.size, check_positive_int(n_max, "n_max"))
    pvalues, evalues = [], []
    for n in range(limit):
        process.update(a[n : n + 1], b[n : n + 1])
        pvalues.append(float(process.pvalue()[0]))
        evalues.append(float(process.evalue()[0]))
        if process.decision[0] != Decision.CONTINUE:
            break
    decision = Decision(int(process.decision[0]))
    if decision == Decision.CONTINUE and n_max is not None and process.n >= n_max:
        decision = Decision.BUDGET_EXHAUSTED
    stop = int(process.stopping_trial[0]) or None
    return SequentialResult(
        method=process.name,
        alpha=process.alpha,
        alternative=alternative,
        decision=decision,
        stopping_trial=stop,
        n_observed=process.n,
        pvalues=np.asarray(pvalues),
        evalues=np.asarray(evalues),
    )


def run_batch(process: PairedProcess, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64],
              on_column: Callable[[int], None] | None = None) -> BatchOutcome:
    """Feed ``(R, N)`` score arrays column by column; stop early once every sequence decided.
    ``on_column(n)`` (if given) is told after each column how many of the N are fed (progress).

    Inputs are trusted (generated by :mod:`~evalstop_ros.stats.simulate`), so no checks here.
    """
    for n in range(scores_a.shape[1]):
        process.update(scores_a[:, n], scores_b[:, n])
        if on_column is not None:
            on_column(n + 1)
        if not (process.decision == Decision.CONTINUE).any():
            break
    return BatchOutcome(process.decision.copy(), process.stopping_trial.copy())
