"""Tests of evalstop_ros.stats.ranking: the A/B data type, BT, BT-Davidson, Elo and PROG (seed 001 App. B.5).

The MLEs are checked against an independent maximisation of the same penalised likelihood with
``scipy.optimize.minimize`` (BFGS on code written here from the paper's formulas), their SEs
against a finite-difference Hessian, and Elo and PROG against hand computations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize
from scipy.special import expit, log_expit

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.ranking import Comparisons, comparisons
from evalstop_ros.stats.ranking_eval import coverage_of
from evalstop_ros.stats.ranking_fits import ELO_K, fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog


def small_arena(seed: int = 0, m: int = 400, n: int = 5) -> tuple[Comparisons, NDArray[np.float64]]:
    """Comparisons drawn from a Davidson model with planted abilities and nu = 0.6."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.0, 1.0, n)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    u = (theta[a] - theta[b]) / 2.0
    weights = np.stack([np.exp(-u), np.full(m, 0.6), np.exp(u)], axis=1)
    probs = weights / weights.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(3, p=row) for row in probs])
    names = [f"p{k}" for k in range(n)]
    labels = {0: "B", 1: "tie", 2: "A"}
    data = comparisons(
        [names[k] for k in a], [names[k] for k in b], [labels[int(v)] for v in y],
        progress_a=rng.uniform(0, 1, m), progress_b=rng.uniform(0, 1, m), policies=names,
    )
    return data, theta


def bt_objective(theta: NDArray[np.float64], data: Comparisons, l2: float) -> float:
    d = theta[data.i] - theta[data.j]
    w = data.outcome / 2.0
    return -float(np.sum(w * log_expit(d) + (1 - w) * log_expit(-d))) + 0.5 * l2 * float(theta @ theta)


def davidson_objective(x: NDArray[np.float64], data: Comparisons, l2: float) -> float:
    theta, nu = x[:-1], math.exp(x[-1])
    ea, eb = np.exp(theta[data.i]), np.exp(theta[data.j])
    et = nu * np.sqrt(ea * eb)
    top = np.select([data.outcome == 2, data.outcome == 0], [ea, eb], et)
    return -float(np.sum(np.log(top / (ea + eb + et)))) + 0.5 * l2 * float(theta @ theta)


