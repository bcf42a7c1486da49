"""Sequential Holm over a family of comparisons: the one driver (:class:`HolmEngine`), with one option set."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .holm import HOLM_SIDES, DirectionalTests, SequentialHolm, check_weights, side_alpha
from .sequential import Decision

__all__ = ["HolmEngine", "HolmOptions", "Trajectory", "run_holm"]


@dataclasses.dataclass(frozen=True)
class HolmOptions:
    """What a sequential Holm family runs: its test, its family-wise level, its claims, its budget.

    :param method: Registered anytime-valid method (``nscore``, ``wsr``, ``savi``, ``mixture``).
    :param alpha: Family-wise level over every directional hypothesis of the family.
    :param alternative: ``two-sided`` (two hypotheses per comparison), ``greater`` or ``less``.
    :param n_max: Steps analysed at most (the open comparisons are then ``BUDGET_EXHAUSTED``);
        ``None``: no budget.
    :param bins: N-SCORE's score bins (seed 000 App. A-C).
    :param c: WSR's bet cap (seed 000 Alg. 2).
    :param weights: One weight per directional hypothesis (comparison-major, positive, fixed
        before the data): weighted Holm (:func:`~.holm.holm`); ``None``: Holm's equal weights.
    """

    method: str
    alpha: float
    alternative: str
    n_max: int | None
    bins: int = 2
    c: float = 0.95
    weights: tuple[float, ...] | None = None


@dataclasses.dataclass
class Trajectory:
    """One comparison's directional tests over the pairs fed (one lane).

    ``sides[n - 1]``: each side's p-value after ``n`` pairs (what :meth:`SequentialHolm.run`
    reads); ``pvalues``/``evalues``: the comparison's p- and e-value after each pair; ``fresh_p``,
    ``fresh_e``: before any pair.
    """

    sides: list[tuple[float, ...]]
    pvalues: list[float]
    evalues: list[float]
    fresh_p: float
    fresh_e: float


class HolmEngine:
    """Sequential Holm over ``m`` comparisons and ``R`` lanes: their directional tests and analyses.

    Each comparison's directional hypotheses are one-sided processes at
    :func:`~.holm.side_alpha` ``(alpha, m, alternative)``; :attr:`holm` holds the analyses.  Two
    ways to analyse, one rule (:class:`~.holm.SequentialHolm`): :meth:`analyse` takes the
    current p-values of every comparison (lock-step rounds, or the hub after each result);
    :meth:`run` (``R = 1``) analyses every step the comparisons' trajectories allow.

    >>> engine = HolmEngine(2, HolmOptions("nscore", 0.05, "two-sided", None))
    >>> [p.alpha for p in engine.tests[0].processes]
    [0.0125, 0.0125]
    >>> for _ in range(12):
    ...     _ = engine.feed(0, np.zeros(1), np.ones(1))
    >>> engine.analyse(); engine.outcome(0), engine.outcome(1)
    ((<Decision.B_BETTER: 1>, 1), (<Decision.CONTINUE: 0>, None))
    """

    def __init__(self, m: int, options: HolmOptions, *, lanes: int = 1) -> None:
        self.m, self.options, self.lanes = m, options, lanes
        sides = len(HOLM_SIDES[options.alternative])
        weights = check_weights(options.weights, m * sides)
        #: Each directional hypothesis's smallest Holm threshold, its process's level: ``alpha w``.
        self.levels = (np.full(m * sides, side_alpha(options.alpha, m, options.alternative)) if weights is None
                       else options.alpha * weights)
        self.side_alpha = float(self.levels.min())
        self.tests = [self._fresh_tests(j) for j in range(m)]
        #: Per comparison, its trajectory (``R = 1``; empty otherwise).
        self.trajectories = [self._fresh_trajectory(t) for t in self.tests]
        self.holm = self._fresh_holm()

    def _fresh_tests(self, j: int) -> DirectionalTests:
        o = self.options
        sides = len(HOLM_SIDES[o.alternative])
        levels = self.levels[j * sides:(j + 1) * sides]
        return DirectionalTests(o.method, side_alpha=self.side_alpha if o.weights is None else [float(v) for v in levels],
                                alternative=o.alternative, lanes=self.lanes, n_max=o.n_max, bins=o.bins, c=o.c)

    def _fresh_holm(self) -> SequentialHolm:
        o = self.options
        return SequentialHolm(self.m, alpha=o.alpha, alternative=o.alternative, n_max=o.n_max, lanes=self.lanes,
                              weights=o.weights)

    @staticmethod
    def _fresh_trajectory(tests: DirectionalTests) -> Trajectory:
        return Trajectory([], [], [], float(tests.pvalue()[0]), float(tests.evalue()[0]))

    # -- the comparisons' tests ------------------------------------------------------------
    def reset(self, j: int) -> None:
        """Comparison ``j`` starts again from no pair (an earlier pair changed)."""
        self.tests[j] = self._fresh_tests(j)
        self.trajectories[j] = self._fresh_trajectory(self.tests[j])

    def feed(self, j: int, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> NDArray[np.float64]:
        """Feed one pair per lane to comparison ``j``; return its side p-values ``(S, R)`` after it."""
        tests = self.tests[j]
        tests.update(scores_a, scores_b)
        sides = tests.side_pvalues()
        if self.lanes == 1:
            trajectory = self.trajectories[j]
            trajectory.sides.append(tuple(float(v) for v in sides[:, 0]))
            trajectory.pvalues.append(float(tests.pvalue(sides)[0]))
            trajectory.evalues.append(float(tests.evalue()[0]))
        return sides

    def feed_all(self, j: int, scores_a: NDArray[np.float64], scores_b: NDArray[np.float64]) -> Trajectory:
        """Feed the recorded pairs of comparison ``j`` in order (``R = 1``); return its trajectory."""
        for a, b in zip(scores_a, scores_b):
            self.feed(j, np.array([a], dtype=np.float64), np.array([b], dtype=np.float64))
        return self.trajectories[j]

    # -- the analyses ----------------------------------------------------------------------
    @property
    def decision(self) -> NDArray[np.int8]:
        """``(m, R)`` :class:`Decision` values of the analyses so far."""
        return self.holm.decision

    @property
    def stopping_step(self) -> NDArray[np.int64]:
        """``(m, R)`` step of each decision, 0 if none."""
        return self.holm.stopping_step

    def analyse(self, pvalues: NDArray[np.float64] | None = None) -> None:
        """One analysis of every comparison's current p-values (a decided one keeps its values);
        ``pvalues``: those side p-values ``(m * S, R)`` when the caller holds them (from :meth:`feed`)."""
        self.holm.analyse(np.concatenate([tests.side_pvalues() for tests in self.tests]) if pvalues is None else pvalues)

    def run(self) -> None:
        """Analyse every further step the trajectories allow (``R = 1``; :meth:`SequentialHolm.run`)."""
        self.holm.run([t.sides for t in self.trajectories])

    def restart(self) -> None:
        """Analyse again from the first step, keeping the decisions (:meth:`SequentialHolm.restart`)."""
        self.holm.restart()

    def outcome(self, j: int) -> tuple[Decision, int | None]:
        """Comparison ``j``'s decision and stopping step (``R = 1``)."""
        return self.holm.outcome(j)

    def decisions(self) -> list[tuple[Decision, int | None, int]]:
        """Per comparison: decision, stopping step and the pairs it consumed (up to its stop, or
        the last step analysed), after :meth:`run` (``R = 1``)."""
        out = []
        for j in range(self.m):
            decision, stop = self.outcome(j)
            out.append((decision, stop, stop if stop is not None else self.holm.step))
        return out

    def replayed(self) -> list[tuple[Decision, int | None, int]]:
        """:meth:`decisions` of a fresh analysis of the current trajectories, forgetting the
        decisions made (``R = 1``; the session's edit check)."""
        fresh = self._fresh_holm()
        fresh.run([t.sides for t in self.trajectories])
        return [(*fresh.outcome(j), fresh.step) for j in range(self.m)]


def run_holm(pairs: Sequence[tuple[NDArray[np.float64], NDArray[np.float64]]], options: HolmOptions) -> HolmEngine:
    """A :class:`HolmEngine` fed every comparison's recorded pairs (up to ``n_max``) and run."""
    engine = HolmEngine(len(pairs), options)
    for j, (a, b) in enumerate(pairs):
        limit = a.size if options.n_max is None else min(a.size, options.n_max)
        engine.feed_all(j, a[:limit], b[:limit])
    engine.run()
    return engine
