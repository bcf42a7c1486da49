"""Global policy rankings from pairwise A/B comparisons (seed 001, RoboArena, Sec. 3.2, App. B.5).

The data are :class:`Comparisons`: in comparison ``n`` policy ``i_n`` (run under label A) meets
policy ``j_n`` (label B) and the evaluator reports ``y_n`` in {0, 1, 2} (B preferred, tie, A
preferred; seed 001 App. B.1), optionally with progress scores in [0, 1] for both and a task
instruction.  Every model returns a :class:`Ranking`: one score per policy, its standard error and
the rank.  The baselines of App. B.5 and the paired-progress model (issue 20) live here; the task-aware model of Sec. 3.2 / App. B is in
:mod:`.ranking_task`, the rank-quality metrics and the simulator in :mod:`.ranking_eval`.

Identifiability (documented per model, tested):

* ``bt``, ``davidson``: the likelihood depends on ``theta`` only through differences; the L2
  penalty makes the optimum unique and, because the likelihood gradient sums to zero over
  policies, the penalised optimum satisfies ``sum(theta) = 0`` exactly.
* ``elo``: the updates are zero-sum, so starting from 0 keeps ``sum(theta) = 0``.
* ``prog``: absolute scale (mean progress in [0, 1]); nothing to fix.
* ``paired``: differences identify ``mu`` up to a common shift; scores are centred (sum 0).

Intervals (issue 20): :meth:`Ranking.interval` at any level; every model's SE is checked by
simulation to cover at the stated level in a hard RoboArena-like world (imbalanced pairing, ties,
flipped preferences) at 200, 1000 and 5000 comparisons (``test/stats/test_ranking_coverage.py``,
``bench/ranking_coverage.py``, docs/ranking.md).  BT, Davidson and PAIRED use a small-sample
corrected sandwich with Student-t quantiles (:func:`_standard_errors`), Elo an online bootstrap.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.stats import norm as _NORMAL
from scipy.stats import t as _STUDENT

from .errors import StatsInputError
from .intervals import mixture_confidence_sequence

__all__ = [
    "PREFERENCES",
    "Comparisons",
    "Ranking",
    "comparisons",
    "fit_bt",
    "fit_davidson",
    "fit_elo",
    "fit_paired_progress",
    "fit_prog",
    "GroupRate",
    "group_summary",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
#: Preference labels and their outcome code y (seed 001 App. B.1: 0 = loss, 1 = tie, 2 = win of A).
PREFERENCES = {"B": 0, "tie": 1, "A": 2}
#: How BT, Davidson and PAIRED obtain their SE (:func:`_standard_errors`).
SANDWICH_METHOD = "HC2 sandwich, Student t with Bell-McCaffrey df"
#: Elo's chess K-factor of 32 points on the 400/ln(10) scale, in natural log-odds units.
ELO_K = 32.0 * np.log(10.0) / 400.0


@dataclasses.dataclass(frozen=True)
class Comparisons:
    """Pairwise A/B outcomes over a fixed pool of policies.

    Attributes
    ----------
    policies : tuple of str
        The pool; ``i`` and ``j`` index it.
    i, j : int arrays, shape (M,)
        Policy under label A and under label B in each comparison (never equal).
    outcome : int array, shape (M,)
        ``y`` in {0, 1, 2}: B preferred, tie, A preferred.
    progress_a, progress_b : float arrays, shape (M,)
        Progress of A and B in [0, 1] (the paper's 0-100 score / 100), NaN where not recorded.
    tasks : tuple of str
        The task instruction of each comparison (``""`` where not recorded).
    """

    policies: tuple[str, ...]
    i: IntArray
    j: IntArray
    outcome: IntArray
    progress_a: FloatArray
    progress_b: FloatArray
    tasks: tuple[str, ...]

    @property
    def n_policies(self) -> int:
        """Size of the pool."""
        return len(self.policies)

    def __len__(self) -> int:
        return int(self.i.size)

    def subset(self, index: ArrayLike) -> Comparisons:
        """The comparisons at ``index`` (same pool), e.g. a bootstrap resample or a prefix."""
        rows = np.asarray(index, dtype=np.int64)
        return Comparisons(
            self.policies, self.i[rows], self.j[rows], self.outcome[rows], self.progress_a[rows],
            self.progress_b[rows], tuple(self.tasks[k] for k in rows),
        )

    def win_matrix(self) -> tuple[FloatArray, IntArray]:
        """``(wins, games)``: ``wins[p, q]`` counts p preferred over q (ties count 1/2 to each).

        ``games[p, q]`` counts comparisons of p with q in either role; win rate = wins / games.
        """
        n = self.n_policies
        wins = np.zeros((n, n))
        games = np.zeros((n, n), dtype=np.int64)
        score_a = self.outcome / 2.0
        np.add.at(wins, (self.i, self.j), score_a)
        np.add.at(wins, (self.j, self.i), 1.0 - score_a)
        np.add.at(games, (self.i, self.j), 1)
        np.add.at(games, (self.j, self.i), 1)
        return wins, games


def comparisons(
    policy_a: Sequence[str],
    policy_b: Sequence[str],
    preference: Sequence[str],
    *,
    progress_a: ArrayLike | None = None,
    progress_b: ArrayLike | None = None,
    tasks: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
) -> Comparisons:
    """Build :class:`Comparisons` from policy names and preference labels ``A``/``B``/``tie``.

    ``policies`` fixes the pool and its order (default: sorted names seen).  Progress is in [0, 1]
    (NaN = not recorded).  Every bad value raises :class:`StatsInputError` naming the 1-based row.

    Examples
    --------
    >>> data = comparisons(["pi0", "pi0"], ["bin", "fast"], ["A", "tie"])
    >>> data.policies, data.outcome.tolist()
    (('bin', 'fast', 'pi0'), [2, 1])
    """
    m = len(policy_a)
    if len(policy_b) != m or len(preference) != m:
        raise StatsInputError(
            f"`policy_a`, `policy_b` and `preference` must have one entry per comparison; found "
            f"{m}, {len(policy_b)} and {len(preference)}"
        )
    pool = tuple(sorted(set(policy_a) | set(policy_b))) if policies is None else tuple(policies)
    if len(set(pool)) != len(pool):
        raise StatsInputError(f"`policies` must be distinct; found {pool!r}")
    index = {name: k for k, name in enumerate(pool)}
    i = np.empty(m, dtype=np.int64)
    j = np.empty(m, dtype=np.int64)
    y = np.empty(m, dtype=np.int64)
    for row, (a, b, pref) in enumerate(zip(policy_a, policy_b, preference, strict=True), start=1):
        for name in (a, b):
            if name not in index:
                raise StatsInputError(f"policy {name!r} at comparison {row} is not in `policies` {pool!r}")
        if a == b:
            raise StatsInputError(f"comparison {row} pits policy {a!r} against itself")
        if pref not in PREFERENCES:
            raise StatsInputError(
                f"`preference` must be one of {tuple(PREFERENCES)}; found {pref!r} at comparison {row}"
            )
        i[row - 1], j[row - 1], y[row - 1] = index[a], index[b], PREFERENCES[pref]
    return Comparisons(
        pool, i, j, y, _progress(progress_a, m, "progress_a"), _progress(progress_b, m, "progress_b"),
        tuple(tasks) if tasks is not None else ("",) * m,
    )


def _progress(values: ArrayLike | None, m: int, name: str) -> FloatArray:
    if values is None:
        return np.full(m, np.nan)
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (m,):
        raise StatsInputError(f"`{name}` must have one value per comparison ({m}); found shape {array.shape}")
    bad = ~np.isnan(array) & ((array < 0.0) | (array > 1.0))
    if bad.any():
        row = int(np.argmax(bad))
        raise StatsInputError(f"`{name}` must lie in [0, 1]; found {float(array[row])!r} at comparison {row + 1}")
    return array


@dataclasses.dataclass(frozen=True)
class Ranking:
    """A fitted ranking.

    Attributes
    ----------
    model : str
        ``bt``, ``davidson``, ``elo``, ``prog``, ``paired`` or ``task``.
    policies : tuple of str
        The pool, in input order.
    scores : float array
        One score per policy (higher is better): log-ability for ``bt``/``davidson``/``elo``/
        ``task``, mean progress in [0, 1] for ``prog``.
    se : float array
        Standard error of each score (NaN where undefined, e.g. a policy never compared).
    params : dict
        Model-specific fitted quantities (e.g. the Davidson tie parameter).
    se_method : str
        How ``se`` was obtained (printed beside the intervals).
    df : float array, optional
        Degrees of freedom of a Student-t interval per policy (PROG's ``N_p - 1``; BT's, Davidson's
        and PAIRED's Bell-McCaffrey df, :func:`_standard_errors`); ``None`` = normal.
    calibrated : bool
        Whether ``score +- z se`` has been shown by simulation to cover at the stated level
        (issue 20; ``bench/ranking_coverage.py``, ``test/stats/test_ranking_coverage.py``).  The
        task model's conditional-information SE (``n_boot = 0``) is not.
    """

    model: str
    policies: tuple[str, ...]
    scores: FloatArray
    se: FloatArray
    params: dict[str, float] = dataclasses.field(default_factory=dict)
    se_method: str = "sandwich (robust) information"
    calibrated: bool = True
    df: FloatArray | None = None

    def interval(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Intervals ``score -+ z se`` at ``level`` (NaN where the SE is undefined).

        ``z`` is the normal quantile, or Student's t with ``df`` degrees of freedom where given.

        >>> r = Ranking("bt", ("a", "b"), np.array([0.5, -0.5]), np.array([0.1, 0.2]))
        >>> [round(float(x), 3) for x in r.interval(0.95)[0]]
        [0.304, -0.892]
        """
        if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
            raise StatsInputError(f"`level` must lie in (0, 1); found {level!r}")
        z = _NORMAL.ppf(0.5 + level / 2.0) if self.df is None else _STUDENT.ppf(0.5 + level / 2.0, self.df)
        return self.scores - z * self.se, self.scores + z * self.se

    @property
    def ranks(self) -> IntArray:
        """Rank of each policy, 1 = best (ties in score share the better rank order by input)."""
        order = np.argsort(-self.scores, kind="stable")
        ranks = np.empty(order.size, dtype=np.int64)
        ranks[order] = np.arange(1, order.size + 1)
        return ranks

    def table(self) -> list[dict[str, float | int | str | None]]:
        """``[{"policy", "score", "se", "rank"}, ...]`` best first (the ``--json`` layout)."""
        rows: list[dict[str, float | int | str | None]] = [
            {"policy": name, "score": float(score), "se": None if np.isnan(se) else float(se), "rank": int(rank)}
            for name, score, se, rank in zip(self.policies, self.scores, self.se, self.ranks, strict=True)
        ]
        return sorted(rows, key=lambda row: int(row["rank"] or 0))


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


class _Fit(NamedTuple):
    """Per-comparison quantities at the optimum, for :func:`_standard_errors`."""

    scores: FloatArray  # score of each comparison in every parameter, shape (M, k)
    residual: FloatArray  # dL/dd per comparison, shape (M,)
    weight: FloatArray  # -d2L/dd2 per comparison (the GLM working weight), shape (M,)


def _newton(
    data: Comparisons, l2: float, n_extra: int, terms: Callable[[FloatArray, FloatArray], _Terms],
    *, tol: float = 1e-10, max_iter: int = 100,
) -> tuple[FloatArray, FloatArray, _Fit]:
    """Maximise ``loglik(theta, extra) - l2/2 |theta|^2`` by damped Newton with a full Hessian.

    Returns the optimum ``[theta, extra]``, the observed information ``H`` (negative Hessian) of
    the penalised objective there and the per-comparison scores and weights at the optimum
    (:class:`_Fit`, for the sandwich of :func:`_standard_errors`).  Backtracking keeps every step
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
    return x, info, _Fit(scores, got.grad_d, got.info_d)


def _standard_errors(
    info: FloatArray, fit: _Fit, data_i: IntArray, data_j: IntArray, n: int, seen: NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray]:
    """SE and degrees of freedom of the centred scores: HC2 sandwich with Bell-McCaffrey df.

    The sandwich ``S = H^-1 K H^-1`` (Huber 1967; White 1982) stays right when the model is not:
    ties scored as half a win (BT has less variance than a Bernoulli), flipped preferences, task
    effects (issue 20).  ``H`` is the observed information of the penalised objective, ``P`` the
    centring projection, SE ``= sqrt(diag(P S P))``.  Plain, ``K = sum_n s_n s_n^T`` is biased
    low in small samples: a rarely paired policy's few comparisons have high leverage and their
    residuals are shrunk towards its fit (0.90-0.92 coverage at 200 comparisons in the hard world
    of docs/ranking.md).  Two small-sample corrections, both from the linear-model literature and
    carried to the GLM by its working weights (the IRLS linearisation at the optimum; Pregibon
    1981's GLM hat matrix, Kauermann & Carroll 2001, JASA 96:1387, Sec. 3):

    * **HC2** (MacKinnon & White 1985, J. Econometrics 29:305): ``K = sum_n s_n s_n^T / (1 - h_n)``
      with the leverage ``h_n = w_n x_n^T H^-1 x_n`` of comparison ``n`` (``x_n = e_i - e_j``,
      ``w_n = -d2L/dd2``), unbiased under homoscedasticity in the linear model.
    * **Bell-McCaffrey degrees of freedom** (Bell & McCaffrey 2002, Survey Methodology 28:169;
      recommended with HC2 by Imbens & Kolesar 2016, Rev. Econ. Stat. 98:701, Sec. III): the
      HC2 variance of contrast ``c`` is ``sum_n a_n^2 e_n^2`` in the working residuals ``e = M eps``
      (``M = I - hat``); Satterthwaite's ``df = tr(M A M)^2 / tr((M A M)^2)`` with ``A = diag(a^2)``,
      which is small exactly when the contrast rests on a few high-leverage comparisons, and the
      interval uses Student's t with it.  ``tr((MAM)^2) = sum_n a_n^4 (1 - 2 h_n) + tr(H^-1 S H^-1 S)``
      with ``S = sum_n a_n^2 w_n x_n x_n^T``, so no M x M matrix is formed: O(N M + N^4).

    The extras (Davidson's tie parameter) enter the sandwich but not the leverage or the df (one
    parameter over all comparisons: its leverage is ~1/M each).
    """
    inverse = np.linalg.pinv(info)
    theta_inv = inverse[:n, :n]
    x_inv_x = theta_inv[data_i, data_i] + theta_inv[data_j, data_j] - 2.0 * theta_inv[data_i, data_j]
    leverage = np.clip(fit.weight * x_inv_x, 0.0, 1.0 - 1e-9)
    scaled = fit.scores / np.sqrt(1.0 - leverage)[:, None]
    cov = (inverse @ (scaled.T @ scaled) @ inverse)[:n, :n]
    centre = np.eye(n) - 1.0 / n
    se = np.sqrt(np.clip(np.diag(centre @ cov @ centre), 0.0, None))
    # Bell-McCaffrey df of every centred contrast at once (columns = policies)
    g = theta_inv @ centre  # H^-1 c_p
    u2 = (g[data_i] - g[data_j]) ** 2  # (x_n^T H^-1 c_p)^2, shape (M, N)
    a2 = u2 * (fit.weight / (1.0 - leverage))[:, None]
    first = (u2 * fit.weight[:, None]).sum(axis=0)  # tr(M A M) = sum a_n^2 (1 - h_n)
    second = (a2**2 * (1.0 - 2.0 * leverage)[:, None]).sum(axis=0)
    m = data_i.size  # S_p = D^T diag(a_p^2 w) D for every p at once: a sparse (N^2 x M) map of the cells
    cells = np.r_[data_i * n + data_i, data_j * n + data_j, data_i * n + data_j, data_j * n + data_i]
    signs = np.r_[np.ones(2 * m), -np.ones(2 * m)]
    assemble = sparse.csr_matrix((signs, (cells, np.tile(np.arange(m), 4))), shape=(n * n, m))
    s_all = np.asarray(assemble @ (a2 * fit.weight[:, None])).reshape(n, n, n)  # [row, col, p]
    product = np.einsum("ij,jkp->ikp", theta_inv, s_all)
    second += np.einsum("ikp,kip->p", product, product)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.clip(first**2 / second, 1.0, None)
    return np.where(seen, se, np.nan), np.where(seen & np.isfinite(df), df, np.nan)


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
    Bell-McCaffrey degrees of freedom (:func:`_standard_errors`).

    Examples
    --------
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
    se, df = _standard_errors(info, fit, data.i, data.j, data.n_policies, _seen(data))
    return Ranking("bt", data.policies, x, se, se_method=SANDWICH_METHOD, df=df)


def fit_davidson(data: Comparisons, *, l2: float = 1e-2) -> Ranking:
    """Bradley-Terry with Davidson ties, the released RoboArena leaderboard's model (seed 001 Sec. 3.2 [63]).

    .. math:: P(i \\succ j) \\propto e^{\\theta_i}, \\quad P(j \\succ i) \\propto e^{\\theta_j}, \\quad
              P(\\text{tie}) \\propto \\nu\\, e^{(\\theta_i + \\theta_j)/2}

    ``nu = exp(kappa)`` is fitted jointly with ``theta`` (unpenalised); ``params["nu_tie"]``.
    Identifiability: ``sum(theta) = 0`` (implied by the L2 penalty on ``theta``).  SE: HC2 sandwich of the
    observed information of the joint penalised likelihood, projected onto the centred scores, with
    Student-t intervals on Bell-McCaffrey degrees of freedom (:func:`_standard_errors`).
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
    se, df = _standard_errors(info, fit, data.i, data.j, n, _seen(data))
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
    (issue 20); a likely cause is that a comparison drawn twice is applied twice in a row, the
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


def fit_prog(data: Comparisons) -> Ranking:
    """Progress averaging, PROG (seed 001 App. B.5): mean progress over every rollout of a policy.

    .. math:: \\bar s_p = \\frac{1}{N_p} \\sum_{n: i_n = p \\text{ or } j_n = p} s_n^{(p)}

    Rollouts without a recorded progress are skipped.  SE: ``sd / sqrt(N_p)``, intervals from
    Student's t with ``N_p - 1`` degrees of freedom (a rarely paired policy has few rollouts).  No
    identifiability constraint is needed (absolute scale in [0, 1]).
    """
    _check_nonempty(data)
    who = np.r_[data.i, data.j]
    score = np.r_[data.progress_a, data.progress_b]
    keep = ~np.isnan(score)
    if not keep.any():
        raise StatsInputError("`data` has no progress scores; PROG needs progress_a/progress_b")
    n = data.n_policies
    count = np.bincount(who[keep], minlength=n).astype(float)
    total = np.bincount(who[keep], weights=score[keep], minlength=n)
    square = np.bincount(who[keep], weights=score[keep] ** 2, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        var = (square - count * mean**2) / (count - 1.0)
        se = np.sqrt(np.clip(var, 0.0, None) / count)
    return Ranking("prog", data.policies, mean, np.where(count > 1, se, np.nan), se_method="sd / sqrt(rollouts), Student t",
                   df=np.where(count > 1, count - 1.0, np.nan))


def fit_paired_progress(data: Comparisons, *, l2: float = 1e-6) -> Ranking:
    """Paired progress, PAIRED: least squares on the within-pair progress differences (issue 20).

    .. math:: s^A_n - s^B_n = \\mu_{i_n} - \\mu_{j_n} + \\varepsilon_n, \\qquad
              \\hat\\mu = (D^T D + \\lambda I)^{-1} D^T (s^A - s^B)

    The two rollouts of a pair share the scene and the evaluator (seed 001 Sec. 3.1), so an
    evaluator's calibration offset cancels from the difference: unlike PROG, which averages raw
    scores, it is not moved by harsh or lenient graders who see some policies more than others.
    Scores are ``mu`` centred (progress relative to the pool's average, sum 0: a data-dependent
    offset such as the mean progress would add variance that no policy's SE carries).  Comparisons without both scores are skipped.  SE: the HC2 sandwich (heteroscedasticity-consistent)
    covariance of the centred ``mu`` with Student-t intervals on Bell-McCaffrey degrees of freedom
    (:func:`_standard_errors`); a policy never in a scored pair has NaN.
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
    se, df = _standard_errors(info, _Fit(design * residual[:, None], residual, np.ones(rows.size)), i, j, n, seen)
    return Ranking("paired", data.policies, mu - mu.mean(), se, se_method=SANDWICH_METHOD, df=df)


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))


def _log_sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(-np.logaddexp(0.0, -x))


@dataclasses.dataclass(frozen=True)
class GroupRate:
    """One policy on one group of comparisons (e.g. a task category; seed 001 Fig. 9).

    ``win_rate`` counts a tie as half a win; ``progress`` is the mean progress of the policy's
    rollouts in the group.  The intervals are anytime-valid 95 % confidence sequences
    (:func:`~.intervals.mixture_confidence_sequence`, made tightest at the group's size), so
    they stay valid however long the campaign ran; NaN where there is no data.
    """

    group: str
    policy: str
    games: int
    win_rate: float
    win_low: float
    win_high: float
    progress_n: int
    progress: float
    progress_low: float
    progress_high: float


def group_summary(data: Comparisons, groups: Sequence[str], *, alpha: float = 0.05) -> list[GroupRate]:
    """Win rate and progress of every policy within every group of comparisons.

    ``groups`` names the group of each comparison (e.g. its task category).  Rows are ordered by
    group name, then by policy in pool order; policies without a game in a group are left out.
    """
    if len(groups) != len(data):
        raise StatsInputError(f"`groups` must name one group per comparison ({len(data)}); found {len(groups)}")
    labels = np.asarray(groups, dtype=object)
    rows = []
    for group in sorted(set(groups)):
        where = labels == group
        for p, name in enumerate(data.policies):
            as_a, as_b = where & (data.i == p), where & (data.j == p)
            wins = np.r_[data.outcome[as_a] / 2.0, 1.0 - data.outcome[as_b] / 2.0]
            if wins.size == 0:
                continue
            progress = np.r_[data.progress_a[as_a], data.progress_b[as_b]]
            progress = progress[~np.isnan(progress)]
            win = _last_band(wins, alpha)
            prog = _last_band(progress, alpha)
            rows.append(GroupRate(group, name, int(wins.size), *win, int(progress.size), *prog))
    return rows


def _last_band(values: FloatArray, alpha: float) -> tuple[float, float, float]:
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean, low, high = mixture_confidence_sequence(values, alpha=alpha, tightest_at=int(values.size))
    return float(mean[-1]), float(low[-1]), float(high[-1])
