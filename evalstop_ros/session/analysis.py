"""The live statistics of a session: one object per test, the Holm families and the AdaStop run.

Every test's state is a pure function of the trial book, so the live session, its replay and
:mod:`.offline` agree (docs/session.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..stats.adastop import AdaStop, AdaStopResult
from ..stats.engine import HolmEngine, HolmOptions
from ..stats.families import Comparison
from ..stats.multitask import MultiTaskResult, combine_tasks
from ..stats.registry import make_process
from ..stats.sequential import Decision, PairedProcess, SequentialResult
from .config import SessionConfig
from .config_sections import MetricConfig
from .plan import Plan
from .trials import Pair, Pairing, TrialBook, TrialRecord, form_pairs, metric_value

__all__ = [
    "ADASTOP_DECISIONS",
    "AdaStopRun",
    "AdaStopTest",
    "FedPair",
    "HolmFamily",
    "HolmTest",
    "PairedTest",
    "Test",
    "build_tests",
    "holm_options",
]

#: (trial of policy_a, trial of policy_b, value of a, value of b): one pair as fed to a test.
FedPair = tuple[int, int, float, float]

#: AdaStop's decision of comparison ``(policy_a, policy_b)`` -> :class:`Decision`: "larger" means
#: ``policy_a`` scored higher (better), and "equal" -- no difference detected at the last interim --
#: is reported as ``BUDGET_EXHAUSTED`` (the budget ran out without a claim).
ADASTOP_DECISIONS = {
    "continue": Decision.CONTINUE,
    "larger": Decision.A_BETTER,
    "smaller": Decision.B_BETTER,
    "equal": Decision.BUDGET_EXHAUSTED,
}


def _means(fed: Sequence[FedPair]) -> tuple[float, float]:
    if not fed:
        return math.nan, math.nan
    values = np.asarray(fed, dtype=np.float64)[:, 2:]
    return float(values[:, 0].mean()), float(values[:, 1].mean())


class _Member:
    """What every test is: a comparison x metric (x task), by name."""

    comparison: Comparison
    metric: MetricConfig
    task: str | None

    @property
    def method(self) -> str:
        """The method reported for this test."""
        return self.metric.method

    @property
    def label(self) -> str:
        """``"a vs b [metric/method]"``, with ``@task`` for a per-task test (log lines, messages)."""
        where = f"@{self.task}" if self.task is not None else ""
        return f"{self.comparison.policy_a} vs {self.comparison.policy_b}{where} [{self.metric.name}/{self.method}]"

    def involves(self, policy: str) -> bool:
        """Whether ``policy`` is one of the two compared."""
        return policy in (self.comparison.policy_a, self.comparison.policy_b)

    def feeds(self, record: TrialRecord) -> bool:
        """Whether a score of ``record`` can be a pair of this test (its policy, its task)."""
        return self.involves(record.policy) and (self.task is None or record.task == self.task)


class PairedTest(_Member):
    """One comparison x metric (x task): its own process decides (Bonferroni levels).

    Attributes
    ----------
    index:
        Position in the session's test list (journaled in ``decision`` events).
    task:
        The task whose trials it reads, or ``None`` for all tasks (``claim: pooled``).
    alpha:
        The level it reports and runs at.
    fed:
        The pairs consumed, in collection order.
    """

    def __init__(self, index: int, comparison: Comparison, metric: MetricConfig, *, task: str | None, alpha: float,
                 n_max: int, seed: int) -> None:
        self.index = index
        self.comparison = comparison
        self.metric = metric
        self.task = task
        self.alpha = alpha
        self.n_max = n_max
        self.seed = seed
        self.fed: list[FedPair] = []
        self._pairing: Pairing | None = None
        self.process = self._fresh()

    def _fresh(self) -> PairedProcess:
        return make_process(self.metric.method, 1, alpha=self.alpha, alternative=self.metric.alternative,
                            n_max=self.n_max, seed=self.seed, bins=self.metric.bins or 2)

    # -- state -----------------------------------------------------------------------------
    @property
    def decision(self) -> Decision:
        """The test's :class:`Decision` (``BUDGET_EXHAUSTED`` after ``n_max`` pairs undecided)."""
        decision = Decision(int(self.process.decision[0]))
        if decision == Decision.CONTINUE and len(self.fed) >= self.n_max:
            return Decision.BUDGET_EXHAUSTED
        return decision

    @property
    def decided(self) -> bool:
        """Stopped: a decision, or the budget spent."""
        return self.decision != Decision.CONTINUE

    @property
    def n(self) -> int:
        """Pairs consumed."""
        return len(self.fed)

    @property
    def stopping_trial(self) -> int | None:
        """Pair index of the decision, or ``None``."""
        return int(self.process.stopping_trial[0]) or None

    @property
    def last_trial(self) -> int | None:
        """The latest trial consumed (journaled as the trigger of the decision)."""
        return max(self.fed[-1][:2]) if self.fed else None

    def pvalue(self) -> float:
        """Anytime-valid p-value now (NaN where the method defines none)."""
        return float(self.process.pvalue()[0])

    def evalue(self) -> float:
        """E-value now (NaN where the method defines none)."""
        return float(self.process.evalue()[0])

    def means(self) -> tuple[float, float]:
        """Mean score of each side over the consumed pairs (NaN before the first)."""
        return _means(self.fed)

    def result(self) -> SequentialResult:
        """The state as a :class:`SequentialResult` (one p-value: the current one; 1 before any pair)."""
        pvalue = self.pvalue() if self.fed else 1.0
        return SequentialResult(
            method=self.metric.method, alpha=self.alpha, alternative=self.metric.alternative, decision=self.decision,
            stopping_trial=self.stopping_trial, n_observed=self.n, pvalues=np.array([pvalue]),
            evalues=np.array([self.evalue()]),
        )

    # -- feeding ---------------------------------------------------------------------------
    def wanted(self, book: TrialBook, design: str) -> list[FedPair]:
        """The pair list the current effective scores define (:func:`~.trials.form_pairs`)."""
        return self._values(book, form_pairs(book, design, self.comparison.policy_a, self.comparison.policy_b,
                                             self.task))

    def follow(self, book: TrialBook, design: str, first_score: TrialRecord | None) -> None:
        """Follow a change of one trial's score: the pairs a first score appends (``first_score``,
        O(1) by :class:`~.trials.Pairing`), else every pair again (:meth:`sync`)."""
        if self._pairing is None or self._pairing.design != design:
            self._pairing = Pairing(design, self.comparison.policy_a, self.comparison.policy_b, self.task)
            first_score = None
        new = None if first_score is None else self._pairing.add(first_score)
        if new is None:
            self.sync(self._values(book, self._pairing.rebuild(book)))
        else:
            self._extend(self._values(book, new))

    def _values(self, book: TrialBook, pairs: list[Pair]) -> list[FedPair]:
        name, out = self.metric.name, []
        for pair in pairs:
            score_a, score_b = book.trials[pair.trial_a].score, book.trials[pair.trial_b].score
            assert score_a is not None and score_b is not None
            out.append((pair.trial_a, pair.trial_b, metric_value(score_a, name), metric_value(score_b, name)))
        return out

    def sync(self, wanted: list[FedPair]) -> None:
        """Make the state equal to a fresh test fed ``wanted`` (up to its decision/budget)."""
        if wanted[: len(self.fed)] != self.fed:
            self._restart()  # an earlier pair changed: replay all
        self._extend(wanted[len(self.fed):])

    def _restart(self) -> None:
        self.process, self.fed = self._fresh(), []

    def _extend(self, pairs: list[FedPair]) -> None:
        """Feed pairs that follow every pair fed so far, until the decision."""
        for pair in pairs:
            if self.decided:
                break
            self.process.update(np.array([pair[2]]), np.array([pair[3]]))
            self.fed.append(pair)

    def conflict(self, wanted: list[FedPair]) -> str | None:
        """Why ``wanted`` is not allowed (it changes pairs a decision consumed), or ``None``."""
        if not self.decided or wanted[: len(self.fed)] == self.fed:
            return None
        return (f"comparison {self.label} already decided {self.decision.name} after {len(self.fed)} pairs, "
                "and this change alters pairs it consumed; decided comparisons cannot change")


