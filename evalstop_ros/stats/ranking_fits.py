"""The ranking models fitted to A/B comparisons: the baselines of seed 001 App. B.5 and the paired-progress model.

Identifiability and standard errors per model: docs/statistics.md and docs/ranking.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .errors import StatsInputError
from .ranking import Comparisons, FloatArray, IntArray, Ranking
from .ranking_sandwich import SANDWICH_METHOD, WorkingFit, sandwich_standard_errors

__all__ = ["ELO_K", "fit_bt", "fit_davidson", "fit_elo", "fit_paired_progress", "fit_prog"]

#: Elo's chess K-factor of 32 points on the 400/ln(10) scale, in natural log-odds units.
ELO_K = 32.0 * np.log(10.0) / 400.0


def _check_l2(l2: float) -> float:
    if not (isinstance(l2, (int, float)) and l2 > 0.0 and np.isfinite(l2)):
        raise StatsInputError(f"`l2` must be a positive number; found {l2!r}")
    return float(l2)


def _check_nonempty(data: Comparisons) -> None:
    if len(data) == 0:
        raise StatsInputError("`data` must hold at least one comparison; found none")


class _Terms(NamedTuple):
    """Log-likelihood of every comparison and its derivatives in ``d = theta_i - theta_j`` and the extras."""

    loglik: float
    grad_d: FloatArray  # dL/dd per comparison, shape (M,)
    info_d: FloatArray  # -d2L/dd2 per comparison, shape (M,)
    grad_e: FloatArray  # dL/de per comparison, shape (M, E)
    info_e: FloatArray  # -d2L/de2, shape (E, E)
    cross: FloatArray  # -d2L/(dd de) per comparison, shape (M, E)


def _newton(
    data: Comparisons, l2: float, n_extra: int, terms: Callable[[FloatArray, FloatArray], _Terms],
    *, tol: float = 1e-10, max_iter: int = 100,
) -> tuple[FloatArray, FloatArray, WorkingFit]:
    """Maximise ``loglik(theta, extra) - l2/2 |theta|^2`` by damped Newton with a full Hessian.

    Returns the optimum ``[theta, extra]``, the observed information ``H`` (negative Hessian) of
    the penalised objective there and the per-comparison scores and weights at the optimum
    (:class:`~.ranking_sandwich.WorkingFit`, for the sandwich of :func:`~.ranking_sandwich.sandwich_standard_errors`).  Backtracking keeps every step
    an ascent step.
    """
    n = data.n_policies
    k = n + n_extra
    i, j = data.i, data.j
    cell_ij, cell_ii, cell_jj = i * n + j, i * n + i, j * n + j
    penalty = np.r_[np.full(n, l2), np.zeros(n_extra)]

    def spread(per_comparison: FloatArray) -> FloatArray:
        """``D^T v`` for the comparison matrix ``D`` (row n: +1 at i_n, -1 at j_n), in O(M)."""
        return np.asarray(np.bincount(i, per_comparison, n) - np.bincount(j, per_comparison, n), dtype=np.float64)

    def evaluate(point: FloatArray) -> tuple[float, FloatArray, FloatArray]:
        theta, extra = point[:n], point[n:]
        got = terms(theta[i] - theta[j], extra)
        value = got.loglik - 0.5 * l2 * float(theta @ theta)
        grad = np.r_[spread(got.grad_d), got.grad_e.sum(axis=0)] - penalty * point
        info = np.zeros((k, k))
        w = got.info_d  # D^T diag(w) D, assembled from the M comparisons
        block = (np.bincount(cell_ii, w, n * n) + np.bincount(cell_jj, w, n * n)
                 - np.bincount(cell_ij, w, n * n)).reshape(n, n)
        info[:n, :n] = block - np.bincount(cell_ij, w, n * n).reshape(n, n).T
        info[n:, n:] = got.info_e
        for e in range(n_extra):
            info[:n, n + e] = info[n + e, :n] = spread(got.cross[:, e])
        return value, grad, info + np.diag(penalty)

    x = np.zeros(k)
    value, grad, info = evaluate(x)
    for _ in range(max_iter):
        step = np.linalg.lstsq(info, grad, rcond=None)[0]
        scale = 1.0
        while True:
            trial = x + scale * step
            new_value, new_grad, new_info = evaluate(trial)
            if new_value >= value - 1e-12 or scale < 1e-8:
                break
            scale /= 2.0
        x, value, grad, info = trial, new_value, new_grad, new_info
        if float(np.max(np.abs(scale * step))) < tol:
            break
    got = terms(x[:n][i] - x[:n][j], x[n:])
    scores = np.zeros((len(data), k))  # per-comparison score: grad_d (e_i - e_j), then the extras
    rows = np.arange(len(data))
    scores[rows, i] += got.grad_d
    scores[rows, j] -= got.grad_d
    scores[:, n:] = got.grad_e
    return x, info, WorkingFit(scores, got.grad_d, got.info_d)


def _seen(data: Comparisons) -> NDArray[np.bool_]:
    return np.bincount(np.r_[data.i, data.j], minlength=data.n_policies) > 0


def fit_bt(data: Comparisons, *, l2: float = 1e-2) -> Ranking:
    """Bradley-Terry maximum likelihood with an L2 penalty (seed 001 Sec. 3.2, App. B.5).

    .. math:: P(i \\succ j) = \\sigma(\\theta_i - \\theta_j), \\qquad
              \\max_\\theta \\sum_n w_n \\log\\sigma(d_n) + (1-w_n)\\log\\sigma(-d_n) - \\tfrac{\\lambda}{2}\\lVert\\theta\\rVert^2

    with ``w_n = y_n / 2`` (a tie is half a win and half a loss, App. B.5; the paper's update
    writes ``y_n`` where the 0/1 residual needs ``y_n/2``).  Solved by Newton's method rather than
    the paper's gradient ascent: the same optimum, reached in a handful of steps.  Identifiability:
    ``sum(theta) = 0`` (implied by the penalty).  SE: HC2 sandwich of the observed information of the
    penalised likelihood, projected onto the centred scores, with Student-t intervals on
    Bell-McCaffrey degrees of freedom (:func:`~.ranking_sandwich.sandwich_standard_errors`).

    Examples
    --------
    >>> from evalstop_ros.stats.ranking import comparisons
    >>> data = comparisons(["a", "a", "b"], ["b", "c", "c"], ["A", "A", "tie"])
    >>> [row["policy"] for row in fit_bt(data).table()]
    ['a', 'b', 'c']
    """
    _check_nonempty(data)
    l2 = _check_l2(l2)
    w = data.outcome / 2.0

    def terms(d: FloatArray, _extra: FloatArray) -> _Terms:
        p = _sigmoid(d)
        loglik = float(np.sum(w * _log_sigmoid(d) + (1.0 - w) * _log_sigmoid(-d)))
        return _Terms(loglik, w - p, p * (1.0 - p), np.zeros((d.size, 0)), np.zeros((0, 0)), np.zeros((d.size, 0)))

    x, info, fit = _newton(data, l2, 0, terms)
    se, df = sandwich_standard_errors(info, fit, data.i, data.j, data.n_policies, _seen(data))
    return Ranking("bt", data.policies, x, se, se_method=SANDWICH_METHOD, df=df)


def fit_davidson(data: Comparisons, *, l2: float = 1e-2) -> Ranking:
    """Bradley-Terry with Davidson ties, the released RoboArena leaderboard's model (seed 001 Sec. 3.2 [63]).

    .. math:: P(i \\succ j) \\propto e^{\\theta_i}, \\quad P(j \\succ i) \\propto e^{\\theta_j}, \\quad
              P(\\text{tie}) \\propto \\nu\\, e^{(\\theta_i + \\theta_j)/2}

    ``nu = exp(kappa)`` is fitted jointly with ``theta`` (unpenalised); ``params["nu_tie"]``.
    Identifiability: ``sum(theta) = 0`` (implied by the L2 penalty on ``theta``).  SE: HC2 sandwich of the
    observed information of the joint penalised likelihood, projected onto the centred scores, with
    Student-t intervals on Bell-McCaffrey degrees of freedom (:func:`~.ranking_sandwich.sandwich_standard_errors`).
    """
    _check_nonempty(data)
    l2 = _check_l2(l2)
    y = data.outcome
    win, tie, loss = (y == 2).astype(float), (y == 1).astype(float), (y == 0).astype(float)

    def terms(d: FloatArray, extra: FloatArray) -> _Terms:
        u, kappa = d / 2.0, float(extra[0])
        top = np.maximum(np.abs(u), kappa)  # log-sum-exp guard
        ea, eb, et = np.exp(u - top), np.exp(-u - top), np.exp(kappa - top)
        z = ea + eb + et
        pa, pb, pt = ea / z, eb / z, et / z
        loglik = float(np.sum(win * u - loss * u + tie * kappa - top - np.log(z)))
        # derivatives in u = d/2: d/dd = (d/du)/2 and d2/dd2 = (d2/du2)/4
        score_u = win - loss - (pa - pb)
        info_uu = (pa + pb) - (pa - pb) ** 2
        info_uk = -(pa - pb) * pt
        return _Terms(
            loglik, score_u / 2.0, info_uu / 4.0, (tie - pt)[:, None],
            np.array([[np.sum(pt * (1.0 - pt))]]), (info_uk / 2.0)[:, None],
        )

    x, info, fit = _newton(data, l2, 1, terms)
    n = data.n_policies
    se, df = sandwich_standard_errors(info, fit, data.i, data.j, n, _seen(data))
    return Ranking("davidson", data.policies, x[:n], se, {"nu_tie": float(np.exp(x[n]))},
                   se_method=SANDWICH_METHOD, df=df)


def fit_elo(data: Comparisons, *, k: float = ELO_K, n_boot: int = 200, seed: int = 0) -> Ranking:
    """Elo: one pass over the comparisons in recorded order (seed 001 App. B.5).

    .. math:: \\theta_A \\mathrel{+}= K(y_{AB} - \\sigma(\\theta_A - \\theta_B)), \\quad
              \\theta_B \\mathrel{-}= K(y_{AB} - \\sigma(\\theta_A - \\theta_B))

    with ``y_AB`` = 1, 0.5, 0 for A preferred, tie, B preferred and ``k`` in natural log-odds
    units (default: chess's K = 32 on the 400/ln 10 scale; the paper gives no value).
    Identifiability: the updates are zero-sum from 0, so ``sum(theta) = 0``.

    SE: Elo has no likelihood; it is stochastic gradient ascent on the BT log-likelihood with a
    constant step ``K``, one comparison per step.  The SE is that of the **online (perturbed)
    bootstrap for SGD** (Fang, Xu & Yang 2018, "Online bootstrap confidence intervals for the
    stochastic gradient descent estimator", JMLR 19(78), Sec. 2): ``n_boot`` further passes in
    the recorded order in which every step is multiplied by an independent weight
    ``W ~ Exp(1)`` (mean 1, variance 1; Rubin 1981's Bayesian-bootstrap weights), the SE being
    the SD of ``theta`` over the passes (with ``seed``).  Covers 0.95-0.96 at 95 % in the hard
    and the planted worlds at 200-5000 comparisons (SE/SD 1.0-1.1; docs/ranking.md).  The
    resampling bootstrap used before (resample comparisons, keep their order) delivered 0.93-0.94
    (docs/ranking.md); a likely cause is that a comparison drawn twice is applied twice in a row, the
    second step smaller than the first, so the resamples vary less than new data would.  The
    passes run side by side in NumPy, one vector step per comparison: 200 passes over 5000
    comparisons take about 0.3 s, like the resampling bootstrap's 200 plain passes.
    """
    _check_nonempty(data)
    if not k > 0.0:
        raise StatsInputError(f"`k` must be positive; found {k!r}")
    score_a = data.outcome / 2.0
    theta = _elo_pass(data.i, data.j, score_a, data.n_policies, k)
    if n_boot > 1:
        passes = _elo_perturbed(data.i, data.j, score_a, data.n_policies, k, n_boot, np.random.default_rng(seed))
        se = np.where(_seen(data), passes.std(axis=0, ddof=1), np.nan)
    else:
        se = np.full(data.n_policies, np.nan)
    return Ranking("elo", data.policies, theta, se, {"k": float(k)},
                   se_method=f"online bootstrap ({n_boot} passes with Exp(1) step weights)", calibrated=n_boot > 1)


def _elo_pass(i: IntArray, j: IntArray, score_a: FloatArray, n: int, k: float) -> FloatArray:
    theta = [0.0] * n  # plain floats: the loop is sequential by nature
    for a, b, s in zip(i.tolist(), j.tolist(), score_a.tolist(), strict=True):
        delta = k * (s - 1.0 / (1.0 + math.exp(theta[b] - theta[a])))
        theta[a] += delta
        theta[b] -= delta
    return np.asarray(theta)


def _elo_perturbed(
    i: IntArray, j: IntArray, score_a: FloatArray, n: int, k: float, n_boot: int, rng: np.random.Generator,
) -> FloatArray:
    """``n_boot`` Elo passes side by side, each step scaled by its own ``Exp(1)`` weight; shape (n_boot, n)."""
    theta = np.zeros((n, n_boot))  # one row per policy: the updates touch two contiguous rows
    block = 1024
    for start in range(0, i.size, block):
        weights = k * rng.standard_exponential((min(block, i.size - start), n_boot))
        rows = zip(i[start:start + block].tolist(), j[start:start + block].tolist(),
                   score_a[start:start + block].tolist(), weights, strict=True)
        for a, b, s, w in rows:
            delta = w * (s - 1.0 / (1.0 + np.exp(theta[b] - theta[a])))
            theta[a] += delta
            theta[b] -= delta
    return np.asarray(theta.T)


def fit_prog(data: Comparisons, *, n_boot: int = 999, seed: int = 0) -> Ranking:
    """Progress averaging, PROG (seed 001 App. B.5): mean progress over every rollout of a policy.

    .. math:: \\bar s_p = \\frac{1}{N_p} \\sum_{n: i_n = p \\text{ or } j_n = p} s_n^{(p)}

    Rollouts without a recorded progress are skipped.  No identifiability constraint is needed
    (absolute scale in [0, 1]).  SE: ``sd / sqrt(N_p)``.

    Interval: the **symmetric bootstrap-t** (:meth:`Ranking.interval`): each policy's rollouts
    are resampled ``n_boot`` times (with ``seed``), ``|T*| = |mean* - mean| / se*`` recorded
    (field ``boot_t``) and the interval is ``mean -+ q se`` with ``q`` their ``level`` quantile
    (Hall 1988, Ann. Stat. 16:927, Sec. 3; Hall 1992, "The Bootstrap and Edgeworth Expansion",
    Sec. 3.6; Efron & Tibshirani 1993, Ch. 12).  Progress is bounded and far from normal: a strong
    policy's scores pile up at 1 with a tail of failures (skewness about -1.2 in the hard world of
    docs/ranking.md), and the studentised mean's two-sided coverage error, ``O(n^-1)``, has a term
    ``-g^2 (z^4 + 2 z^2 - 3) / 18`` (Hall 1992, Sec. 2.6) that made the symmetric t interval
    cover 0.90 for the best policy with its ~8 rollouts at 200 comparisons (0.94 over all).
    Hall's skewness-corrected t (1992, JRSS B 54:221; fields ``df``, ``skewness``), used before,
    balances the two tails but its two-sided error is also ``O(n^-1)``, and with the sample
    skewness plugged in it over-covered, 0.956-0.960 where progress is skewed (docs/ranking.md).
    The symmetric bootstrap-t removes the ``n^-1`` term (error ``O(n^-2)``).  Where the
    bootstrap quantile is infinite (more than ``1 - level`` of the resamples have a zero SD: two
    or three rollouts, or all alike) and with ``n_boot = 0`` the interval is Hall's.  The cost is
    ``n_boot`` draws per rollout: about 0.2 s at 5000 comparisons.
    """
    _check_nonempty(data)
    if not (isinstance(n_boot, int) and n_boot >= 0):
        raise StatsInputError(f"`n_boot` must be a non-negative integer; found {n_boot!r}")
    who = np.r_[data.i, data.j]
    score = np.r_[data.progress_a, data.progress_b]
    keep = ~np.isnan(score)
    if not keep.any():
        raise StatsInputError("`data` has no progress scores; PROG needs progress_a/progress_b")
    n = data.n_policies
    count = np.bincount(who[keep], minlength=n).astype(float)
    total = np.bincount(who[keep], weights=score[keep], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        centred = score[keep] - mean[who[keep]]
        var = np.bincount(who[keep], weights=centred**2, minlength=n) / (count - 1.0)
        third = np.bincount(who[keep], weights=centred**3, minlength=n) / count
        skewness = np.where(var > 0.0, third / var**1.5, 0.0)
        se = np.sqrt(var / count)
    boot_t = _bootstrap_t(who[keep], score[keep], mean, n, n_boot, np.random.default_rng(seed)) if n_boot else None
    method = f"symmetric bootstrap-t ({n_boot} resamples)" if n_boot else "Hall's skewness-corrected t"
    return Ranking("prog", data.policies, mean, np.where(count > 1, se, np.nan),
                   se_method=f"sd / sqrt(rollouts), {method}",
                   df=np.where(count > 1, count - 1.0, np.nan), skewness=np.where(count > 1, skewness, np.nan),
                   boot_t=boot_t)


def _bootstrap_t(
    who: IntArray, score: FloatArray, mean: FloatArray, n: int, n_boot: int, rng: np.random.Generator,
) -> FloatArray:
    """Sorted ``|T*|`` of every policy's mean over ``n_boot`` resamples of its rollouts, shape (n_boot, n).

    ``T* = (mean* - mean) / (sd* / sqrt(N_p))``; a resample with ``sd* = 0`` gives 0 when its
    mean is the sample's and infinity otherwise (the quantile is then infinite if that happens
    often: :meth:`Ranking.interval` falls back to Hall's interval); NaN for a policy with fewer
    than two rollouts.
    """
    out = np.full((n_boot, n), np.nan)
    for p in range(n):
        x = score[who == p]
        if x.size < 2:
            continue
        draws = x[rng.integers(0, x.size, (n_boot, x.size))]
        shift = np.abs(draws.mean(axis=1) - mean[p])
        spread = draws.std(axis=1, ddof=1) / math.sqrt(x.size)
        with np.errstate(invalid="ignore", divide="ignore"):  # 1e-12: a zero SD up to rounding
            out[:, p] = np.where(shift <= 1e-12, 0.0, np.where(spread <= 1e-12, np.inf, shift / spread))
    return np.sort(out, axis=0)


def fit_paired_progress(data: Comparisons, *, l2: float = 1e-6) -> Ranking:
    """Paired progress, PAIRED: least squares on the within-pair progress differences.

    .. math:: s^A_n - s^B_n = \\mu_{i_n} - \\mu_{j_n} + \\varepsilon_n, \\qquad
              \\hat\\mu = (D^T D + \\lambda I)^{-1} D^T (s^A - s^B)

    The two rollouts of a pair share the scene and the evaluator (seed 001 Sec. 3.1), so an
    evaluator's calibration offset cancels from the difference: unlike PROG, which averages raw
    scores, it is not moved by harsh or lenient graders who see some policies more than others.
    Scores are ``mu`` centred (progress relative to the pool's average, sum 0: a data-dependent
    offset such as the mean progress would add variance that no policy's SE carries).  Comparisons without both scores are skipped.  SE: the HC2 sandwich (heteroscedasticity-consistent)
    covariance of the centred ``mu`` with Student-t intervals on Bell-McCaffrey degrees of freedom
    (:func:`~.ranking_sandwich.sandwich_standard_errors`); a policy never in a scored pair has NaN.
    """
    _check_nonempty(data)
    l2 = _check_l2(l2)
    both = ~(np.isnan(data.progress_a) | np.isnan(data.progress_b))
    if not both.any():
        raise StatsInputError("`data` has no comparison with both progress scores; PAIRED needs them (bt or davidson rank "
                               "preferences alone)")
    i, j = data.i[both], data.j[both]
    diff = data.progress_a[both] - data.progress_b[both]
    n, rows = data.n_policies, np.arange(int(both.sum()))
    design = np.zeros((rows.size, n))
    design[rows, i] = 1.0
    design[rows, j] = -1.0
    info = design.T @ design + l2 * np.eye(n)
    mu = np.linalg.solve(info, design.T @ diff)
    residual = diff - design @ mu
    seen = np.bincount(np.r_[i, j], minlength=n) > 0
    se, df = sandwich_standard_errors(info, WorkingFit(design * residual[:, None], residual, np.ones(rows.size)), i, j, n, seen)
    return Ranking("paired", data.policies, mu - mu.mean(), se, se_method=SANDWICH_METHOD, df=df)


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))


def _log_sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(-np.logaddexp(0.0, -x))
