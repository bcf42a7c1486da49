"""Tests of the running families (FamilyProcess, run_family) and multi-task claims (stats.multitask).

Sources: seed 000 §VI-B / Fig. 2 (Bonferroni over pairs, CLD), seed 003 §V-C3 Eq. (11) (multi-task),
step.md §4, nscore.md §4.  Monte Carlo checks use the bound ``alpha + 2 SE`` (stats_support).
"""

from __future__ import annotations

import numpy as np
import pytest
from stats_support import assert_fpr

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.families import FamilyProcess, run_family
from evalstop_ros.stats.holm import _holm_rejections, holm
from evalstop_ros.stats.multitask import combine_tasks, run_multitask, task_alpha
from evalstop_ros.stats.nscore import nscore_test
from evalstop_ros.stats.sequential import Decision

POLICIES = ["pi0", "diff", "vla", "pg"]


@pytest.fixture
def step_cache(tmp_path_factory, monkeypatch):
    """STEP tables synthesized by these tests go to a throw-away cache, never the user's."""
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path_factory.mktemp("step-cache")))


# -- Holm, vectorised ------------------------------------------------------------------------------

def test_vectorised_holm_equals_holm_per_column():
    p = np.random.default_rng(0).random((8, 200)) ** 3
    got = _holm_rejections(p, 0.05)
    for r in range(p.shape[1]):
        assert np.array_equal(got[:, r], holm(p[:, r], 0.05))


# -- FamilyProcess -----------------------------------------------------------------------------------

def test_bonferroni_runs_each_comparison_at_alpha_over_m():
    fam = FamilyProcess(POLICIES, method="nscore", alpha=0.05)
    assert fam.comparison_alpha == pytest.approx(0.05 / 6)
    a, b = np.zeros(40), np.ones(40)
    res = run_family({"pi0": a, "diff": b}, method="nscore", alpha=0.05)
    single = nscore_test(a, b, alpha=0.05)  # m = 1: the family is the single test
    assert (res.decisions[0], res.stopping_trials[0]) == (single.decision, single.stopping_trial)


def test_decided_policy_leaves_the_rotation_and_others_go_on():
    # "b" beats both others early; "a" vs "c" (equal) goes on until the data run out
    data = {"a": [0, 1] * 15, "b": [1] * 30, "c": [1, 0] * 15}
    res = run_family(data, method="nscore", alpha=0.05)
    assert res.decisions == (Decision.B_BETTER, Decision.CONTINUE, Decision.A_BETTER)
    assert res.n_trials[1] == max(res.stopping_trials[0], res.stopping_trials[2]) < 30
    assert res.n_trials[0] == res.n_trials[2] == 30 and res.rounds == 30
    assert res.letters() == {"b": "a", "a": "b", "c": "b"}


def test_holm_claims_at_least_what_bonferroni_claims():
    rng = np.random.default_rng(3)
    data = {name: (rng.random(150) < p).astype(float) for name, p in zip(POLICIES, (0.3, 0.5, 0.55, 0.8))}
    bonf = run_family(data, method="nscore", alpha=0.05)
    holm_ = run_family(data, method="nscore", alpha=0.05, correction="holm")
    claimed = {c for c, d in zip(bonf.comparisons, bonf.decisions) if d in (Decision.A_BETTER, Decision.B_BETTER)}
    for c, d_b, d_h in zip(bonf.comparisons, bonf.decisions, holm_.decisions):
        if c in claimed:
            assert d_h == d_b
    assert holm_.comparison_alpha == pytest.approx(0.05 / 12)  # 2 directions x 6 pairs


def test_budget_exhausted_at_n_max(step_cache):
    fam = FamilyProcess(["a", "b", "c"], method="nscore", alpha=0.05, n_max=3)
    for _ in range(3):
        fam.update([0.5, 0.5, 0.5])
    assert fam.result().decisions == (Decision.BUDGET_EXHAUSTED,) * 3 and fam.finished.all()
    with pytest.raises(StatsInputError, match="budget of n_max=3 rounds is spent"):
        fam.update([0.5, 0.5, 0.5])


def test_vs_baseline_design():
    res = run_family({"x": [1] * 20, "ref": [0] * 20, "y": [0] * 20}, method="nscore", alpha=0.05,
                     design="vs-baseline", baseline="ref")
    assert [(c.policy_a, c.policy_b) for c in res.comparisons] == [("ref", "x"), ("ref", "y")]
    assert res.decisions[0] == Decision.B_BETTER and res.n_trials[0] < 20


