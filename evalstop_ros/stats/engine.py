"""The one place that builds sequential Holm's directional tests and runs them over plain arrays.

Sequential Holm (:mod:`.holm`, seed 001 §4 with Holm's step-down across comparisons) tests each
of a metric's ``m`` comparisons with one one-sided anytime-valid process per direction, each at
``alpha / (m S)`` (:func:`~.holm.side_alpha`).  The live session (:class:`HolmTest` in
:mod:`evalstop_ros.session.analysis`), the Monte Carlo family (:class:`~.families.FamilyProcess`),
the offline re-analysis of a journal (:mod:`evalstop_ros.session.offline`), the audit
(:mod:`evalstop_ros.audit.recompute`) and the hub's family of pairs (:mod:`evalstop_ros.hub.family`)
all build these tests with :func:`directional_tests` and their analyses with
:func:`sequential_holm`, and feed the tests one pair at a time with :func:`feed_pair`; the batch
users take the whole trajectory with :func:`directional_trajectory` and the family's decisions
with :func:`holm_decisions`.  Nothing here knows a session: the inputs are scores, levels and
options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .holm import DirectionalTests, SequentialHolm, side_alpha
from .sequential import Decision

__all__ = [
    "Trajectory",
    "directional_tests",
    "directional_trajectory",
    "feed_pair",
    "holm_decisions",
    "sequential_holm",
]


def directional_tests(method: str, *, family_alpha: float, m: int, alternative: str, lanes: int = 1,
                      **options: float | int | None) -> DirectionalTests:
    """The directional tests of one of ``m`` comparisons in a Holm family at level ``family_alpha``.

    Each side's process runs at :func:`~.holm.side_alpha` ``(family_alpha, m, alternative)``;
    ``options`` (``n_max``, ``seed``, ``bins``, ``c``) go to
    :func:`~evalstop_ros.stats.registry.make_process`.

    >>> d = directional_tests("nscore", family_alpha=0.05, m=2, alternative="two-sided", n_max=None, bins=2)
    >>> [p.alpha for p in d.processes]
    [0.0125, 0.0125]
    >>> d.update(np.ones(1), np.zeros(1)); d.side_pvalues().shape, float(d.pvalue()[0]) <= 1.0
    ((2, 1), True)
    """
    return DirectionalTests(method, side_alpha=side_alpha(family_alpha, m, alternative), alternative=alternative,
                            lanes=lanes, **options)


def sequential_holm(m: int, *, alpha: float, alternative: str, n_max: int | None, lanes: int = 1) -> SequentialHolm:
    """The analyses of sequential Holm over ``m`` comparisons at family-wise level ``alpha``
    (:class:`~.holm.SequentialHolm`: Holm's step-down over the ``m S`` directional p-values at
    every step; after step ``n_max``, if given, the open comparisons are ``BUDGET_EXHAUSTED``).

    >>> holm = sequential_holm(2, alpha=0.05, alternative="two-sided", n_max=None)
    >>> holm.analyse(np.array([[0.001], [0.9], [0.04], [0.5]])); holm.outcome(0), holm.outcome(1)
    ((<Decision.B_BETTER: 1>, 1), (<Decision.CONTINUE: 0>, None))
    """
    return SequentialHolm(m, alpha=alpha, alternative=alternative, n_max=n_max, lanes=lanes)


def feed_pair(tests: DirectionalTests, score_a: float, score_b: float) -> tuple[tuple[float, ...], float, float]:
    """Feed one pair (one lane); return every side's p-value, the comparison's p-value and e-value after it."""
    tests.update(np.array([score_a], dtype=np.float64), np.array([score_b], dtype=np.float64))
    sides = tuple(float(v) for v in tests.side_pvalues()[:, 0])
    return sides, float(tests.pvalue()[0]), float(tests.evalue()[0])


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """One comparison's directional tests over its pairs.

    ``sides[n - 1]``: each side's p-value after ``n`` pairs (what :meth:`SequentialHolm.run`
    reads); ``pvalues``/``evalues``: the comparison's p- and e-value after each pair; ``fresh_p``,
    ``fresh_e``: before any pair.
    """

    sides: list[tuple[float, ...]]
    pvalues: list[float]
    evalues: list[float]
    fresh_p: float
    fresh_e: float


def directional_trajectory(method: str, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64], limit: int, *,
                           family_alpha: float, m: int, alternative: str, **options: float | int | None) -> Trajectory:
    """Fresh :func:`directional_tests` (one lane) fed the first ``limit`` pairs of ``scores_a``/``scores_b``."""
    tests = directional_tests(method, family_alpha=family_alpha, m=m, alternative=alternative, lanes=1, **options)
    fresh_p, fresh_e = float(tests.pvalue()[0]), float(tests.evalue()[0])
    sides, pvalues, evalues = [], [], []
    for n in range(limit):
        side, p, e = feed_pair(tests, float(scores_a[n]), float(scores_b[n]))
        sides.append(side)
        pvalues.append(p)
        evalues.append(e)
    return Trajectory(sides, pvalues, evalues, fresh_p, fresh_e)


def holm_decisions(trajectories: Sequence[Trajectory], *, alpha: float, alternative: str,
                   n_max: int | None) -> list[tuple[Decision, int | None, int]]:
    """Sequential Holm over the comparisons' trajectories: per comparison its decision, stopping
    step (``None`` if none) and the pairs it consumed (up to its stop, or the last step analysed)."""
    engine = sequential_holm(len(trajectories), alpha=alpha, alternative=alternative, n_max=n_max)
    engine.run([t.sides for t in trajectories])
    out = []
    for j in range(len(trajectories)):
        decision, stop = engine.outcome(j)
        out.append((decision, stop, stop if stop is not None else engine.step))
    return out
