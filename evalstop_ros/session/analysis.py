"""The live statistics of a session: one object per test, the Holm families and the AdaStop run.

Three kinds of tests, chosen by the configuration (:func:`build_tests`):

:class:`PairedTest`
    ``correction: bonferroni`` (any ``claim``): one
    :class:`~evalstop_ros.stats.sequential.PairedProcess` at the test's own level, stopped at its
    own first decision or after ``n_max`` pairs.
:class:`HolmTest` in a :class:`HolmFamily`
    ``correction: holm``: one one-sided process per directional hypothesis; the decisions come
    from the family's sequential Holm (:func:`~evalstop_ros.stats.families.holm_step`).
:class:`AdaStopTest` in an :class:`AdaStopRun`
    ``design: adastop``: the comparisons of one
    :class:`~evalstop_ros.stats.adastop.AdaStop`, fed one interim block at a time.

Every test's state is a pure function of the trial book (:class:`~.trials.TrialBook`): new pairs
are fed incrementally, and a change to an earlier pair rebuilds the state by replay, so the live
session, its replay after a crash and :mod:`.offline` all agree.  Nothing here journals or
schedules; :mod:`.session` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..stats.adastop import AdaStop, AdaStopResult
from ..stats.families import HOLM_SIDES, Comparison, compact_letter_display, holm_step
from ..stats.registry import make_process
from ..stats.sequential import Decision, PairedProcess, SequentialResult
from .config import MetricConfig, SessionConfig
from .plan import Plan
from .trials import TrialBook, TrialRecord, form_pairs, metric_value

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
    "display_letters",
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
        pairs = form_pairs(book, design, self.comparison.policy_a, self.comparison.policy_b, self.task)
        name = self.metric.name
        out: list[FedPair] = []
        for pair in pairs:
            score_a, score_b = book.trials[pair.trial_a].score, book.trials[pair.trial_b].score
            assert score_a is not None and score_b is not None
            out.append((pair.trial_a, pair.trial_b, metric_value(score_a, name), metric_value(score_b, name)))
        return out

    def sync(self, wanted: list[FedPair]) -> None:
        """Make the state equal to a fresh test fed ``wanted`` (up to its decision/budget)."""
        if wanted[: len(self.fed)] != self.fed:
            self.process, self.fed = self._fresh(), []  # an earlier pair changed: replay all
        for pair in wanted[len(self.fed):]:
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
    """One comparison x metric under sequential Holm: a one-sided process per direction.

    Each directional hypothesis (``"two-sided"``: "B better" and "A better"; one-sided: one) is
    an e-process at ``side_alpha = metric alpha / H`` (``H`` hypotheses in the metric's family),
    exactly as :class:`~evalstop_ros.stats.families.FamilyProcess` builds them.  The test may be
    fed ahead of its family's analysis (its pairs arrive at other times than its neighbours');
    :attr:`trajectory` keeps every side's p-value after each pair so the family can analyse
    step ``n`` with the values after exactly ``n`` pairs.  Its decision is set by the family.
    """

    def __init__(self, index: int, comparison: Comparison, metric: MetricConfig, *, alpha: float,
                 side_alpha: float, n_max: int, seed: int) -> None:
        self.sides = HOLM_SIDES[metric.alternative]
        self.side_alpha = side_alpha
        #: p-value of every side after each fed pair.
        self.trajectory: list[tuple[float, ...]] = []
        #: The family's decision and its step (``None`` while open or out of budget).
        self.verdict = Decision.CONTINUE
        self.stop: int | None = None
        #: Set when an earlier pair changed and the state was rebuilt (the family re-analyses).
        self.rebuilt = False
        super().__init__(index, comparison, metric, task=None, alpha=alpha, n_max=n_max, seed=seed)

    def _fresh_sides(self) -> list[PairedProcess]:
        return [
            make_process(self.metric.method, 1, alpha=self.side_alpha, alternative="greater" if side == 1 else "less",
                         n_max=self.n_max, seed=self.seed, bins=self.metric.bins or 2)
            for side in self.sides
        ]

    def _fresh(self) -> PairedProcess:
        self.processes = self._fresh_sides()
        self.trajectory = []
        return self.processes[0]

    @property
    def decision(self) -> Decision:
        """The family's decision (``CONTINUE`` until its Holm analysis, or the budget, decides)."""
        return self.verdict

    @property
    def stopping_trial(self) -> int | None:
        """The family's step (pair index) at which Holm decided, or ``None``."""
        return self.stop

    def pvalue(self) -> float:
        """``min(1, S min_s p_s)`` over the ``S`` sides (:meth:`FamilyProcess.pvalues`)."""
        best = min(float(process.pvalue()[0]) for process in self.processes)
        return min(1.0, len(self.sides) * best)

    def evalue(self) -> float:
        """Mean of the sides' e-values (a test supermartingale for equality, as two-sided N-SCORE)."""
        return float(np.mean([float(process.evalue()[0]) for process in self.processes]))

    def _feed(self, pair: FedPair) -> None:
        for process in self.processes:
            process.update(np.array([pair[2]]), np.array([pair[3]]))
        self.trajectory.append(tuple(float(process.pvalue()[0]) for process in self.processes))
        self.fed.append(pair)

    def sync(self, wanted: list[FedPair]) -> None:
        """Feed the pairs of ``wanted`` not fed yet, up to ``n_max`` (or the decision's step)."""
        if wanted[: len(self.fed)] != self.fed:
            self.process, self.fed, self.rebuilt = self._fresh(), [], True
        cap = self.stop if self.verdict != Decision.CONTINUE and self.stop is not None else self.n_max
        for pair in wanted[len(self.fed): cap]:
            self._feed(pair)

    def truncate(self, n: int) -> None:
        """Forget the pairs after the ``n``-th (a decision at step ``n`` consumed only those)."""
        if len(self.fed) > n:
            kept = self.fed[:n]
            self.process, self.fed = self._fresh(), []
            for pair in kept:
                self._feed(pair)


