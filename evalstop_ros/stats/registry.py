"""Sequential tests by name: one constructor signature for every method in the core (:func:`make_process`, :func:`run_test`)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from numpy.typing import ArrayLike

from .errors import StatsInputError
from .methods import FACTS
from .sequential import PairedProcess, SequentialResult
from .validation import check_alpha, check_alternative, check_positive_int

#: Options of :func:`make_process` that only some methods take.
METHOD_OPTIONS = ("n_max", "seed", "bins", "c")


@dataclasses.dataclass(frozen=True)
class Method:
    """One registered method: where it lives and which options it takes.

    Calling it builds the process (it is the *factory* of :data:`METHODS`); :meth:`run` runs the
    module's own one-sequence test function.

    Attributes
    ----------
    name:
        Short name, e.g. ``"nscore"``.
    module:
        Module of :mod:`evalstop_ros.stats` that implements it, imported on first use.
    process, test:
        Names of its ``PairedProcess`` class and its ``*_test`` function in that module.
    process_options, test_options:
        Which of :data:`METHOD_OPTIONS` each of them takes.
    """

    name: str
    module: str
    process: str
    test: str
    process_options: tuple[str, ...]
    test_options: tuple[str, ...]

    @property
    def needs_n_max(self) -> bool:
        """Valid only within a horizon declared before the data (:data:`~.methods.FACTS`)."""
        return FACTS[self.name].needs_n_max

    def _attribute(self, attribute: str) -> Callable[..., Any]:
        found: Callable[..., Any] = getattr(importlib.import_module(f".{self.module}", __package__), attribute)
        return found

    def _options(self, names: tuple[str, ...], options: dict[str, Any]) -> dict[str, Any]:
        if self.needs_n_max and options["n_max"] is None:
            raise StatsInputError(
                f"`n_max` is required for method {self.name!r} (its horizon is part of the test); found None"
            )
        return {name: options[name] for name in names}

    def __call__(self, n_sequences: int, *, alpha: float, alternative: str, **options: Any) -> PairedProcess:
        """Build the process for ``n_sequences`` sequences (options as in :func:`make_process`)."""
        process: PairedProcess = self._attribute(self.process)(
            n_sequences, alpha=alpha, alternative=alternative, **self._options(self.process_options, options)
        )
        return process

    def run(self, scores_a: ArrayLike, scores_b: ArrayLike, *, alpha: float, alternative: str,
            **options: Any) -> SequentialResult:
        """Run the method's ``*_test`` function (options as in :func:`make_process`)."""
        result: SequentialResult = self._attribute(self.test)(
            scores_a, scores_b, alpha=alpha, alternative=alternative, **self._options(self.test_options, options)
        )
        return result


#: Method name -> :class:`Method` (a process factory).  ``step`` and ``lai`` need ``n_max``;
#: the e-process tests (``nscore``, ``wsr``, ``savi``, ``mixture``) are anytime-valid, so for them ``n_max``
#: is only an analysis budget and their processes ignore it.
METHODS: Mapping[str, Method] = MappingProxyType({
    "step": Method("step", "step", "StepProcess", "step_test", ("n_max", "seed"), ("n_max", "seed")),
    "nscore": Method("nscore", "nscore", "NScoreProcess", "nscore_test", ("bins",), ("bins", "n_max")),
    "wsr": Method("wsr", "wsr", "WsrProcess", "wsr_test", ("c",), ("c", "n_max")),
    "savi": Method("savi", "savi", "SaviProcess", "savi_test", (), ("n_max",)),
    "mixture": Method("mixture", "mixture", "MixtureProcess", "mixture_test", (), ("n_max",)),
    "lai": Method("lai", "lai", "LaiProcess", "lai_test", ("n_max",), ("n_max",)),
})


def _method(method: str, alpha: float, alternative: str) -> Method:
    spec = METHODS.get(method) if isinstance(method, str) else None
    if spec is None:
        raise StatsInputError(f"`method` should be one of {tuple(METHODS)}; found {method!r}")
    check_alpha(alpha)
    check_alternative(alternative)
    return spec


def make_process(
    method: str,
    n_sequences: int,
    *,
    alpha: float,
    alternative: str,
    n_max: int | None,
    seed: int = 0,
    bins: int = 2,
    c: float = 0.95,
) -> PairedProcess:
    """Build a fresh :class:`~evalstop_ros.stats.sequential.PairedProcess` by method name.

    Parameters
    ----------
    method : str
        One of :data:`METHODS`: ``"step"``, ``"nscore"``, ``"wsr"``, ``"savi"``, ``"lai"``.
    n_sequences : int
        Number ``R`` of independent paired sequences the process tracks (1 for an online run).
    alpha : float
        Level in (0, 1); with ``alternative="two-sided"`` it bounds the total error of both
        directions.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"``: policy B better; ``"less"``: policy A better.
    n_max : int or None
        Horizon (trials per policy).  Required by ``step`` and ``lai``, ignored by the
        anytime-valid ``nscore``, ``wsr`` and ``savi``.
    seed : int, optional
        Seed of STEP's randomized decisions (ignored by the other methods).  Fix it before the
        data (seed 003 §IV-B: the randomization is part of the test).
    bins : int, optional
        N-SCORE score bins ``K`` (seed 000 App. A-C; 2 = Bernoulli grid).
    c : float, optional
        WSR bet cap (seed 000 App. B, Alg. 2; 0.95 in Table I).  Not Lai's boundary constant, which
        ``lai`` calibrates itself.

    Returns
    -------
    PairedProcess
        A process with ``n == 0``, ready for :meth:`~PairedProcess.update`.

    Raises
    ------
    StatsInputError
        For an unknown ``method``, a bad ``alpha``/``alternative``/``n_sequences``, a missing
        ``n_max`` where the method needs one, or anything the method's own checks reject.

    Examples
    --------
    >>> make_process("ttest", 1, alpha=0.05, alternative="two-sided", n_max=None)
    Traceback (most recent call last):
    ...
    evalstop_ros.stats.errors.StatsInputError: `method` should be one of ('step', 'nscore', 'wsr', 'savi', 'mixture', 'lai'); found 'ttest'
    """
    spec = _method(method, alpha, alternative)
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    return spec(n_sequences, alpha=alpha, alternative=alternative, n_max=n_max, seed=seed, bins=bins, c=c)


def run_test(
    method: str,
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float,
    alternative: str = "two-sided",
    n_max: int | None = None,
    seed: int = 0,
    bins: int = 2,
    c: float = 0.95,
) -> SequentialResult:
    """Run the test ``method`` over one recorded paired sequence, in collection order.

    Calls the method's own test function (``nscore_test``, ``step_test``, ...) with the options
    it takes, so the result and the input checks are exactly that function's: the first stop,
    nothing read after it, and ``BUDGET_EXHAUSTED`` when ``n_max`` pairs passed undecided.

    Parameters
    ----------
    method, alpha, alternative, n_max, seed, bins, c
        As in :func:`make_process`.  Here ``n_max`` is also the analysis budget for the
        anytime-valid methods (``None``: all pairs).
    scores_a, scores_b : array_like
        Paired scores in [0, 1], policy A (baseline) and policy B (candidate).

    Returns
    -------
    SequentialResult

    Examples
    --------
    >>> res = run_test("nscore", [0] * 10, [1] * 10, alpha=0.05)
    >>> res.decision.name, res.stopping_trial
    ('B_BETTER', 8)
    """
    spec = _method(method, alpha, alternative)
    return spec.run(scores_a, scores_b, alpha=alpha, alternative=alternative, n_max=n_max, seed=seed, bins=bins, c=c)