def test_step_family_runs_with_bonferroni(step_cache):
    rng = np.random.default_rng(1)
    data = {name: (rng.random(50) < p).astype(float) for name, p in zip("abc", (0.1, 0.5, 0.95))}
    # alpha 0.1 over 2 comparisons, two-sided: the shipped table (N_max 50, 0.025 per direction)
    res = run_family(data, method="step", alpha=0.1, n_max=50, design="vs-baseline", baseline="a")
    assert res.comparison_alpha == pytest.approx(0.05) and np.isnan(res.pvalues).all()
    assert res.decisions[1] == Decision.B_BETTER


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "step", "correction": "holm", "n_max": 50},
         "`correction` 'holm' needs anytime-valid p-values, which method 'step' does not define; use 'bonferroni'"),
        ({"method": "nscore", "correction": "sidak"}, r"`correction` should be one of \('bonferroni', 'holm'\); found 'sidak'"),
        ({"method": "ttest"}, "`method` should be one of"),
        ({"method": "step"}, "`n_max` is required for method 'step'"),
        ({"method": "nscore", "alpha": 0.0}, r"`alpha` must lie in \(0, 1\); found 0.0"),
        ({"method": "nscore", "design": "vs-baseline"}, "`baseline` must be one of `policies`"),
    ],
)
def test_family_validation(kwargs, match):
    options = {"alpha": 0.05, **kwargs}
    with pytest.raises(StatsInputError, match=match):
        FamilyProcess(["a", "b", "c"], **options)


def test_update_validation():
    fam = FamilyProcess(["a", "b", "c"], method="nscore", alpha=0.05)
    with pytest.raises(StatsInputError, match=r"one trial per policy \(3\) and sequence \(1\); found shape \(2,\)"):
        fam.update([0.1, 0.2])
    with pytest.raises(StatsInputError, match="finite score of every policy in the rotation; found nan for 'b' .sequence 0. at round 1"):
        fam.update([0.1, np.nan, 0.3])
    with pytest.raises(StatsInputError, match=r"`scores_b` must lie in \[0, 1\]; found 1.5"):
        fam.update([0.1, 1.5, 0.3])


def test_run_family_validation():
    with pytest.raises(StatsInputError, match="must map policy names to score sequences; found list"):
        run_family([[0, 1]], method="nscore", alpha=0.05)  # type: ignore[arg-type]
    with pytest.raises(StatsInputError, match=r"policy 'a' must be one-dimensional; found shape \(2, 2\)"):
        run_family({"a": [[0, 1], [1, 0]], "b": [0, 1]}, method="nscore", alpha=0.05)


# -- multi-task claims (seed 003 Eq. 11, step.md §4) -------------------------------------------------

def test_task_levels():
    assert task_alpha(0.05, 3, claim="every") == 0.05  # IUT: each task at alpha (deviation, flagged)
    assert task_alpha(0.03, 3, claim="every", correction="bonferroni") == pytest.approx(0.01)  # seed 003
    assert task_alpha(0.05, 5, claim="any") == pytest.approx(0.01)


def test_every_needs_all_tasks_and_any_needs_one():
    good, flat = ([0] * 30, [1] * 30), ([0, 1] * 15, [0, 1] * 15)
    every = run_multitask({"t1": good, "t2": flat}, method="nscore", alpha=0.05, claim="every")
    assert not every.established and every.task_claims == (Decision.B_BETTER, Decision.CONTINUE)
    anyone = run_multitask({"t1": good, "t2": flat}, method="nscore", alpha=0.05, claim="any")
    assert anyone.established and anyone.task_alpha == pytest.approx(0.025)
    assert anyone.n_trials == sum(r.n_observed for r in anyone.results)


