r"""Multi-task claims: one paired sequential test per task, combined by the claim made (seed 003 Eq. 11).

Claims ``"every"`` (IUT or Bonferroni), ``"any"`` and ``"per-task"``; the levels, and where we deviate
from seed 003, are in docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from .errors import StatsInputError
from .holm import holm
from .levels import split_alpha
from .methods import FACTS
from .sequential import Decision, SequentialResult
from .validation import check_alpha, check_alternative

__all__ = ["CLAIMS", "TASK_CORRECTIONS", "MultiTaskResult", "TaskClaim", "combine_tasks", "run_multitask", "task_alpha"]

#: Claim types, fixed before the data.
CLAIMS = ("every", "any", "per-task")
#: Which corrections each claim admits (the first is the default).
TASK_CORRECTIONS: dict[str, tuple[str, ...]] = {
    "every": ("iut", "bonferroni"),
    "any": ("bonferroni", "holm"),
    "per-task": ("bonferroni", "holm"),
}


def _check_claim(claim: str, correction: str | None) -> str:
    if claim not in CLAIMS:
        raise StatsInputError(f"`claim` should be one of {CLAIMS}; found {claim!r}")
    allowed = TASK_CORRECTIONS[claim]
    if correction is None:
        return allowed[0]
    if correction not in allowed:
        raise StatsInputError(f"`correction` for claim {claim!r} should be one of {allowed}; found {correction!r}")
    return correction


def task_alpha(alpha: float, n_tasks: int, *, claim: str, correction: str | None = None) -> float:
    """Level at which each task's own test runs for a ``claim`` at overall level ``alpha``.

    Examples
    --------
    >>> task_alpha(0.05, 3, claim="every")  # intersection-union: each task at alpha
    0.05
    >>> round(task_alpha(0.03, 3, claim="every", correction="bonferroni"), 6)  # seed 003 §V-C3
    0.01
    >>> round(task_alpha(0.05, 4, claim="per-task", correction="holm"), 6)  # Holm's first threshold
    0.0125
    """
    alpha = check_alpha(alpha)
    correction = _check_claim(claim, correction)
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, (int, np.integer)) or n_tasks < 1:
        raise StatsInputError(f"`n_tasks` must be a positive integer; found {n_tasks!r}")
    return alpha if correction == "iut" else split_alpha(alpha, int(n_tasks))


@dataclasses.dataclass(frozen=True)
class TaskClaim:
    """The claim a family of per-task tests supports (seed 003 Eq. 11), whoever ran the tests:
    :class:`MultiTaskResult` offline, the session's ``ClaimSnapshot`` live.

    Attributes
    ----------
    claim, correction, alpha, alternative:
        The claim, how the level was shared, the overall level and the claimed direction
        (``"greater"``: B better).
    task_alpha:
        Level of each task's own test (Holm: its first threshold).
    tasks:
        Task names.
    task_claims:
        Per task, the decision the family licenses: the task's direction claim, or ``CONTINUE``
        (no claim) -- including decisions of a task's own test that the correction does not keep.
    established:
        ``"every"``/``"any"``: whether the overall claim is made.  ``"per-task"``: whether any
        task claim is made.
    """

    claim: str
    correction: str
    alpha: float
    alternative: str
    task_alpha: float
    tasks: tuple[str, ...]
    task_claims: tuple[Decision, ...]
    established: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiTaskResult(TaskClaim):
    """Per-task results and the claim they support (the fields of :class:`TaskClaim`, and:)

    Attributes
    ----------
    results:
        Each task's :class:`~evalstop_ros.stats.sequential.SequentialResult`.
    n_trials:
        Trials per policy over all tasks: the sum of the tasks' trials read (seed 003 §V-C3: "the
        sum by column of the stopping times").
    """

    results: tuple[SequentialResult, ...]
    n_trials: int

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation."""
        return {
            "claim": self.claim,
            "correction": self.correction,
            "alpha": self.alpha,
            "alternative": self.alternative,
            "task_alpha": self.task_alpha,
            "established": self.established,
            "n_trials": self.n_trials,
            "tasks": {
                name: {"claim": claim.name.lower(), "result": result.to_dict()}
                for name, claim, result in zip(self.tasks, self.task_claims, self.results)
            },
        }