class HolmTest(PairedTest):
    """One comparison x metric under sequential Holm: comparison ``j`` of its metric's
    :class:`~evalstop_ros.stats.engine.HolmEngine` (a one-sided process per direction).

    The test may be fed ahead of its family's analysis (its pairs arrive at other times than its
    neighbours'); the engine keeps every side's p-value after each pair so the family can analyse
    step ``n`` with the values after exactly ``n`` pairs.  Its decision is set by the family.
    """

    def __init__(self, index: int, comparison: Comparison, metric: MetricConfig, *, alpha: float,
                 engine: HolmEngine, j: int, n_max: int, seed: int) -> None:
        self.engine, self.j = engine, j
        #: The family's decision and its step (``None`` while open or out of budget).
        self.verdict = Decision.CONTINUE
        self.stop: int | None = None
        #: Set when an earlier pair changed and the state was rebuilt (the family re-analyses).
        self.rebuilt = False
        super().__init__(index, comparison, metric, task=None, alpha=alpha, n_max=n_max, seed=seed)

    def _fresh(self) -> PairedProcess:
        self.engine.reset(self.j)
        return self.engine.tests[self.j].processes[0]

    @property
    def trajectory(self) -> list[tuple[float, ...]]:
        """Every side's p-value after each fed pair."""
        return self.engine.trajectories[self.j].sides

    @property
    def decision(self) -> Decision:
        """The family's decision (``CONTINUE`` until its Holm analysis, or the budget, decides)."""
        return self.verdict

    @property
    def stopping_trial(self) -> int | None:
        """The family's step (pair index) at which Holm decided, or ``None``."""
        return self.stop

    def pvalue(self) -> float:
        """``min(1, S min_s p_s)`` over the ``S`` sides (:meth:`DirectionalTests.pvalue`)."""
        return float(self.engine.tests[self.j].pvalue()[0])

    def evalue(self) -> float:
        """Mean of the sides' e-values (:meth:`DirectionalTests.evalue`)."""
        return float(self.engine.tests[self.j].evalue()[0])

    def _feed(self, pair: FedPair) -> None:
        self.engine.feed(self.j, np.array([pair[2]]), np.array([pair[3]]))
        self.fed.append(pair)

    def _restart(self) -> None:
        self.process, self.fed, self.rebuilt = self._fresh(), [], True

    def _extend(self, pairs: list[FedPair]) -> None:
        """Feed pairs ahead of the family's analysis, up to ``n_max`` (or the decision's step)."""
        cap = self.stop if self.verdict != Decision.CONTINUE and self.stop is not None else self.n_max
        for pair in pairs[: max(0, cap - len(self.fed))]:
            self._feed(pair)

    def truncate(self, n: int) -> None:
        """Forget the pairs after the ``n``-th (a decision at step ``n`` consumed only those)."""
        if len(self.fed) > n:
            kept = self.fed[:n]
            self.process, self.fed = self._fresh(), []
            for pair in kept:
                self._feed(pair)