def test_holm_across_tasks_adds_claims_bonferroni_misses():
    # two tasks with the same moderate evidence: p = 0.033 each; Bonferroni (0.025) claims none,
    # Holm claims none either unless one p <= 0.025 ... so build p1 < 0.025 < p2 <= 0.05
    strong, medium = ([0] * 30, [1] * 30), ([0] * 6 + [0.5] * 24, [1] * 6 + [0.5] * 24)
    res_b = run_multitask({"s": strong, "m": medium}, method="nscore", alpha=0.05, claim="per-task")
    res_h = run_multitask({"s": strong, "m": medium}, method="nscore", alpha=0.05, claim="per-task", correction="holm")
    p_medium = res_h.results[1].pvalue
    assert 0.025 < p_medium <= 0.05, p_medium  # the case Holm exists for
    assert res_b.task_claims == (Decision.B_BETTER, Decision.CONTINUE)
    assert res_h.task_claims == (Decision.B_BETTER, Decision.B_BETTER)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"claim": "most"}, r"`claim` should be one of \('every', 'any', 'per-task'\); found 'most'"),
        ({"claim": "every", "correction": "holm"}, r"for claim 'every' should be one of \('iut', 'bonferroni'\); found 'holm'"),
        ({"claim": "any", "alternative": "two-sided"}, "must be 'greater' or 'less' for claim 'any'"),
    ],
)
def test_multitask_validation(kwargs, match):
    with pytest.raises(StatsInputError, match=match):
        combine_tasks({"t": nscore_test([0] * 5, [1] * 5, alpha=0.05, alternative="greater")}, alpha=0.05, **kwargs)


def test_combine_checks_each_task_level():
    run = nscore_test([0] * 5, [1] * 5, alpha=0.05, alternative="greater")
    with pytest.raises(StatsInputError, match="task 'a' must be run at alpha=0.025, alternative='greater'"):
        combine_tasks({"a": run, "b": run}, claim="any", alpha=0.05)


def test_holm_across_tasks_refuses_step(monkeypatch, tmp_path):
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path))
    with pytest.raises(StatsInputError, match="'holm' needs anytime-valid p-values, which method 'step'"):
        run_multitask({"a": ([0, 1] * 25, [1] * 50), "b": ([0, 1] * 25, [1] * 50)}, method="step", alpha=0.1,
                      claim="any", correction="holm", n_max=50)


# -- Monte Carlo: family-wise error under the global null (issue 5 acceptance) ----------------------

def _family_fwe(method: str, correction: str, *, reps: int, rounds: int, seed: int, p: float = 0.5,
                n_max: int | None = None) -> int:
    """Count families (4 policies, all pairs, Bernoulli(p) for all) with at least one claim."""
    rng = np.random.default_rng(seed)
    fam = FamilyProcess(POLICIES, method=method, alpha=0.05, correction=correction, n_max=n_max,
                        n_sequences=reps, seed=int(rng.integers(2**31)))
    for _ in range(rounds):
        fam.update((rng.random((4, reps)) < p).astype(float))
        if fam.finished.all():
            break
    claims = (fam.decision == Decision.A_BETTER) | (fam.decision == Decision.B_BETTER)
    return int(claims.any(axis=0).sum())


@pytest.mark.slow
@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
def test_fwe_four_policy_nscore_family(correction):
    # Global null: 4 policies, Bernoulli(0.5) each, 200 rounds (any budget: anytime-valid), 2000 families
    reps = 2000
    assert_fpr(_family_fwe("nscore", correction, reps=reps, rounds=200, seed=11), reps, 0.05)


@pytest.mark.slow
def test_fwe_four_policy_step_family(step_cache):
    # STEP has no p-value: Bonferroni only, each pair two-sided at 0.05 / 6 (table 0.05 / 12),
    # N_max = 50; worst null near p = 1/2.  2000 families.
    reps = 2000
    assert_fpr(_family_fwe("step", "bonferroni", reps=reps, rounds=50, seed=12, n_max=50), reps, 0.05)


@pytest.mark.slow
def test_iut_every_task_claim_keeps_its_level():
    # Least favourable IUT null: B much better on two tasks, equal on the third.  Each task runs at
    # alpha (no split); the 'every' claim must still err at most alpha.  600 repetitions.
    rng = np.random.default_rng(13)
    reps, errors = 600, 0
    for _ in range(reps):
        data = {
            "t1": (rng.random(60) < 0.2, rng.random(60) < 0.9),
            "t2": (rng.random(60) < 0.2, rng.random(60) < 0.9),
            "t3": (rng.random(60) < 0.5, rng.random(60) < 0.5),
        }
        data = {k: (a.astype(float), b.astype(float)) for k, (a, b) in data.items()}
        errors += run_multitask(data, method="nscore", alpha=0.05, claim="every").established
    assert_fpr(errors, reps, 0.05)