def combine_tasks(
    results: Mapping[str, SequentialResult],
    *,
    claim: str,
    alpha: float,
    correction: str | None = None,
    alternative: str = "greater",
) -> MultiTaskResult:
    """Combine per-task results, each run at :func:`task_alpha`, into the claim they support.

    Parameters
    ----------
    results : mapping of str to SequentialResult
        Task name -> that task's result, run at ``task_alpha(alpha, T, claim=..., correction=...)``
        with ``alternative`` (checked).
    claim : {"every", "any", "per-task"}
    alpha : float
        Overall level.
    correction : str, optional
        See :data:`TASK_CORRECTIONS` (default: the first one of the claim).
    alternative : {"greater", "less", "two-sided"}, optional
        Direction claimed; ``"two-sided"`` only for ``"per-task"`` with Bonferroni.

    Returns
    -------
    MultiTaskResult
    """
    correction = _check_claim(claim, correction)
    alpha = check_alpha(alpha)
    alternative = check_alternative(alternative)
    if alternative == "two-sided" and (claim != "per-task" or correction == "holm"):
        raise StatsInputError(
            f"`alternative` must be 'greater' or 'less' for claim {claim!r} with correction {correction!r}; "
            "found 'two-sided'"
        )
    if not isinstance(results, Mapping) or not results:
        raise StatsInputError(f"`results` must map task names to results; found {results!r}")
    tasks = tuple(results)
    runs = tuple(results[name] for name in tasks)
    level = task_alpha(alpha, len(tasks), claim=claim, correction=correction)
    for name, run in zip(tasks, runs):
        if not math.isclose(run.alpha, level, rel_tol=1e-12) or run.alternative != alternative:
            raise StatsInputError(
                f"task {name!r} must be run at alpha={level:g}, alternative={alternative!r} for claim {claim!r} "
                f"with correction {correction!r}; found alpha={run.alpha:g}, alternative={run.alternative!r}"
            )
    wanted = {"greater": (Decision.B_BETTER,), "less": (Decision.A_BETTER,),
              "two-sided": (Decision.B_BETTER, Decision.A_BETTER)}[alternative]
    claims = [run.decision if run.decision in wanted else Decision.CONTINUE for run in runs]
    if correction == "holm":
        if not (runs[0].method in FACTS and FACTS[runs[0].method].pvalue):
            raise StatsInputError(
                f"`correction` 'holm' needs anytime-valid p-values, which method {runs[0].method!r} does not define"
            )
        rejected = holm([min(1.0, run.pvalue) for run in runs], alpha)
        claims = [wanted[0] if hit else Decision.CONTINUE for hit in rejected]
    if claim == "every":
        established = all(c != Decision.CONTINUE for c in claims)
    else:
        established = any(c != Decision.CONTINUE for c in claims)
    return MultiTaskResult(
        claim=claim,
        correction=correction,
        alpha=alpha,
        alternative=alternative,
        task_alpha=level,
        tasks=tasks,
        results=runs,
        task_claims=tuple(claims),
        established=established,
        n_trials=sum(run.n_observed for run in runs),
    )


def run_multitask(
    scores: Mapping[str, Sequence[ArrayLike]],
    *,
    method: str,
    alpha: float,
    claim: str,
    correction: str | None = None,
    alternative: str = "greater",
    n_max: int | None = None,
    seed: int = 0,
    bins: int = 2,
    c: float = 0.95,
) -> MultiTaskResult:
    """Run one paired test per task at :func:`task_alpha` and combine them (:func:`combine_tasks`).

    Parameters
    ----------
    scores : mapping of str to (scores_a, scores_b)
        Per task, the paired scores of baseline A and candidate B in collection order.
    method, n_max, seed, bins, c :
        As in :func:`~evalstop_ros.stats.registry.run_test` (``n_max`` per task).
    alpha, claim, correction, alternative :
        As in :func:`combine_tasks`.

    Examples
    --------
    Seed 003 §V-C3 in miniature: B better on two tasks, each test at ``alpha`` (IUT):

    >>> data = {"t1": ([0] * 20, [1] * 20), "t2": ([0, 1] * 10, [1] * 20)}
    >>> res = run_multitask(data, method="nscore", alpha=0.05, claim="every")
    >>> res.established, [d.name for d in res.task_claims], res.n_trials
    (True, ['B_BETTER', 'B_BETTER'], 19)
    """
    from .registry import run_test

    if not isinstance(scores, Mapping) or not scores:
        raise StatsInputError(f"`scores` must map task names to (scores_a, scores_b) pairs; found {scores!r}")
    correction = _check_claim(claim, correction)
    level = task_alpha(alpha, len(scores), claim=claim, correction=correction)
    results: dict[str, SequentialResult] = {}
    for name, pair in scores.items():
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise StatsInputError(f"`scores` of task {name!r} must be a pair (scores_a, scores_b); found {pair!r}")
        results[name] = run_test(
            method, pair[0], pair[1], alpha=level, alternative=alternative, n_max=n_max, seed=seed, bins=bins, c=c,
        )
    return combine_tasks(results, claim=claim, alpha=alpha, correction=correction, alternative=alternative)
