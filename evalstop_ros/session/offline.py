"""Offline re-analysis of a session journal, independent of the live session object.

Each function folds the journal with :class:`~.trials.TrialBook`, forms the pairs with
:func:`~.trials.form_pairs` (per task for a non-pooled claim) and runs the statistics core's own
drivers with the session's levels, ``n_max`` and seeds:

* ``claim: pooled``, Bonferroni: each method's ``*_test`` function
  (:func:`~evalstop_ros.stats.registry.run_test`) at ``metric alpha / m``;
* ``correction: holm``: a per-metric sequential Holm loop over the comparisons' pair lists,
  step ``n`` feeding pair ``n`` of every open comparison (the rule of
  :class:`~evalstop_ros.stats.families.FamilyProcess`, :func:`~evalstop_ros.stats.families.holm_step`);
* a non-pooled claim: ``run_test`` per task at :func:`~evalstop_ros.stats.multitask.task_alpha`,
  combined by :func:`~evalstop_ros.stats.multitask.combine_tasks` (:func:`offline_claims`);
* ``design: adastop``: :class:`~evalstop_ros.stats.adastop.AdaStop` fed the journal's complete
  interims in order.

For a consistent journal every result equals the session's (:meth:`EvaluationSession.comparisons`,
:meth:`~EvaluationSession.claims`, :meth:`~EvaluationSession.letters`), which the tests check.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..stats.adastop import AdaStop
from ..stats.families import HOLM_SIDES, holm_step
from ..stats.multitask import MultiTaskResult, combine_tasks
from ..stats.registry import make_process, run_test
from ..stats.sequential import Decision, SequentialResult
from .analysis import ADASTOP_DECISIONS, display_letters
from .config import MetricConfig, SessionConfig, config_diff
from .errors import JournalError, SessionError
from .journal import read_journal
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
    """Sequential Holm over the pair lists of one metric's comparisons (module docstring)."""
    sides = HOLM_SIDES[metric.alternative]
    m = len(pairs)
    family_alpha = metric.alpha or 0.0
    processes = [
        make_process(metric.method, 1, alpha=family_alpha / (m * len(sides)),
                     alternative="greater" if side == 1 else "less", n_max=config.n_max, bins=metric.bins or 2)
        for _ in range(m) for side in sides
    ]
    decision = np.zeros((m, 1), dtype=np.int8)
    stop = [0] * m
    p = np.ones((m * len(sides), 1))
    pvalues: list[list[float]] = [[] for _ in range(m)]
    evalues: list[list[float]] = [[] for _ in range(m)]
    n = 0
    while n < config.n_max:
        open_ = [j for j in range(m) if decision[j, 0] == Decision.CONTINUE]
        if not open_ or any(pairs[j][0].size <= n for j in open_):
            break
        for j in open_:
            own = processes[j * len(sides):(j + 1) * len(sides)]
            for s, process in enumerate(own):
                process.update(pairs[j][0][n:n + 1], pairs[j][1][n:n + 1])
                p[j * len(sides) + s] = process.pvalue()
            pvalues[j].append(min(1.0, len(sides) * float(min(pr.pvalue()[0] for pr in own))))
            evalues[j].append(float(np.mean([pr.evalue()[0] for pr in own])))
        n += 1
        new = holm_step(p, decision, alpha=family_alpha, sides=sides)
        for j in range(m):
            if new[j, 0] != decision[j, 0]:
                stop[j] = n
        decision = new
    if n >= config.n_max:
        decision[decision == Decision.CONTINUE] = Decision.BUDGET_EXHAUSTED
    return [
        SequentialResult(method=metric.method, alpha=config.comparison_alpha(metric), alternative=metric.alternative,
                         decision=Decision(int(decision[j, 0])), stopping_trial=stop[j] or None,
                         n_observed=len(pvalues[j]), pvalues=np.array(pvalues[j]), evalues=np.array(evalues[j]))
        for j in range(m)
    ]