class HolmFamily:
    """Sequential Holm over the comparisons of one metric (:class:`FamilyProcess` Notes).

    Analysis step ``n`` runs once every comparison still open has ``n`` pairs: Holm's step-down
    (:func:`~evalstop_ros.stats.families.holm_step`) over the ``H`` directional p-values -- each
    open comparison's after exactly ``n`` pairs, a decided one's from its stop -- at the metric's
    alpha; each newly rejected hypothesis decides its comparison at step ``n``, which consumed ``n``
    pairs.  After step ``n_max`` the comparisons still open are ``BUDGET_EXHAUSTED``.  In a paired
    session without gaps step ``n`` is round ``n``, and this is :class:`FamilyProcess` exactly.

    Steps are analysed incrementally; after a member was rebuilt (an earlier pair changed) they
    are analysed again from the first, *keeping* every decision already made: a decided
    comparison counts as open (its trajectory) before its stop and as decided from it.  Holm's
    rejection of a hypothesis depends on the other p-values only through the hypotheses rejected
    before it, so an edit that leaves the decided comparisons' pairs alone cannot undo a decision;
    it can make one possible earlier, which :meth:`replayed` detects so the session can refuse it.
    """

    def __init__(self, tests: Sequence[HolmTest], *, alpha: float, n_max: int) -> None:
        self.tests = list(tests)
        self.alpha = alpha
        self.n_max = n_max
        self.sides = self.tests[0].sides
        #: Steps analysed.
        self.step = 0

    def resolve(self) -> None:
        """Analyse every step the members' pairs allow (again from the first after a rebuild)."""
        if any(t.rebuilt for t in self.tests):
            for test in self.tests:
                test.rebuilt = False
            self.step = 0
        self._analyse()

    def replayed(self) -> list[tuple[Decision, int | None, int]]:
        """Per member: (decision, stop) of a fresh analysis of the current trajectories, forgetting
        the decisions made, and the last step that analysis reached (for the edit check)."""
        fresh = HolmFamily(self.tests, alpha=self.alpha, n_max=self.n_max)
        saved = [(t.verdict, t.stop) for t in self.tests]
        try:
            for test in self.tests:
                test.verdict, test.stop = Decision.CONTINUE, None
            fresh._analyse(truncate=False)
            return [(t.verdict, t.stop, fresh.step) for t in self.tests]
        finally:
            for test, (verdict, stop) in zip(self.tests, saved):
                test.verdict, test.stop = verdict, stop

    def _until(self, test: HolmTest) -> int:
        """Last step at which ``test`` counts as open: its stop, ``n_max`` for the budget, or ``inf``-like."""
        if test.verdict == Decision.CONTINUE:
            return self.n_max
        return test.stop if test.stop is not None else self.n_max

    def _analyse(self, *, truncate: bool = True) -> None:
        while True:
            if all(t.verdict != Decision.CONTINUE for t in self.tests) or self.step >= self.n_max:
                return
            n = self.step + 1
            live = [self._until(t) >= n for t in self.tests]
            if any(is_live and len(t.trajectory) < n for t, is_live in zip(self.tests, live)):
                return  # some open comparison lacks pair n
            self.step = n
            pvalues = np.array([
                value
                for t, is_live in zip(self.tests, live)
                for value in t.trajectory[(n if is_live else self._until(t)) - 1]
            ])[:, None]
            decision = np.array([[Decision.CONTINUE if is_live else int(t.verdict)]
                                 for t, is_live in zip(self.tests, live)], dtype=np.int8)
            decided = holm_step(pvalues, decision, alpha=self.alpha, sides=self.sides)[:, 0]
            for test, code in zip(self.tests, decided):
                if test.verdict == Decision.CONTINUE and code != Decision.CONTINUE:
                    test.verdict, test.stop = Decision(int(code)), n
                    if truncate:
                        test.truncate(n)
            if n == self.n_max:
                for test in self.tests:
                    if test.verdict == Decision.CONTINUE:
                        test.verdict = Decision.BUDGET_EXHAUSTED
                        if truncate:
                            test.truncate(n)


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

    def scores_in(self, book: TrialBook, interim: int, policy: str) -> list[TrialRecord]:
        """The effective scores of ``policy`` in interim ``interim``, in trial order."""
        return [r for r in book.scored(policy) if r.round == interim]

    def sync(self, book: TrialBook) -> None:
        """Analyse the next interim if it is complete."""
        metric = self.config.metrics[0].name
        while not self.finished:
            interim = self.interims + 1
            agents = self.active()
            rows = {p: self.scores_in(book, interim, p)[: self.n_per_interim] for p in agents}
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


