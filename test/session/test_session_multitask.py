"""Multi-task sessions: per-task tests, the claim made across tasks, and the task rotation.

Every claim type of seed 003 Eq. 11 (``every`` with the intersection-union test or Bonferroni,
``any`` and ``per-task`` with Bonferroni or Holm) is checked against
``stats.multitask.run_multitask`` on the journaled per-task pairs, and against the offline
re-analysis of the journal.

The lab (session_sim.outcome, per policy and task): ``base`` succeeds at 0.2 everywhere, ``c1``
at 0.9 everywhere, ``c2`` at 0.9 on ``t0`` only and like ``base`` elsewhere; progress is 1 on
success, uniform below 0.8 otherwise.  N-SCORE (K = 21) on progress, one-sided ("greater":
the candidate better), alpha 0.1 over two comparisons against ``base``, n_max 30 per task.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import pytest
import session_sim as sim

from evalstop_ros.session import (
    ClaimSnapshot,
    EvaluationSession,
    SessionError,
    SessionState,
    offline_claims,
    offline_decisions,
    offline_letters,
    read_journal,
)
from evalstop_ros.session.plan import Plan
from evalstop_ros.session.trials import TrialBook, form_pairs
from evalstop_ros.stats.multitask import run_multitask
from evalstop_ros.stats.sequential import Decision

TASKS = [{"id": f"t{k}", "initial_conditions": [{"id": f"t{k}c{i}", "reset_instructions": "r"} for i in range(2)]}
         for k in range(3)]
RATES = {**{("base", f"t{k}"): 0.2 for k in range(3)}, **{("c1", f"t{k}"): 0.9 for k in range(3)},
         ("c2", "t0"): 0.9, ("c2", "t1"): 0.2, ("c2", "t2"): 0.25}
SETTINGS = {"policies": ["base", "c1", "c2"], "comparisons": "vs-baseline", "baseline": "base", "tasks": TASKS,
            "alpha": 0.1, "n_max": 30, "seed": 4,
            "metrics": [{"name": "progress", "method": "nscore", "bins": 21, "alternative": "greater"}]}
CLAIMS = [("every", "iut"), ("every", "bonferroni"), ("any", "bonferroni"), ("any", "holm"),
          ("per-task", "bonferroni"), ("per-task", "holm")]


def lab_for(rates):
    def play(session: EvaluationSession) -> list:
        trials = []
        while (trial := session.next_trial()) is not None:
            session.record_runner_result(trial.trial_id, True, 1.0)
            success, progress = sim.outcome(trial.policy_id, trial.trial_id,
                                            {trial.policy_id: rates[trial.policy_id, trial.task]})
            assert session.submit_score(trial.trial_id, trial.token, success, progress).accepted
            trials.append(trial)
        return trials
    return play


@dataclasses.dataclass(frozen=True)
class Run:
    config: object
    path: object
    trials: list
    comparisons: list
    claims: list
    letters: dict


def run(path, **overrides) -> Run:
    config = sim.make_config(**{**SETTINGS, **overrides})
    with EvaluationSession.open(path, config, "mt", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        trials = lab_for(RATES)(session)
        assert session.state == SessionState.FINISHED
        letters = {None: session.letters(), **{t["id"]: session.letters(task=t["id"]) for t in TASKS}}
        return Run(config, path, trials, session.comparisons(), session.claims(), letters)


@pytest.fixture(scope="module", params=CLAIMS, ids="-".join)
def finished(request, tmp_path_factory) -> Run:
    claim, correction = request.param
    return run(tmp_path_factory.mktemp("mt") / "session.db", claim=claim, task_correction=correction)


def per_task_pairs(run_: Run, policy_a: str, policy_b: str) -> dict[str, tuple[list[float], list[float]]]:
    book = TrialBook().fold(read_journal(run_.path).events)
    out = {}
    for task in TASKS:
        pairs = form_pairs(book, run_.config.design, policy_a, policy_b, task["id"])
        out[task["id"]] = ([book.trials[p.trial_a].score.progress for p in pairs],
                           [book.trials[p.trial_b].score.progress for p in pairs])
    return out


def test_claims_equal_run_multitask_on_the_journaled_scores(finished):
    config, plan = finished.config, Plan(finished.config)
    for ci, claim in enumerate(finished.claims):
        expected = run_multitask(per_task_pairs(finished, claim.policy_a, claim.policy_b), method="nscore",
                                 alpha=0.05, claim=config.claim, correction=config.task_correction,
                                 alternative="greater", n_max=30, bins=21, seed=plan.step_seed(ci, 0))
        assert (claim.established, claim.task_claims, claim.n) == (
            expected.established, expected.task_claims, expected.n_trials)
        assert (claim.alpha, claim.task_alpha, claim.correction) == (0.05, expected.task_alpha, expected.correction)
        assert claim.final  # the session is over


def test_tests_claims_and_letters_equal_the_offline_analysis(finished):
    offline = offline_decisions(finished.config, finished.path)
    assert [(o.policy_a, o.policy_b, o.task, o.result.decision, o.result.stopping_trial, o.result.n_observed)
            for o in offline] == [(c.policy_a, c.policy_b, c.task, c.decision, c.stopping_trial, c.n)
                                  for c in finished.comparisons]
    claims = offline_claims(finished.config, finished.path)
    assert [(c.policy_a, c.policy_b, c.result.established, c.result.task_claims) for c in claims] == [
        (c.policy_a, c.policy_b, c.established, c.task_claims) for c in finished.claims]
    for task, letters in finished.letters.items():
        assert offline_letters(finished.config, finished.path, task=task) == letters


def test_each_claim_type_concludes_what_it_should(finished):
    claim_type = finished.config.claim
    c1, c2 = finished.claims  # base vs c1, base vs c2
    assert c1.task_claims == (Decision.B_BETTER,) * 3
    assert c1.established and c1.decision == Decision.B_BETTER
    # c2 is better on t0 only: "every" is refused, "any" and "per-task" are made (on t0 alone).
    assert c2.task_claims[1:] == (Decision.CONTINUE, Decision.CONTINUE)
    assert c2.established == (claim_type != "every")
    assert c2.decision == (Decision.BUDGET_EXHAUSTED if claim_type == "every" else Decision.B_BETTER)
    assert finished.letters[None] == ({"c1": "a", "c2": "ab", "base": "b"} if claim_type == "every" else
                                      {"c1": "a", "c2": "a", "base": "b"})
    # vs-baseline: c1 and c2 are never compared, so on t1 c2 shares a letter with both.
    assert finished.letters["t1"] == {"c1": "a", "base": "b", "c2": "ab"}


def test_rows_are_per_task_at_the_task_level(finished):
    level = {"iut": 0.05, "bonferroni": 0.05 / 3, "holm": 0.05 / 3}[finished.config.task_correction]
    assert [(c.policy_b, c.task) for c in finished.comparisons] == [
        (p, f"t{k}") for p in ("c1", "c2") for k in range(3)]
    assert all(c.alpha == pytest.approx(level) and c.alternative == "greater" for c in finished.comparisons)


def test_summary_row_maps_the_claim_onto_comparison_status(finished):
    row = finished.claims[1].as_comparison()
    assert (row.policy_a, row.policy_b, row.task, row.method, row.alpha) == ("base", "c2", "*", "nscore", 0.05)
    assert row.decision == finished.claims[1].decision and row.stopping_trial is None
    assert math.isnan(row.pvalue) and math.isnan(row.evalue) and row.n == finished.claims[1].n
    assert row.mean_b > row.mean_a


# -- scheduling ----------------------------------------------------------------------------------------
def test_rounds_cycle_through_the_tasks_until_their_tests_are_decided(finished):
    rounds = {}  # round -> (task, condition, policies)
    for trial in finished.trials:
        task, condition, policies = rounds.setdefault(trial.round, (trial.task, trial.initial_condition, []))
        assert (trial.task, trial.initial_condition) == (task, condition)  # a paired round shares both
        policies.append(trial.policy_id)
    sequence = [rounds[r][0] for r in sorted(rounds)]
    assert sorted(sequence[:3]) == sorted(sequence[3:6]) == ["t0", "t1", "t2"]  # shuffled cycles
    assert sequence[:6] != ["t0", "t1", "t2"] * 2
    # t0's tests decide first (both candidates far better there): t0 leaves the rotation.
    last_t0 = max(r for r in rounds if rounds[r][0] == "t0")
    assert all(rounds[r][0] != "t0" for r in rounds if r > last_t0) and last_t0 < max(rounds)
    counts = collections.Counter(sequence)
    assert counts["t1"] == counts["t2"] == 30 and counts["t0"] < 30  # t1, t2 run to n_max


def test_a_round_runs_only_the_policies_open_on_its_task(tmp_path):
    # c1 is decided on every task early; then the rounds run base and c2 only.
    result = run(tmp_path / "s.db", claim="per-task")
    decided_c1 = max(c.stopping_trial or 0 for c in result.comparisons if c.policy_b == "c1")
    later = [t for t in result.trials if t.round > 3 * decided_c1 + 3]
    assert later and {t.policy_id for t in later} == {"base", "c2"}


def test_independent_design_pairs_within_a_task(tmp_path):
    result = run(tmp_path / "s.db", claim="any", design="independent")
    offline = offline_decisions(result.config, result.path)
    assert [(o.result.decision, o.result.stopping_trial, o.result.n_observed) for o in offline] == [
        (c.decision, c.stopping_trial, c.n) for c in result.comparisons]
    by_round = collections.defaultdict(set)
    for trial in result.trials:
        by_round[trial.round].add(trial.task)
    assert all(len(tasks) == 1 for tasks in by_round.values())  # a round still runs one task
    assert len({(t.round, t.initial_condition) for t in result.trials}) > len(by_round)  # fresh conditions


def test_step_every_task_claim_uses_the_sessions_step_seeds(tmp_path):
    # STEP (one-sided, IUT at 0.05 per task, shipped n_max 50 table); c2 worse than base on t1:
    # STEP's one-sided test still stops there in the other direction, which refutes "every" early.
    rates = {**RATES, ("c2", "t1"): 0.05, ("base", "t1"): 0.6}
    config = sim.make_config(**{**SETTINGS, "claim": "every", "n_max": 50, "alpha": 0.1,
                                "metrics": [{"name": "success", "method": "step", "alternative": "greater"}]})
    with EvaluationSession.open(tmp_path / "s.db", config, "mt", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        refuted = None
        while (trial := session.next_trial()) is not None:
            session.record_runner_result(trial.trial_id, True, 1.0)
            success, progress = sim.outcome(trial.policy_id, trial.trial_id,
                                            {trial.policy_id: rates[trial.policy_id, trial.task]})
            session.submit_score(trial.trial_id, trial.token, success, progress)
            claim = session.claims()[1]
            if refuted is None and claim.final:
                refuted = claim
                assert session.status().active_tasks  # settled before every task stopped
        claims = session.claims()
    assert refuted is not None and not refuted.established and refuted.decision == Decision.BUDGET_EXHAUSTED
    assert refuted.task_claims[1] == Decision.CONTINUE  # t1 stopped A_BETTER: no claim, "every" refuted
    plan = Plan(config)
    book = TrialBook().fold(read_journal(tmp_path / "s.db").events)
    for ci, claim in enumerate(claims):
        data = {}
        for task in TASKS:
            pairs = form_pairs(book, "paired", claim.policy_a, claim.policy_b, task["id"])
            data[task["id"]] = ([float(book.trials[p.trial_a].score.success) for p in pairs],
                                [float(book.trials[p.trial_b].score.success) for p in pairs])
        expected = run_multitask(data, method="step", alpha=0.05, claim="every", alternative="greater", n_max=50,
                                 seed=plan.step_seed(ci, 0))
        assert (claim.established, claim.task_claims) == (expected.established, expected.task_claims)
        assert [r.decision for r in expected.results] == [
            c.decision for c in session.comparisons() if c.policy_b == claim.policy_b]


def test_multitask_session_reopens_to_the_same_state(journal_path):
    config = sim.make_config(**SETTINGS, claim="any", task_correction="holm")

    def freeze(session):
        rows = [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in dataclasses.astuple(c))
                for c in session.comparisons()]
        return session.status(), rows, session.claims(), session.pending_trial()

    with EvaluationSession.open(journal_path, config, "mt", durable=False, plan_key=sim.TEST_KEY) as session:
        session.start()
        for _ in range(200):
            sim.step(session, lambda p, t: sim.outcome(p, t, {p: 0.5}))
        snapshot = freeze(session)
        assert snapshot[0].active_tasks and snapshot[0].max_trials_left > 0
    with EvaluationSession.open(journal_path, config, "mt", durable=False, plan_key=sim.TEST_KEY) as session:
        assert freeze(session) == snapshot


def test_per_task_letters_refuse_an_unknown_task(tmp_path):
    config = sim.make_config(**SETTINGS, claim="any")
    with EvaluationSession.open(tmp_path / "s.db", config, "mt", durable=False, plan_key=sim.TEST_KEY) as session:
        with pytest.raises(SessionError, match=r"`task` should be one of \['t0', 't1', 't2'\]; found 't9'"):
            session.letters(task="t9")
        assert session.letters(task="t0") == {}  # no scores yet
        assert all(isinstance(c, ClaimSnapshot) and not c.final for c in session.claims())


def test_without_drop_decided_every_task_and_policy_keeps_running(tmp_path):
    result = run(tmp_path / "s.db", claim="any", drop_decided=False)
    assert collections.Counter(t.task for t in result.trials) == {"t0": 90, "t1": 90, "t2": 90}
    assert collections.Counter(t.policy_id for t in result.trials) == {"base": 90, "c1": 90, "c2": 90}
    kinds = collections.Counter(e.kind for e in read_journal(result.path).events)
    assert kinds["post_decision_score"] > 0  # the scores of decided tasks feed no test
    offline = offline_decisions(result.config, result.path)
    assert [(o.result.decision, o.result.n_observed) for o in offline] == [
        (c.decision, c.n) for c in result.comparisons]
