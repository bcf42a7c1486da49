"""Offline re-analysis of a session journal with the statistics core's own drivers (docs/session.md).

For a consistent journal every result equals the live session's, which the tests check.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..stats.engine import run_holm
from ..stats.multitask import MultiTaskResult
from ..stats.registry import run_test
from ..stats.sequential import SequentialResult
from .analysis import build_tests, combine_claims, holm_options, test_keys
from .config import SessionConfig
from .config_input import config_diff
from .config_sections import MetricConfig
from .errors import JournalError
from .journal import read_journal
from .letters import check_letters_request, letters
from .plan import Plan
from .trials import TrialBook, form_pairs, metric_value

__all__ = [
    "OfflineClaim",
    "OfflineResult",
    "book_decisions",
    "claims_of",
    "offline_claims",
    "offline_decisions",
    "offline_letters",
]


@dataclasses.dataclass(frozen=True)
class OfflineResult:
    """One test re-run by :func:`offline_decisions` (``task`` empty unless the claim is per task).

    For ``design: adastop`` the result's ``n_observed`` and ``stopping_trial`` count scores per
    agent (``k N``) and it has no p-values.
    """

    policy_a: str
    policy_b: str
    metric: str
    result: SequentialResult
    task: str = ""


@dataclasses.dataclass(frozen=True)
class OfflineClaim:
    """The multi-task claim of one comparison x metric, re-run by :func:`offline_claims`."""

    policy_a: str
    policy_b: str
    metric: str
    result: MultiTaskResult


def _book(config: SessionConfig, journal_path: str | os.PathLike[str]) -> TrialBook:
    contents = read_journal(journal_path)
    if contents.config_hash != config.config_hash:
        changes = config_diff(contents.config_dict(), config.to_dict())
        raise JournalError(f"journal {str(journal_path)!r} holds a different configuration: {'; '.join(changes)}")
    return TrialBook().fold(contents.events)


def _values(book: TrialBook, config: SessionConfig, policy_a: str, policy_b: str, metric: str,
            task: str | None) -> tuple[np.ndarray, np.ndarray]:
    pairs = form_pairs(book, config.design, policy_a, policy_b, task)
    a = [metric_value(book.trials[p.trial_a].score, metric) for p in pairs]  # type: ignore[arg-type]
    b = [metric_value(book.trials[p.trial_b].score, metric) for p in pairs]  # type: ignore[arg-type]
    return np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)


def _holm(config: SessionConfig, metric: MetricConfig, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[SequentialResult]:
    """Sequential Holm over the pair lists of one metric's comparisons (module docstring): the
    session's :class:`~evalstop_ros.stats.engine.HolmEngine` fed every comparison's pairs (up to
    ``n_max``) and run; a comparison consumed the pairs up to its stop, or up to the last step
    analysed."""
    engine = run_holm(pairs, holm_options(config, metric))
    results = []
    for t, (decision, stop, used) in zip(engine.trajectories, engine.decisions()):
        results.append(SequentialResult(
            method=metric.method, alpha=config.comparison_alpha(metric), alternative=metric.alternative,
            decision=decision, stopping_trial=stop, n_observed=used, pvalues=np.array(t.pvalues[:used]),
            evalues=np.array(t.evalues[:used])))
    return results


def _adastop(config: SessionConfig, book: TrialBook) -> list[OfflineResult]:
    """AdaStop over the journal's complete interims: the session's own fold (:class:`AdaStopRun`)."""
    tests, _, run = build_tests(config, Plan(config))
    assert run is not None
    run.sync(book)
    (metric,) = config.metrics
    return [OfflineResult(t.comparison.policy_a, t.comparison.policy_b, metric.name, SequentialResult(
        method="adastop", alpha=metric.alpha or 0.0, alternative=metric.alternative, decision=t.decision,
        stopping_trial=t.stopping_trial, n_observed=t.n, pvalues=np.empty(0), evalues=np.empty(0)))
        for t in tests]


def book_decisions(config: SessionConfig, book: TrialBook) -> list[OfflineResult]:
    """:func:`offline_decisions` on a trial book instead of a journal (the audit folds bags)."""
    if config.design == "adastop":
        return _adastop(config, book)
    comparisons = config.comparison_list()
    if config.correction == "holm":
        by_metric = {
            metric.name: _holm(config, metric, [_values(book, config, c.policy_a, c.policy_b, metric.name, None)
                                                for c in comparisons])
            for metric in config.metrics
        }
        return [OfflineResult(c.policy_a, c.policy_b, metric.name, by_metric[metric.name][ci])
                for ci, c in enumerate(comparisons) for metric in config.metrics]
    plan = Plan(config)
    results = []
    for key in test_keys(config):
        comparison, metric = key.comparison, key.metric
        a, b = _values(book, config, comparison.policy_a, comparison.policy_b, metric.name, key.task)
        result = run_test(metric.method, a, b, alpha=key.alpha, alternative=metric.alternative, n_max=config.n_max,
                          seed=plan.step_seed(key.comparison_index, key.metric_index), bins=metric.bins or 2)
        results.append(OfflineResult(comparison.policy_a, comparison.policy_b, metric.name, result, key.task or ""))
    return results


def offline_decisions(config: SessionConfig, journal_path: str | os.PathLike[str]) -> list[OfflineResult]:
    """Re-run every test on a journal's effective scores, in collection order.

    One result per row of :meth:`EvaluationSession.comparisons`, in the same order.  For a
    consistent journal each result's decision, stopping trial and count equal the session's.

    Raises
    ------
    JournalError
        If the journal was written with a different configuration.
    """
    return book_decisions(config, _book(config, journal_path))


def claims_of(config: SessionConfig, results: list[OfflineResult]) -> list[OfflineClaim]:
    """The multi-task claims of :func:`book_decisions` rows (:func:`~.analysis.combine_claims`)."""
    metrics: dict[str, MetricConfig] = {m.name: m for m in config.metrics}
    combined = combine_claims(config, [(metrics[r.metric], r.result) for r in results])
    tasks = len(config.tasks)
    return [OfflineClaim(r.policy_a, r.policy_b, r.metric, claim) for r, claim in zip(results[::tasks], combined)]


def offline_claims(config: SessionConfig, journal_path: str | os.PathLike[str]) -> list[OfflineClaim]:
    """The multi-task claim of every comparison x metric (empty for ``claim: pooled``).

    The per-task results of :func:`offline_decisions` combined by
    :func:`~evalstop_ros.stats.multitask.combine_tasks` at the comparison's level
    (:meth:`SessionConfig.comparison_alpha`): one per row of :meth:`EvaluationSession.claims`.
    """
    if config.claim == "pooled":
        return []
    return claims_of(config, book_decisions(config, _book(config, journal_path)))


def offline_letters(config: SessionConfig, journal_path: str | os.PathLike[str], metric: str | None = None,
                    task: str | None = None) -> dict[str, str]:
    """The compact letter display :meth:`EvaluationSession.letters` shows, recomputed offline.

    Raises
    ------
    SessionError
        For an unknown metric or task, or a task with ``claim: pooled``.
    JournalError
        If the journal was written with a different configuration.
    """
    check_letters_request(config, metric, task)
    book = _book(config, journal_path)
    results = book_decisions(config, book)
    claims = claims_of(config, results) if config.claim != "pooled" else []
    return letters(config, book, metric, task,
                   [(frozenset((r.policy_a, r.policy_b)), r.metric, r.result.decision) for r in results],
                   [(frozenset((c.policy_a, c.policy_b)), c.metric, c.result.established, c.result.task_claims)
                    for c in claims])