class HolmFamily:
    """Sequential Holm over the comparisons of one metric: its
    :class:`~evalstop_ros.stats.engine.HolmEngine`, whose comparisons the members feed.

    Analysis step ``n`` runs once every comparison still open has ``n`` pairs; in a paired
    session without gaps step ``n`` is round ``n``, and this is
    :class:`~evalstop_ros.stats.families.FamilyProcess` exactly.  A newly decided member forgets
    the pairs after its stop (a decision at step ``n`` consumed ``n`` pairs).

    After a member was rebuilt (an earlier pair changed) the steps are analysed again from the
    first, *keeping* every decision already made (:meth:`HolmEngine.restart`).  Holm's
    rejection of a hypothesis depends on the other p-values only through the hypotheses rejected
    before it, so an edit that leaves the decided comparisons' pairs alone cannot undo a decision;
    it can make one possible earlier, which :meth:`replayed` detects so the session can refuse it.
    """

    def __init__(self, tests: Sequence[HolmTest], engine: HolmEngine) -> None:
        self.tests = list(tests)
        self.engine = engine
        self.n_max = engine.options.n_max

    def resolve(self) -> None:
        """Analyse every step the members' pairs allow (again from the first after a rebuild)."""
        if any(t.rebuilt for t in self.tests):
            for test in self.tests:
                test.rebuilt = False
            self.engine.restart()
        self.engine.run()
        for test in self.tests:
            decision, stop = self.engine.outcome(test.j)
            if test.verdict == Decision.CONTINUE and decision != Decision.CONTINUE:
                test.verdict, test.stop = decision, stop
                test.truncate(stop or test.n_max)

    def replayed(self) -> list[tuple[Decision, int | None, int]]:
        """Per member: (decision, stop) of a fresh analysis of the current trajectories, forgetting
        the decisions made, and the last step that analysis reached (for the edit check)."""
        return self.engine.replayed()