def test_comparisons_codes_preferences_and_pool() -> None:
    data = comparisons(["x", "y"], ["y", "z"], ["A", "tie"], policies=["z", "y", "x"])
    assert data.policies == ("z", "y", "x")
    assert data.i.tolist() == [2, 1] and data.j.tolist() == [1, 0]
    assert data.outcome.tolist() == [2, 1]
    assert np.isnan(data.progress_a).all() and data.tasks == ("", "")
    wins, games = data.win_matrix()
    assert wins[2, 1] == 1.0 and wins[1, 0] == 0.5 and wins[0, 1] == 0.5
    assert games[1, 2] == 1 and games.sum() == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policy_a": ["a"], "policy_b": ["b", "c"], "preference": ["A"]}, "one entry per comparison"),
        ({"policy_a": ["a"], "policy_b": ["a"], "preference": ["A"]}, "against itself"),
        ({"policy_a": ["a"], "policy_b": ["b"], "preference": ["left"]}, "found 'left' at comparison 1"),
        ({"policy_a": ["a"], "policy_b": ["q"], "preference": ["A"], "policies": ["a", "b"]}, "'q' at comparison 1"),
        ({"policy_a": ["a"], "policy_b": ["b"], "preference": ["A"], "policies": ["a", "a", "b"]}, "distinct"),
        ({"policy_a": ["a"], "policy_b": ["b"], "preference": ["A"], "progress_a": [1.5]}, r"\[0, 1\]; found 1.5"),
        ({"policy_a": ["a"], "policy_b": ["b"], "preference": ["A"], "progress_b": [0.1, 0.2]}, "one value per"),
    ],
)
def test_comparisons_rejects_bad_input(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(StatsInputError, match=message):
        comparisons(**kwargs)  # type: ignore[arg-type]


def test_bt_matches_an_independent_maximisation_and_is_centred() -> None:
    data, _ = small_arena()
    fit = fit_bt(data, l2=0.05)
    reference = optimize.minimize(bt_objective, np.zeros(5), args=(data, 0.05), method="BFGS", tol=1e-10)
    np.testing.assert_allclose(fit.scores, reference.x - reference.x.mean(), atol=1e-5)
    assert abs(fit.scores.sum()) < 1e-9


def test_bt_se_is_the_centred_hc2_sandwich() -> None:
    # H from a finite-difference Hessian of the penalised objective, K from finite-difference
    # gradients of each comparison's own log-likelihood, each divided by 1 - h_n with the GLM
    # leverage h_n = w_n x_n^T H^-1 x_n, w_n = p_n (1 - p_n) (issue 20: HC2, MacKinnon & White 1985)
    data, _ = small_arena(seed=1)
    fit = fit_bt(data, l2=0.01)
    hessian = optimize.approx_fprime(
        fit.scores, lambda x: optimize.approx_fprime(x, bt_objective, 1e-6, data, 0.01), 1e-5,
    )
    per_row = np.array([
        optimize.approx_fprime(fit.scores, lambda x, n=n: bt_objective(x, data.subset([n]), 1e-300), 1e-7)
        for n in range(len(data))
    ])
    inverse = np.linalg.inv(hessian)
    p = expit(fit.scores[data.i] - fit.scores[data.j])
    x = np.zeros((len(data), 5))
    x[np.arange(len(data)), data.i], x[np.arange(len(data)), data.j] = 1.0, -1.0
    leverage = p * (1 - p) * np.einsum("nk,kl,nl->n", x, inverse, x)
    assert 0.0 < leverage.min() and leverage.sum() == pytest.approx(4.0, abs=0.01)  # trace of the hat: N - 1 identified
    centre = np.eye(5) - 0.2
    kernel = per_row.T @ (per_row / (1.0 - leverage)[:, None])
    expected = np.sqrt(np.diag(centre @ inverse @ kernel @ inverse @ centre))
    np.testing.assert_allclose(fit.se, expected, rtol=2e-3)
    assert fit.se_method.startswith("HC2 sandwich") and fit.calibrated
    assert fit.df is not None and np.all(fit.df > 50)  # 400 balanced comparisons: t is nearly normal


def test_paired_hc2_and_bell_mccaffrey_df_match_the_matrix_formulas() -> None:
    # The least-squares model is linear, so HC2 and the Bell-McCaffrey df (with the kurtosis term of
    # issue 20) can be written out with the full M x M residual maker (Bell & McCaffrey 2002; Imbens &
    # Kolesar 2016, Sec. III) and compared.
    rng = np.random.default_rng(4)
    n, m = 5, 40
    a = rng.integers(0, n - 1, m)
    b = (a + rng.integers(1, n - 1, m)) % (n - 1)
    a[:2], b[:2] = (4, 1), (0, 4)  # policy 4 plays only twice: high leverage, few df
    names = [f"p{k}" for k in range(n)]
    data = comparisons([names[k] for k in a], [names[k] for k in b], ["A"] * m,
                       progress_a=rng.uniform(0, 1, m), progress_b=rng.uniform(0, 1, m), policies=names)
    fit = fit_paired_progress(data)
    design = np.zeros((m, n))
    design[np.arange(m), data.i], design[np.arange(m), data.j] = 1.0, -1.0
    y = data.progress_a - data.progress_b
    inverse = np.linalg.inv(design.T @ design + 1e-6 * np.eye(n))
    hat = design @ inverse @ design.T
    leverage = np.diag(hat)
    residual = y - hat @ y
    maker = np.eye(m) - hat
    centre = np.eye(n) - 1.0 / n
    standardised = residual**2 / (1.0 - leverage)
    kappa = np.mean(standardised**2) / np.mean(standardised) ** 2
    assert kappa < 2.5  # differences of uniform progress: lighter-tailed than normal (kappa = 3)
    for p in range(n):
        weights = (design @ inverse @ centre[:, p]) ** 2 / (1.0 - leverage)
        assert fit.se[p] == pytest.approx(math.sqrt(np.sum(weights * residual**2)), rel=1e-6)
        quad = maker @ np.diag(weights) @ maker
        # Var(e^T B e) = 2 tr(B^2) + (kappa - 3) sum_n B_nn^2 (Seber & Lee 2003, Thm 1.6), kappa pooled
        spread = np.trace(quad @ quad) + 0.5 * (kappa - 3.0) * np.sum(np.diag(quad) ** 2)
        assert fit.df is not None and fit.df[p] == pytest.approx(np.trace(quad) ** 2 / spread, rel=1e-6)
    assert fit.df[4] < 2.5 < 4 < fit.df[:4].min()  # the rarely compared policy gets the widest t


def test_bt_ranks_the_planted_order() -> None:
    data, theta = small_arena(seed=2, m=2000)
    assert fit_bt(data).ranks.tolist() == list(range(5, 0, -1))


def test_davidson_matches_an_independent_maximisation_and_recovers_nu() -> None:
    data, theta = small_arena(seed=3, m=3000)
    fit = fit_davidson(data, l2=0.01)
    reference = optimize.minimize(davidson_objective, np.zeros(6), args=(data, 0.01), method="BFGS", tol=1e-10)
    # BFGS creeps along the weakly penalised common shift; compare the identified (centred) scores
    np.testing.assert_allclose(fit.scores, reference.x[:-1] - reference.x[:-1].mean(), atol=1e-4)
    assert fit.params["nu_tie"] == pytest.approx(math.exp(reference.x[-1]), rel=1e-4)
    # planted nu = 0.6, theta = linspace(-1, 1): within 4 SE (SE from the fit)
    assert abs(fit.params["nu_tie"] - 0.6) < 0.06
    assert np.all(np.abs(fit.scores - theta) < 4 * fit.se + 0.02)


def test_davidson_without_ties_scores_like_bt() -> None:
    data = comparisons(["a", "a", "b", "c", "a"], ["b", "c", "c", "a", "b"], ["A", "A", "A", "B", "B"])
    np.testing.assert_allclose(fit_davidson(data).scores, fit_bt(data).scores, atol=0.05)
    assert fit_davidson(data).params["nu_tie"] < 1e-3


def test_elo_one_pass_by_hand() -> None:
    data = comparisons(["a", "b"], ["b", "a"], ["A", "tie"])
    k = 0.5
    first = k * (1.0 - 0.5)  # a beats b from equal ratings
    second = k * (0.5 - expit(-2 * first))  # b (label A) ties a
    fit = fit_elo(data, k=k, n_boot=0)
    np.testing.assert_allclose(fit.scores, [first - second, -first + second])
    assert np.isnan(fit.se).all()
    assert ELO_K == pytest.approx(0.1842, abs=1e-4)


def test_elo_se_does_not_shrink_like_an_mle() -> None:
    # A constant K-factor weights recent games most: Elo tracks, it never converges, so 16x the
    # data leaves its bootstrap SE about where it was while BT's falls by about 4x.
    small, _ = small_arena(seed=4, m=100)
    large, _ = small_arena(seed=4, m=1600)
    assert np.all(fit_bt(large).se < 0.4 * fit_bt(small).se)
    elo_small, elo_large = fit_elo(small, n_boot=50).se, fit_elo(large, n_boot=50).se
    assert np.all(np.isfinite(elo_large)) and np.all(elo_large > 0.4 * elo_small)
    assert abs(fit_elo(large, n_boot=0).scores.sum()) < 1e-9


def test_prog_by_hand() -> None:
    data = comparisons(
        ["a", "b", "a"], ["b", "c", "c"], ["A", "tie", "B"],
        progress_a=[1.0, 0.5, np.nan], progress_b=[0.2, 0.5, 0.9],
    )
    fit = fit_prog(data)
    np.testing.assert_allclose(fit.scores, [1.0, 0.35, 0.7])
    assert np.isnan(fit.se[0])  # one rollout of a has a progress score
    assert fit.se[1] == pytest.approx(np.std([0.2, 0.5], ddof=1) / math.sqrt(2))
    # Student t with N_p - 1 = 1 degree of freedom: 12.706 se either side at 95 %
    low, high = fit.interval(0.95)
    assert high[1] - fit.scores[1] == pytest.approx(12.7062 * fit.se[1], rel=1e-4) and np.isnan(low[0])
    assert [row["policy"] for row in fit.table()] == ["a", "c", "b"]


def test_prog_interval_is_halls_skewness_corrected_t() -> None:
    # policy a: five rollouts piled up at 1 with one failure (skewness < 0); b: symmetric scores.
    # Hall (1992): h(T) = T + g T^2 / 3 sqrt(n) + g^2 T^3 / 27 n + g / 6 sqrt(n) = -+ t_{n-1} at the ends
    a_scores, b_scores = [1.0, 1.0, 1.0, 0.95, 0.2], [0.3, 0.5, 0.7, 0.4, 0.6]
    data = comparisons(["a"] * 5, ["b"] * 5, ["A"] * 5, progress_a=a_scores, progress_b=b_scores)
    fit = fit_prog(data, n_boot=0)  # without the bootstrap-t (the default, below)
    assert fit.boot_t is None
    x = np.asarray(a_scores)
    g = np.mean((x - x.mean()) ** 3) / np.std(x, ddof=1) ** 3
    assert fit.skewness is not None and fit.skewness[0] == pytest.approx(g) and g < -1.0
    assert fit.skewness[1] == pytest.approx(0.0, abs=1e-12)
    low, high = fit.interval(0.95)
    t = 2.776445105  # t_{0.975, 4}

    def hall(value: float) -> float:
        return value + g * value**2 / (3 * math.sqrt(5)) + g**2 * value**3 / 135 + g / (6 * math.sqrt(5))

    assert hall((fit.scores[0] - low[0]) / fit.se[0]) == pytest.approx(t, rel=1e-8)
    assert hall((fit.scores[0] - high[0]) / fit.se[0]) == pytest.approx(-t, rel=1e-8)
    # left-skewed: the interval reaches further down (a sample with few failures overstates the mean)
    assert fit.scores[0] - low[0] > 1.2 * (high[0] - fit.scores[0])
    # zero skewness: the plain Student t interval
    assert fit.scores[1] - low[1] == pytest.approx(t * fit.se[1]) == high[1] - fit.scores[1]


def test_prog_interval_is_the_symmetric_bootstrap_t() -> None:
    # Hall (1988, Ann. Stat. 16:927; 1992, Sec. 3.6): score -+ q se, q the ceil((B + 1) level)-th smallest
    # |T*| = |mean* - mean| / se* over B resamples of the policy's rollouts
    rng = np.random.default_rng(3)
    a_scores = np.round(np.where(rng.random(30) < 0.8, 1.0, rng.uniform(0.0, 0.7, 30)) * 20) / 20  # skewed
    b_scores = np.round(rng.uniform(0.2, 0.8, 30) * 20) / 20
    data = comparisons(["a"] * 30, ["b"] * 30, ["A"] * 30, progress_a=a_scores, progress_b=b_scores)
    fit = fit_prog(data, n_boot=4000, seed=1)
    assert fit.boot_t is not None and fit.boot_t.shape == (4000, 2)
    assert np.all(fit.boot_t[1:] >= fit.boot_t[:-1])  # sorted (a resample of ones only: infinite)
    for level in (0.8, 0.95):
        low, high = fit.interval(level)
        q = fit.boot_t[math.ceil(4001 * level) - 1]
        np.testing.assert_allclose(fit.scores - low, q * fit.se)
        np.testing.assert_allclose(high - fit.scores, q * fit.se)
    # the same quantile from an independent resampling of a's rollouts
    draws = a_scores[rng.integers(0, 30, (20000, 30))]
    with np.errstate(divide="ignore"):  # a resample of ones only: infinite, as in the fit
        t_star = np.abs(draws.mean(axis=1) - a_scores.mean()) / (draws.std(axis=1, ddof=1) / math.sqrt(30))
    assert fit.boot_t[3801, 0] == pytest.approx(np.quantile(t_star, 0.95), rel=0.05)
    # a skewed policy's quantile exceeds Student's t (its t interval is short), a symmetric one's is near it
    assert fit.boot_t[3801, 0] > 2.045 * 1.05 and fit.boot_t[3801, 1] == pytest.approx(2.045, rel=0.07)
    # seeded: the same seed, the same interval
    np.testing.assert_array_equal(fit_prog(data, n_boot=4000, seed=1).interval()[0], fit.interval()[0])


def test_prog_bootstrap_t_falls_back_to_halls_interval_with_few_rollouts() -> None:
    # three rollouts: a third of the resamples have SD 0 (|T*| infinite), the quantile is infinite and the
    # interval is Hall's (here, zero skewness, Student's t with 2 df); n_boot = 0 gives Hall's everywhere
    data = comparisons(["a"] * 3, ["b"] * 3, ["A"] * 3, progress_a=[1.0, 0.5, 0.0], progress_b=[0.2, 0.3, 0.4])
    fit = fit_prog(data)
    assert fit.boot_t is not None and np.isinf(fit.boot_t[949]).all()
    hall = fit_prog(data, n_boot=0)
    for ends, expected in zip(fit.interval(0.95), hall.interval(0.95), strict=True):
        np.testing.assert_allclose(ends, expected)
    assert fit.scores[0] + 4.302653 * fit.se[0] == pytest.approx(fit.interval(0.95)[1][0])
    with pytest.raises(StatsInputError, match="`n_boot` must be a non-negative integer"):
        fit_prog(data, n_boot=-1)


def test_coverage_of_scores_saved_intervals_by_hand() -> None:
    # three datasets, two policies; the estimand is the mean score per policy (1.0 and 0.0); policy 1
    # has no SE in the last dataset, which then counts policy 0 only
    score = np.array([[0.9, 0.2], [1.0, -0.1], [1.1, -0.1]])
    se = np.array([[0.1, 0.1], [0.1, 0.1], [0.1, np.nan]])
    low = np.array([[0.8, 0.1], [0.9, -0.2], [1.05, np.nan]])
    high = np.array([[1.0, 0.3], [1.1, 0.0], [1.2, np.nan]])
    got = coverage_of(score, se, low, high, 0.95)
    np.testing.assert_array_equal(got.hit, [[1.0, 0.0], [1.0, 1.0], [0.0, np.nan]])
    per_dataset = np.array([0.5, 1.0, 0.0])
    assert got.reps == 3 and got.coverage == pytest.approx(0.5)
    assert got.coverage_se == pytest.approx(per_dataset.std(ddof=1) / math.sqrt(3))
    np.testing.assert_allclose(got.se_ratio, [0.1 / np.std(score[:, 0], ddof=1), 0.1 / np.std(score[:, 1], ddof=1)])


def test_fits_reject_bad_input() -> None:
    data, _ = small_arena()
    with pytest.raises(StatsInputError, match="at least one comparison"):
        fit_bt(data.subset([]))
    with pytest.raises(StatsInputError, match="`l2` must be a positive number; found -1"):
        fit_davidson(data, l2=-1)
    with pytest.raises(StatsInputError, match="`k` must be positive"):
        fit_elo(data, k=0.0)
    no_progress = comparisons(["a"], ["b"], ["A"])
    with pytest.raises(StatsInputError, match="no progress scores"):
        fit_prog(no_progress)


def test_table_is_best_first_with_json_types() -> None:
    data, _ = small_arena(seed=5, m=1000)
    rows = fit_bt(data).table()
    assert [row["rank"] for row in rows] == [1, 2, 3, 4, 5]
    assert all(isinstance(row["score"], float) and isinstance(row["se"], float) for row in rows)


def test_group_summary_by_hand() -> None:
    from evalstop_ros.stats.ranking_groups import group_summary

    data = comparisons(["a", "a", "b"], ["b", "c", "c"], ["A", "tie", "B"],
                       progress_a=[1.0, 0.5, 0.2], progress_b=[0.0, 0.5, 0.9])
    rows = group_summary(data, ["x", "x", "y"])
    got = {(r.group, r.policy): (r.games, r.win_rate, r.progress_n, r.progress) for r in rows}
    assert got == {("x", "a"): (2, 0.75, 2, 0.75), ("x", "b"): (1, 0.0, 1, 0.0), ("x", "c"): (1, 0.5, 1, 0.5),
                   ("y", "b"): (1, 0.0, 1, 0.2), ("y", "c"): (1, 1.0, 1, 0.9)}
    assert all(r.win_low <= r.win_rate <= r.win_high for r in rows)
    with pytest.raises(StatsInputError, match="one group per comparison"):
        group_summary(data, ["x"])