def _adastop(config: SessionConfig, book: TrialBook) -> list[OfflineResult]:
    """AdaStop over the journal's complete interims (those where every agent it needs has N scores)."""
    assert config.adastop is not None
    (metric,) = config.metrics
    n = config.adastop.n_per_interim
    index = {policy: i for i, policy in enumerate(config.policies)}
    comparisons = config.comparison_list()
    test = AdaStop(
        len(config.policies), n_per_interim=n, n_interims=config.adastop.n_interims, alpha=metric.alpha or 0.0,
        comparisons=[(index[c.policy_a], index[c.policy_b]) for c in comparisons],
        n_permutations=config.adastop.n_permutations, seed=Plan(config).adastop_seed(),
        agent_names=config.policies, permutation=config.adastop.permutation,
    )
    result = test.result
    while not test.is_finished:
        interim = test.interim + 1
        block = np.full((len(config.policies), n), np.nan)
        for k, policy in enumerate(config.policies):
            scores = [metric_value(r.score, metric.name) for r in book.scored(policy)  # type: ignore[arg-type]
                      if r.round == interim][:n]
            if test.active[k]:
                if len(scores) < n:
                    break
                block[k] = scores
        else:
            result = test.update(block)
            continue
        break
    out = []
    for comparison, decision, decided_at in zip(comparisons, result.decisions, result.decided_at):
        mapped = ADASTOP_DECISIONS[decision]
        count = (result.interim if decided_at is None else decided_at) * n
        stop = count if mapped in (Decision.A_BETTER, Decision.B_BETTER) else None
        out.append(OfflineResult(comparison.policy_a, comparison.policy_b, metric.name, SequentialResult(
            method="adastop", alpha=metric.alpha or 0.0, alternative=metric.alternative, decision=mapped,
            stopping_trial=stop, n_observed=count, pvalues=np.empty(0), evalues=np.empty(0))))
    return out


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
    tasks: tuple[str | None, ...] = (None,) if config.claim == "pooled" else tuple(t.id for t in config.tasks)
    results = []
    for ci, comparison in enumerate(comparisons):
        for mi, metric in enumerate(config.metrics):
            for task in tasks:
                a, b = _values(book, config, comparison.policy_a, comparison.policy_b, metric.name, task)
                result = run_test(metric.method, a, b, alpha=config.test_alpha(metric), alternative=metric.alternative,
                                  n_max=config.n_max, seed=plan.step_seed(ci, mi), bins=metric.bins or 2)
                results.append(OfflineResult(comparison.policy_a, comparison.policy_b, metric.name, result, task or ""))
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
    """The multi-task claims of :func:`book_decisions` rows (one group of tasks per test)."""
    claims = []
    tasks = [t.id for t in config.tasks]
    for start in range(0, len(results), len(tasks)):
        group = results[start:start + len(tasks)]
        per_task = {}
        for task, item in zip(tasks, group):
            run = item.result
            if not run.pvalues.size:  # a task without pairs: p-value 1, as the live session reports it
                run = dataclasses.replace(run, pvalues=np.ones(1))
            per_task[task] = run
        metric = group[0].metric
        level = config.comparison_alpha(next(m for m in config.metrics if m.name == metric))
        combined = combine_tasks(per_task, claim=config.claim, alpha=level, correction=config.task_correction,
                                 alternative=group[0].result.alternative)
        claims.append(OfflineClaim(group[0].policy_a, group[0].policy_b, metric, combined))
    return claims


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
    name = check_letters_request(config, metric, task)
    book = _book(config, journal_path)
    results = book_decisions(config, book)
    if config.claim == "pooled":
        differs = {frozenset((r.policy_a, r.policy_b)) for r in results
                   if r.metric == name and r.result.decision in (Decision.A_BETTER, Decision.B_BETTER)}
    else:
        tasks = [t.id for t in config.tasks]
        differs = {
            frozenset((c.policy_a, c.policy_b)) for c in claims_of(config, results) if c.metric == name and (
                c.result.established if task is None else
                c.result.task_claims[tasks.index(task)] in (Decision.A_BETTER, Decision.B_BETTER))
        }
    return display_letters(config, book, name, task, differs)


def check_letters_request(config: SessionConfig, metric: str | None, task: str | None) -> str:
    """The metric a letter display is asked for (default: the first); refuses unknown names."""
    names = [m.name for m in config.metrics]
    if metric is not None and metric not in names:
        raise SessionError(f"`metric` should be one of {names}; found {metric!r}")
    if task is not None:
        tasks = [t.id for t in config.tasks]
        if config.claim == "pooled":
            raise SessionError(f"per-task letters need a non-pooled claim; found task {task!r} with claim 'pooled'")
        if task not in tasks:
            raise SessionError(f"`task` should be one of {tasks}; found {task!r}")
    return metric or names[0]