def build_tests(config: SessionConfig, plan: Plan) -> tuple[list[Test], list[HolmFamily], AdaStopRun | None]:
    """The session's tests in their fixed order, its Holm families, and its AdaStop run.

    Order: comparison (:meth:`SessionConfig.comparison_list`), then metric, then task (non-pooled
    claims); the index of a test is its position.  STEP seeds: ``plan.step_seed(comparison,
    metric)``, the same for every task of a comparison x metric (as
    :func:`~evalstop_ros.stats.multitask.run_multitask` runs them).
    """
    comparisons = config.comparison_list()
    if config.design == "adastop":
        (metric,) = config.metrics
        ada_tests = [AdaStopTest(i, c, metric, alpha=config.comparison_alpha(metric)) for i, c in enumerate(comparisons)]
        return list(ada_tests), [], AdaStopRun(config, plan, ada_tests)
    if config.correction == "holm":
        holm_tests = [
            HolmTest(ci * len(config.metrics) + mi, comparison, metric, alpha=config.comparison_alpha(metric),
                     side_alpha=(metric.alpha or 0.0) / (len(comparisons) * len(HOLM_SIDES[metric.alternative])),
                     n_max=config.n_max, seed=plan.step_seed(ci, mi))
            for ci, comparison in enumerate(comparisons)
            for mi, metric in enumerate(config.metrics)
        ]
        families = [
            HolmFamily([t for t in holm_tests if t.metric is metric], alpha=metric.alpha or 0.0, n_max=config.n_max)
            for metric in config.metrics
        ]
        return list(holm_tests), families, None
    tasks: tuple[str | None, ...] = (None,) if config.claim == "pooled" else tuple(t.id for t in config.tasks)
    tests: list[Test] = []
    for ci, comparison in enumerate(comparisons):
        for mi, metric in enumerate(config.metrics):
            for task in tasks:
                tests.append(PairedTest(len(tests), comparison, metric, task=task, alpha=config.test_alpha(metric),
                                        n_max=config.n_max, seed=plan.step_seed(ci, mi)))
    return tests, [], None


def display_letters(config: SessionConfig, book: TrialBook, metric: str, task: str | None,
                    differs: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display of ``metric`` with the pairs ``differs`` separated.

    Means are over every effective score of each policy (on ``task`` only, if given); empty
    while some policy has no such score.
    """
    means = []
    for policy in config.policies:
        records = book.scored(policy, task)
        if not records:
            return {}
        means.append(float(np.mean([metric_value(r.score, metric) for r in records if r.score is not None])))
    return compact_letter_display(config.policies, means, differs)