class AdaStopTest(_Member):
    """One comparison of an :class:`AdaStopRun` (state set by the run after each interim).

    ``n`` and ``stopping_trial`` count scores *per agent* (``k N`` after interim ``k``):
    AdaStop compares samples, not pairs.  No p-value or e-value (NaN).
    """

    def __init__(self, index: int, comparison: Comparison, metric: MetricConfig, *, alpha: float) -> None:
        self.index = index
        self.comparison = comparison
        self.metric = metric
        self.task = None
        self.alpha = alpha
        self.decision = Decision.CONTINUE
        #: Interim of the decision (``None`` while open).
        self.interim: int | None = None
        self.n = 0
        self.last_trial: int | None = None
        self._means = (math.nan, math.nan)

    @property
    def decided(self) -> bool:
        """Decided, or "equal" after the last interim."""
        return self.decision != Decision.CONTINUE

    @property
    def stopping_trial(self) -> int | None:
        """Scores per agent when AdaStop decided (``k N``), or ``None`` (also for "equal")."""
        return self.n if self.decision in (Decision.A_BETTER, Decision.B_BETTER) else None

    def pvalue(self) -> float:
        """NaN: AdaStop defines no p-value."""
        return math.nan

    evalue = pvalue

    def means(self) -> tuple[float, float]:
        """Mean score of each agent over the scores AdaStop compared them on."""
        return self._means


def interim_records(book: TrialBook, interim: int, policy: str, n_per_interim: int) -> list[TrialRecord]:
    """The scores AdaStop takes of ``policy`` at interim ``interim``: its first ``N`` effective
    scores among the trials journaled with ``round == interim``, in trial order."""
    return [r for r in book.scored(policy) if r.round == interim][:n_per_interim]


class AdaStopRun:
    """The AdaStop test of a ``design: adastop`` session, fed interim by interim.

    Interim ``k`` is the trials journaled with ``round == k``; it is complete when every agent
    in the rotation has ``N`` effective scores there, and is then analysed at once (the block is
    each agent's scores in trial order).  A voided trial of the interim is re-run first, so an
    interim always completes.  Analysed interims are final: a correction or void of one of
    their trials is refused.
    """

    def __init__(self, config: SessionConfig, plan: Plan, tests: Sequence[AdaStopTest]) -> None:
        assert config.adastop is not None
        self.config = config
        self.tests = list(tests)
        self.n_per_interim = config.adastop.n_per_interim
        index = {policy: i for i, policy in enumerate(config.policies)}
        self.adastop = AdaStop(
            len(config.policies), n_per_interim=self.n_per_interim, n_interims=config.adastop.n_interims,
            alpha=config.metrics[0].alpha or 0.0,
            comparisons=[(index[t.comparison.policy_a], index[t.comparison.policy_b]) for t in self.tests],
            n_permutations=config.adastop.n_permutations, seed=plan.adastop_seed(),
            agent_names=config.policies, permutation=config.adastop.permutation,
        )
        #: ``(L, N)`` block of each analysed interim (NaN rows: agents out of the rotation).
        self.blocks: list[NDArray[np.float64]] = []
        #: The trials of each analysed interim, per agent.
        self.trials: list[dict[str, list[int]]] = []

    @property
    def interims(self) -> int:
        """Interims analysed."""
        return self.adastop.interim

    @property
    def finished(self) -> bool:
        """Every comparison decided (at the latest after the last interim)."""
        return self.adastop.is_finished

    def active(self) -> tuple[str, ...]:
        """Agents the next interim needs, in configuration order."""
        return tuple(p for p, needed in zip(self.config.policies, self.adastop.active) if needed)

    def sync(self, book: TrialBook) -> None:
        """Analyse the next interim if it is complete."""
        metric = self.config.metrics[0].name
        while not self.finished:
            interim = self.interims + 1
            agents = self.active()
            rows = {p: interim_records(book, interim, p, self.n_per_interim) for p in agents}
            if any(len(records) < self.n_per_interim for records in rows.values()):
                return
            block = np.full((len(self.config.policies), self.n_per_interim), np.nan)
            for k, policy in enumerate(self.config.policies):
                if policy in rows:
                    block[k] = [metric_value(r.score, metric) for r in rows[policy]]  # type: ignore[arg-type]
            result = self.adastop.update(block)
            self.blocks.append(block)
            self.trials.append({p: [r.trial_id for r in records] for p, records in rows.items()})
            self._record(result)

    def _record(self, result: AdaStopResult) -> None:
        index = {policy: i for i, policy in enumerate(self.config.policies)}
        stacked = np.stack(self.blocks)  # (k, L, N)
        for test, decision, decided_at in zip(self.tests, result.decisions, result.decided_at):
            if test.decided:
                continue
            test.decision = ADASTOP_DECISIONS[decision]
            k = result.interim if decided_at is None else decided_at
            test.interim = decided_at
            test.n = k * self.n_per_interim
            a, b = index[test.comparison.policy_a], index[test.comparison.policy_b]
            test._means = (float(stacked[:k, a].mean()), float(stacked[:k, b].mean()))
            test.last_trial = max(t for step in self.trials[:k] for p in (test.comparison.policy_a,
                                  test.comparison.policy_b) for t in step.get(p, ()))


