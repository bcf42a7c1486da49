"""Tests of evalstop_ros.stats.nscore (seed 000, Alg. 1 and App. A-C).

Reference values come from the implementation note /work/shared/spec/nscore.md §8 ("Deterministic
unit vectors", the [ref-code] values reproduced by a clean-room grid version); they are one-sided
(``alternative="greater"``, mu_0 < mu_1) at alpha = 0.05 and, unless a row says otherwise, use the
reference code's midpoint grid (``grid=100``).  Monte Carlo checks print estimate, SE and bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from stats_support import assert_fpr, found, low_discrepancy, ones_vs_zeros, period_six

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.nscore import NScoreProcess, nscore_test
from evalstop_ros.stats.sequential import Decision, run_batch, run_sequence

ALPHA = 0.05


def bets_until_stop(r0: np.ndarray, r1: np.ndarray, **options: object) -> tuple[list[float], NScoreProcess]:
    """Feed one sequence, recording the bet used by each trial, until the first decision."""
    proc = NScoreProcess(1, alternative="greater", alpha=ALPHA, **options)  # type: ignore[arg-type]
    bets = []
    for a, b in zip(r0, r1):
        bets.append(float(proc.xi[0, 0]))
        proc.update(np.array([a]), np.array([b]))
        if proc.decision[0] != Decision.CONTINUE:
            break
    return bets, proc


# -- deterministic reference vectors (nscore.md §8) ------------------------------------------

@pytest.mark.parametrize(
    ("bins", "expected_bets"),
    [
        (2, [0, 0.595, 0.795, 0.885, 0.925, 0.945]),  # §8 "(0,1) on every trial", continuous K = 2
        (3, [0, 0.735, 0.895, 0.945, 0.965, 0.975]),  # §8, K = 3
        (10, [0, 0.925, 0.985, 0.995, 0.995, 0.995]),  # §8, K = 10 (grid top 0.995)
    ],
)
def test_ones_vs_zeros_grid_bets_and_stop(bins: int, expected_bets: list[float]) -> None:
    """nscore.md §8: xi sequences and rejection at t = 6 (grid-100 maximiser of App. A-C (4))."""
    bets, proc = bets_until_stop(*ones_vs_zeros(), bins=bins, grid=100)
    np.testing.assert_allclose(bets, expected_bets, atol=1e-12)
    assert proc.decision[0] == Decision.B_BETTER
    assert proc.stopping_trial[0] == 6


def test_ones_vs_zeros_k2_closed_form() -> None:
    """K = 2 exact root = closed form xi* = (P+ - P-)/(P+ + P-) (nscore.md §3.3).

    After n pairs of (0, 1): P+ = (n+1)^2, P- = 1 (up to (n+2)^-2), so xi_{n+1} = ((n+1)^2-1)/((n+1)^2+1);
    the product 1.6 * 1.8 * (32/17) * (50/26) * (72/37) = 20.3 first exceeds 20 at t = 6.
    """
    bets, proc = bets_until_stop(*ones_vs_zeros())
    expected = [0.0] + [((n + 1) ** 2 - 1) / ((n + 1) ** 2 + 1) for n in range(1, 6)]
    np.testing.assert_allclose(bets, expected, rtol=1e-14)
    assert proc.stopping_trial[0] == 6
    assert proc.pvalue()[0] == pytest.approx(1.0 / math.prod(1 + x for x in expected), rel=1e-12)


@pytest.mark.parametrize(
    ("bins", "grid", "stop"),
    [
        (2, 100, 62),  # §8 period-6 pattern, K = 2
        (3, 100, 74),  # §8, K = 3
        (10, 100, 98),  # §8, K = 10
        (2, None, 62),  # exact root: same stops (computed here; §8 lists the grid version only)
        (3, None, 74),
        (10, None, 98),
    ],
)
def test_period_six_stopping_times(bins: int, grid: int | None, stop: int) -> None:
    """nscore.md §8 "Period-6 pattern": K = 2 stops at 62, K = 3 at 74, K = 10 at 98."""
    _, proc = bets_until_stop(*period_six(), bins=bins, grid=grid)
    assert proc.decision[0] == Decision.B_BETTER
    assert proc.stopping_trial[0] == stop


def test_period_six_first_bets_k2() -> None:
    """nscore.md §8: first xi for K = 2 are 0, .595, .795, .385, .595, .535, .475, .595."""
    bets, _ = bets_until_stop(*period_six(), bins=2, grid=100)
    np.testing.assert_allclose(bets[:8], [0, 0.595, 0.795, 0.385, 0.595, 0.535, 0.475, 0.595], atol=1e-12)


@pytest.mark.parametrize(
    ("bins", "grid", "xi_max", "stop", "pvalue"),
    [
        (3, 100, 0.995, 28, 0.049198),  # §8 low-discrepancy pair, grid, K = 3
        (11, 100, 0.995, 24, 0.046771),  # §8, K = 11
        (21, 100, 0.995, 25, 0.044575),  # §8, K = 21
        (21, None, 1 - 1e-12, 24, 0.049741),  # §8 exact root, K = 21, uncapped
        (21, None, 0.995, 25, None),  # §8 exact root, K = 21, xi_max = 0.995 (p not listed)
    ],
)
def test_low_discrepancy_pair(bins: int, grid: int | None, xi_max: float, stop: int,
                              pvalue: float | None) -> None:
    """nscore.md §8 "Low-discrepancy pair" (continuous scores, raw values in the factor)."""
    _, proc = bets_until_stop(*low_discrepancy(), bins=bins, grid=grid, xi_max=xi_max)
    assert proc.decision[0] == Decision.B_BETTER
    assert proc.stopping_trial[0] == stop
    if pvalue is not None:
        assert proc.pvalue()[0] == pytest.approx(pvalue, abs=5e-7)


# -- the bet: App. A-C objective, gate, predictability -----------------------------------------

def paper_objective(p0: np.ndarray, p1: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """seed 000 App. A-C (4): sum_{i<j} |dP| log(1 + xi sgn(dP) D) + Pbar log(1 - xi^2 D^2)."""
    k = p0.size
    c = np.arange(k) / (k - 1)
    joint = np.outer(p0, p1)  # Eq. (21)
    total = np.zeros_like(xi)
    for i in range(k):
        for j in range(i + 1, k):
            d = c[j] - c[i]
            dp = joint[i, j] - joint[j, i]  # Eq. (17)
            pbar = min(joint[i, j], joint[j, i])  # Eq. (19)
            total += abs(dp) * np.log1p(xi * np.sign(dp) * d) + pbar * np.log1p(-(xi * d) ** 2)
    return total


def posterior_means(history: np.ndarray, k: int) -> np.ndarray:
    """Dirichlet(2/K) posterior means of the bin frequencies (nscore.md §3.2)."""
    bins = np.minimum(np.floor((k - 1) * (history + 1e-9)).astype(int), k - 1)
    return (np.bincount(bins, minlength=k) + 2.0 / k) / (history.size + 2.0)


@pytest.mark.parametrize("bins", [3, 5, 21])
def test_exact_root_maximises_paper_objective(bins: int) -> None:
    """xi_n = argmax over [0, xi_max] of App. A-C (4) on pairs 1..n-1, zero when mu1_hat <= mu0_hat.

    Checked against scipy's bounded scalar maximiser of the paper's form of the objective.
    """
    rng = np.random.default_rng(7)
    r0, r1 = rng.beta(2, 3, 60), rng.beta(2.5, 2.5, 60)
    proc = NScoreProcess(1, alternative="greater", alpha=1e-9, bins=bins)
    c = np.arange(bins) / (bins - 1)
    for n in range(60):
        xi = float(proc.xi[0, 0])
        if n:
            p0, p1 = posterior_means(r0[:n], bins), posterior_means(r1[:n], bins)
            if c @ p1 <= c @ p0:
                assert xi == 0.0
            else:
                res = optimize.minimize_scalar(lambda x: -paper_objective(p0, p1, np.array([x]))[0],
                                               bounds=(0.0, 0.995), method="bounded",
                                               options={"xatol": 1e-10})
                assert xi == pytest.approx(res.x, abs=1e-6)
        proc.update(r0[n : n + 1], r1[n : n + 1])


@pytest.mark.parametrize("bins", [3, 11])
def test_grid_bet_is_first_argmax_of_paper_objective(bins: int) -> None:
    """grid=100: xi is the first argmax over (m + 1/2)/100 of App. A-C (4) (nscore.md §3.3)."""
    rng = np.random.default_rng(8)
    r0, r1 = rng.beta(2, 3, 40), rng.beta(3, 2, 40)
    proc = NScoreProcess(1, alternative="greater", alpha=1e-9, bins=bins, grid=100)
    grid = (np.arange(100) + 0.5) / 100
    for n in range(40):
        if n:
            p0, p1 = posterior_means(r0[:n], bins), posterior_means(r1[:n], bins)
            f = paper_objective(p0, p1, grid)
            xi = float(proc.xi[0, 0])
            if xi > 0:  # gate passed: xi is on the grid and attains the maximum (ties at 1e-12)
                assert f[np.searchsorted(grid, xi - 1e-12)] >= f.max() - 1e-12
        proc.update(r0[n : n + 1], r1[n : n + 1])


@pytest.mark.parametrize(("bins", "grid"), [(2, None), (5, None), (21, None), (5, 100)])
def test_bet_is_predictable(bins: int, grid: int | None) -> None:
    """Pitfall 1: xi_n depends on pairs < n only; trial n changes X_n by exactly log1p(xi_n d_n)."""
    rng = np.random.default_rng(3)
    r0, r1 = rng.random(30), rng.random(30)
    n = 17
    proc = NScoreProcess(2, alternative="two-sided", bins=bins, grid=grid, alpha=1e-9)
    for t in range(n - 1):  # two sequences share pairs 1..n-1
        proc.update(np.full(2, r0[t]), np.full(2, r1[t]))
    xi_before = proc.xi.copy()
    log_e_before = proc.log_evalues()
    np.testing.assert_array_equal(xi_before[:, 0], xi_before[:, 1])
    proc.update(np.array([0.0, 1.0]), np.array([1.0, 0.0]))  # ... and differ at pair n
    d = np.array([1.0, -1.0])
    expected = log_e_before + np.log1p(xi_before * np.array([d, -d]))
    np.testing.assert_allclose(proc.log_evalues(), expected, rtol=1e-14, atol=1e-15)


def test_raw_scores_enter_the_factor() -> None:
    """Pitfall 2 (App. A-C): X_n = prod(1 + xi_m (r1 - r0)) with the unbinned scores."""
    rng = np.random.default_rng(4)
    r0, r1 = rng.random(25), rng.random(25)
    proc = NScoreProcess(1, alternative="greater", bins=3, alpha=1e-9)
    log_x = 0.0
    for a, b in zip(r0, r1):
        log_x += math.log1p(float(proc.xi[0, 0]) * (b - a))
        proc.update(np.array([a]), np.array([b]))
    assert proc.log_evalues()[0, 0] == pytest.approx(log_x, rel=1e-13)
    assert proc.evalue()[0] == pytest.approx(math.exp(log_x), rel=1e-12)


def test_first_bet_is_zero() -> None:
    """Alg. 1 sets xi_0 = 0: the symmetric prior fails the gate, so pair 1 never moves X."""
    proc = NScoreProcess(1, bins=5)
    np.testing.assert_array_equal(proc.xi, 0.0)
    proc.update(np.array([0.0]), np.array([1.0]))
    assert proc.evalue()[0] == 1.0


def test_bets_stay_below_xi_max() -> None:
    """Pitfall 4: 0 <= xi <= xi_max < 1, so a factor can never reach 0."""
    proc = NScoreProcess(1, alternative="greater", bins=21, xi_max=0.9, alpha=1e-300)
    for _ in range(50):
        proc.update(np.array([0.0]), np.array([1.0]))
        assert 0.0 <= proc.xi[0, 0] <= 0.9
    assert proc.xi[0, 0] == 0.9


def test_partial_credit_levels_are_binned_exactly() -> None:
    """Partial credit: scores on the K-level grid k/(K-1) land in their own bin despite round-off.

    3 * 0.1 = 0.30000000000000004 and 0.7 - 1e-12 must both count as levels 3 and 7 of K = 11
    (bin(x) = floor((K-1)(x + 1e-9)), nscore.md §3.1).
    """
    rng = np.random.default_rng(5)
    levels_a, levels_b = rng.integers(0, 11, 60), rng.integers(2, 11, 60)
    exact_a, exact_b = levels_a / 10, levels_b / 10
    noisy_a, noisy_b = levels_a * 0.1, np.clip(levels_b / 10 - 1e-12, 0, 1)
    res_exact = nscore_test(exact_a, exact_b, bins=11, alternative="greater")
    res_noisy = nscore_test(noisy_a, noisy_b, bins=11, alternative="greater")
    assert res_exact.stopping_trial == res_noisy.stopping_trial
    np.testing.assert_allclose(res_exact.pvalues, res_noisy.pvalues, rtol=1e-9)


# -- decisions, freezing, vectorisation, two-sided semantics ---------------------------------

def test_frozen_after_decision() -> None:
    """Pitfall 6: after the first crossing, later data change nothing (decision, p, e, xi)."""
    proc = NScoreProcess(1, alternative="greater", bins=5)
    for _ in range(10):
        proc.update(np.array([0.0]), np.array([1.0]))
    assert proc.decision[0] == Decision.B_BETTER
    stop, p, e, xi = int(proc.stopping_trial[0]), proc.pvalue(), proc.evalue(), proc.xi
    for _ in range(20):
        proc.update(np.array([1.0]), np.array([0.0]))
    assert proc.decision[0] == Decision.B_BETTER
    assert proc.stopping_trial[0] == stop
    np.testing.assert_array_equal(proc.pvalue(), p)
    np.testing.assert_array_equal(proc.evalue(), e)
    np.testing.assert_array_equal(proc.xi, xi)


@pytest.mark.parametrize(("bins", "grid"), [(2, None), (3, None), (21, None), (5, 100)])
def test_batch_matches_single_sequences(bins: int, grid: int | None) -> None:
    """R sequences in one vectorised process = R separate runs (same decisions, trials, p-values)."""
    rng = np.random.default_rng(11)
    reps, n = 12, 120
    a = rng.beta(2, 2, (reps, n))
    b = np.clip(rng.beta(2, 2, (reps, n)) + rng.choice([-0.15, 0.0, 0.15], (reps, 1)), 0, 1)
    proc = NScoreProcess(reps, bins=bins, grid=grid)
    run_batch(proc, a, b)
    for r in range(reps):
        single = nscore_test(a[r], b[r], bins=bins, grid=grid)
        assert proc.decision[r] == (single.decision if single.stopping_trial else Decision.CONTINUE)
        assert proc.stopping_trial[r] == (single.stopping_trial or 0)
        assert proc.pvalue()[r] == pytest.approx(single.pvalue, rel=1e-10)


def test_two_sided_is_two_one_sided_tests_at_half_alpha() -> None:
    """Two-sided = 'greater' and 'less' children each at alpha/2; p = min(1, 2 min(p>, p<))."""
    rng = np.random.default_rng(12)
    for _ in range(20):
        shift = rng.choice([-0.3, 0.3])
        a, b = rng.random(150), np.clip(rng.random(150) + shift, 0, 1)
        both = nscore_test(a, b, bins=5)
        greater = nscore_test(a, b, bins=5, alternative="greater", alpha=ALPHA / 2)
        less = nscore_test(a, b, bins=5, alternative="less", alpha=ALPHA / 2)
        stops = [(r.stopping_trial, r.decision) for r in (greater, less) if r.stopping_trial]
        expected_stop, expected_decision = min(stops) if stops else (None, Decision.CONTINUE)
        assert (both.stopping_trial, both.decision) == (expected_stop, expected_decision)
        k = both.n_observed
        p_g = greater.pvalues[min(k, greater.n_observed) - 1]
        p_l = less.pvalues[min(k, less.n_observed) - 1]
        assert both.pvalue == pytest.approx(min(1.0, 2 * min(p_g, p_l)), rel=1e-12)


def test_less_is_greater_with_policies_swapped() -> None:
    """Pitfall 9: 'less' on (A, B) is 'greater' on (B, A), with A_BETTER for B_BETTER."""
    a, b = period_six()
    less = nscore_test(b, a, alternative="less", bins=3)
    greater = nscore_test(a, b, alternative="greater", bins=3)
    assert less.decision == Decision.A_BETTER and greater.decision == Decision.B_BETTER
    assert less.stopping_trial == greater.stopping_trial
    np.testing.assert_allclose(less.pvalues, greater.pvalues, rtol=1e-12)


def test_budget_exhausted_and_continue() -> None:
    """nscore_test: BUDGET_EXHAUSTED after n_max without a crossing, CONTINUE if data run out."""
    tie = np.tile([0.0, 1.0], 20)
    assert nscore_test(tie, tie, n_max=30).decision == Decision.BUDGET_EXHAUSTED
    res = nscore_test(tie, tie)
    assert res.decision == Decision.CONTINUE and res.n_observed == 40 and res.stopping_trial is None
    assert res.pvalue == 1.0


def test_pvalue_is_running_minimum() -> None:
    """App. C: p_n = min(1, 1/max_{m<=n} X_m) is nonincreasing."""
    rng = np.random.default_rng(13)
    res = nscore_test(rng.random(300), rng.random(300), bins=11, alpha=1e-6)
    assert np.all(np.diff(res.pvalues) <= 0.0)
    assert np.all((res.pvalues > 0) & (res.pvalues <= 1))


# -- validation -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores_a": [0.1, 0.2, np.nan], "scores_b": [0.1, 0.2, 0.3]},
         rf"`scores_a` must be finite; {found('nan')} at trial 3"),
        ({"scores_a": [0.1] * 7, "scores_b": [0.5] * 6 + [1.2]},
         rf"`scores_b` must lie in \[0, 1\]; {found('1.2')} at trial 7"),
        ({"scores_a": [-0.5, 0.2], "scores_b": [0.1, 0.2]},
         rf"`scores_a` must lie in \[0, 1\]; {found('-0.5')} at trial 1"),
        ({"scores_a": [0.1, 0.2, 0.3], "scores_b": [0.1, 0.2, 0.3, 0.4]},
         r"paired trial by trial; found 3 and 4 trials"),
        ({"alpha": 1.5}, r"`alpha` must lie in \(0, 1\); found 1.5"),
        ({"alpha": 0.0}, r"`alpha` must lie in \(0, 1\); found 0.0"),
        ({"alpha": "x"}, r"`alpha` must be a number in \(0, 1\); found 'x'"),
        ({"alternative": "bigger"}, r"`alternative` should be one of .*; found 'bigger'"),
        ({"bins": 1}, r"`bins` must be an integer >= 2; found 1"),
        ({"bins": 2.5}, r"`bins` must be an integer >= 2; found 2.5"),
        ({"xi_max": 1.0}, r"`xi_max` must lie in \(0, 1\); found 1.0"),
        ({"grid": 0}, r"`grid` must be a positive integer; found 0"),
        ({"n_max": -3}, r"`n_max` must be a positive integer; found -3"),
    ],
)
def test_nscore_test_validation(kwargs: dict[str, object], message: str) -> None:
    """Every input check names the argument and repeats the bad value (STYLE §4)."""
    args = {"scores_a": [0.1, 0.2], "scores_b": [0.3, 0.4], **kwargs}
    with pytest.raises(StatsInputError, match=message):
        nscore_test(args.pop("scores_a"), args.pop("scores_b"), **args)  # type: ignore[arg-type]


def test_update_validation_names_trial_and_sequence() -> None:
    """Process.update: bad value -> trial (1-based) and sequence (0-based); wrong length -> shape."""
    proc = NScoreProcess(3)
    proc.update(np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.2, 0.1]))
    with pytest.raises(StatsInputError, match=r"`scores_b` must lie in \[0, 1\]; found 2.0 at trial 2 \(sequence 1\)"):
        proc.update(np.array([0.1, 0.2, 0.3]), np.array([0.3, 2.0, 0.1]))
    with pytest.raises(StatsInputError, match=r"`scores_a` must hold one score per sequence \(3\); found shape \(2,\)"):
        proc.update(np.array([0.1, 0.2]), np.array([0.3, 0.2, 0.1]))
    with pytest.raises(StatsInputError, match=r"`n_sequences` must be a positive integer; found 0"):
        NScoreProcess(0)


def test_tolerance_clips_round_off() -> None:
    """Scores within 1e-9 of [0, 1] are clipped, not refused (validation.SCORE_TOLERANCE)."""
    res = nscore_test([0.0, -1e-12, 0.5], [1.0 + 1e-12, 1.0, 0.5])
    assert res.n_observed == 3


# -- Type-I error at worst-case nulls (Monte Carlo) -------------------------------------------

@pytest.mark.parametrize(("bins", "alternative"), [(2, "two-sided"), (3, "greater")])
def test_type_one_error_bernoulli_ties(bins: int, alternative: str) -> None:
    """Theorem 1 at the boundary of H0, p0 = p1 in {0.05, 0.5, 0.95}: 3 x 7000 sequences, N = 500.

    Any claim is false at a tie; two-sided must stay below alpha in total (children at alpha/2).
    """
    rng = np.random.default_rng(2024 + bins)
    false_claims, total = 0, 0
    for p in (0.05, 0.5, 0.95):
        reps, n = 7000, 500
        a = (rng.random((reps, n)) < p).astype(float)
        b = (rng.random((reps, n)) < p).astype(float)
        proc = NScoreProcess(reps, alternative=alternative, bins=bins, alpha=ALPHA)
        outcome = run_batch(proc, a, b)
        false_claims += int(np.isin(outcome.decision, (Decision.B_BETTER, Decision.A_BETTER)).sum())
        total += reps
    assert_fpr(false_claims, total, ALPHA)


def test_type_one_error_continuous_equal_means() -> None:
    """Lemma 1 needs only mu1 <= mu0: Beta(2, 5) vs Beta(1, 2.5) (both mean 2/7), K = 21.

    Different shapes, equal means: 10 000 sequences, N = 200, one-sided 'greater'.
    """
    rng = np.random.default_rng(77)
    reps, n = 10_000, 200
    a, b = rng.beta(2, 5, (reps, n)), rng.beta(1, 2.5, (reps, n))
    proc = NScoreProcess(reps, alternative="greater", bins=21, alpha=ALPHA)
    outcome = run_batch(proc, a, b)
    assert_fpr(int((outcome.decision == Decision.B_BETTER).sum()), reps, ALPHA)


def test_power_sanity_large_gap() -> None:
    """A 0.3 Bernoulli gap (0.3 vs 0.6) is detected in the right direction nearly always by N = 300."""
    rng = np.random.default_rng(5)
    reps, n = 2000, 300
    a = (rng.random((reps, n)) < 0.6).astype(float)
    b = (rng.random((reps, n)) < 0.3).astype(float)
    outcome = run_batch(NScoreProcess(reps), a, b)
    assert (outcome.decision == Decision.A_BETTER).mean() > 0.99
    assert (outcome.decision == Decision.B_BETTER).sum() == 0


# -- the analysis path: whole-sequence replay = the online process ------------------------------

@pytest.mark.parametrize(("bins", "grid"), [(2, None), (3, None), (21, None), (5, 100), (2, 100)])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_replay_matches_the_online_process(bins: int, grid: int | None, alternative: str) -> None:
    """nscore_test replays a block of pairs at a time; the online process feeds one pair per update.

    Same decisions, stopping trials and trials read, and the same p-values and e-values -- bit
    for bit with the exact root (with a grid, to the last digit of a BLAS product) -- with and
    without n_max, on continuous scores and on scores lying exactly on the bin grid.
    """
    rng = np.random.default_rng(bins * 7 + (grid or 0) + len(alternative))
    for case in range(12):
        n = int(rng.integers(1, 600))
        a = rng.random(n)
        b = np.clip(rng.random(n) + rng.choice([-0.12, 0.0, 0.06, 0.12]), 0, 1)
        if case % 3 == 0:
            a, b = np.round(a * (bins - 1)) / (bins - 1), np.round(b * (bins - 1)) / (bins - 1)
        n_max = None if case % 2 else int(rng.integers(1, 700))
        fast = nscore_test(a, b, bins=bins, grid=grid, alternative=alternative, n_max=n_max)
        online = run_sequence(NScoreProcess(1, bins=bins, grid=grid, alternative=alternative), a, b,
                              alternative=alternative, n_max=n_max)
        assert (fast.decision, fast.stopping_trial, fast.n_observed) == (
            online.decision, online.stopping_trial, online.n_observed), case
        if grid is None:
            np.testing.assert_array_equal(fast.pvalues, online.pvalues)
            np.testing.assert_array_equal(fast.evalues, online.evalues)
        np.testing.assert_allclose(fast.pvalues, online.pvalues, rtol=1e-12)
        np.testing.assert_allclose(fast.evalues, online.evalues, rtol=1e-12)