#: Any test of a session.
Test = PairedTest | AdaStopTest


class TestKey(NamedTuple):
    """One test of a session: what it compares, on which task, at which reported level."""

    comparison_index: int
    metric_index: int
    comparison: Comparison
    metric: MetricConfig
    #: ``None`` for a pooled claim (and Holm, AdaStop): all tasks together.
    task: str | None
    #: Its level as the session reports it: the comparison's (Holm's family, AdaStop) or the test's own.
    alpha: float


def test_keys(config: SessionConfig) -> list[TestKey]:
    """A session's tests in their fixed order: comparison (:meth:`SessionConfig.comparison_list`),
    then metric, then task (non-pooled claims); a test's index is its position.  The one order
    the live session, the offline re-analysis and the audit share."""
    tasks: tuple[str | None, ...] = (None,)
    if config.claim != "pooled" and config.design != "adastop":
        tasks = tuple(t.id for t in config.tasks)
    level = config.comparison_alpha if config.correction == "holm" or config.design == "adastop" else config.test_alpha
    return [TestKey(ci, mi, comparison, metric, task, level(metric))
            for ci, comparison in enumerate(config.comparison_list())
            for mi, metric in enumerate(config.metrics) for task in tasks]


def holm_options(config: SessionConfig, metric: MetricConfig) -> HolmOptions:
    """The options of ``metric``'s sequential Holm family (the live session, the offline
    re-analysis and the audit run it with these)."""
    assert metric.alpha is not None  # resolved by validation
    return HolmOptions(metric.method, metric.alpha, metric.alternative, config.n_max, bins=metric.bins or 2)


def build_tests(config: SessionConfig, plan: Plan) -> tuple[list[Test], list[HolmFamily], AdaStopRun | None]:
    """The session's tests (:func:`test_keys` order), its Holm families, and its AdaStop run.

    STEP seeds: ``plan.step_seed(comparison, metric)``, the same for every task of a comparison x
    metric (as :func:`~evalstop_ros.stats.multitask.run_multitask` runs them).
    """
    keys = test_keys(config)
    if config.design == "adastop":
        ada_tests = [AdaStopTest(i, k.comparison, k.metric, alpha=k.alpha) for i, k in enumerate(keys)]
        return list(ada_tests), [], AdaStopRun(config, plan, ada_tests)
    if config.correction == "holm":
        m = len(config.comparison_list())
        engines = {metric.name: HolmEngine(m, holm_options(config, metric)) for metric in config.metrics}
        holm_tests = [
            HolmTest(i, k.comparison, k.metric, alpha=k.alpha, engine=engines[k.metric.name], j=k.comparison_index,
                     n_max=config.n_max, seed=plan.step_seed(k.comparison_index, k.metric_index))
            for i, k in enumerate(keys)
        ]
        families = [HolmFamily([t for t in holm_tests if t.metric is metric], engines[metric.name])
                    for metric in config.metrics]
        return list(holm_tests), families, None
    tests: list[Test] = [
        PairedTest(i, k.comparison, k.metric, task=k.task, alpha=k.alpha, n_max=config.n_max,
                   seed=plan.step_seed(k.comparison_index, k.metric_index))
        for i, k in enumerate(keys)
    ]
    return tests, [], None


def combine_claims(config: SessionConfig,
                   results: Sequence[tuple[MetricConfig, SequentialResult]]) -> list[MultiTaskResult]:
    """The multi-task claim of every comparison x metric (seed 003 §IV-C, Eq. 11-12).

    ``results`` are the per-task results in :func:`build_tests` order, so each comparison x
    metric's tasks are consecutive; each group is combined by
    :func:`~evalstop_ros.stats.multitask.combine_tasks` at the comparison's level.  A task
    without pairs counts with p-value 1 (as the live session reports it).
    """
    tasks = [t.id for t in config.tasks]
    claims = []
    for start in range(0, len(results), len(tasks)):
        group = results[start:start + len(tasks)]
        metric = group[0][0]
        per_task = {task: result if result.pvalues.size else dataclasses.replace(result, pvalues=np.ones(1))
                    for task, (_, result) in zip(tasks, group)}
        claims.append(combine_tasks(per_task, claim=config.claim, alpha=config.comparison_alpha(metric),
                                    correction=config.task_correction, alternative=metric.alternative))
    return claims
