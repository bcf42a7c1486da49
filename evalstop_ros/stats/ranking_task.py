"""The task-aware Bradley-Terry model of RoboArena, fitted by EM (seed 001 Sec. 3.2 Eq. 1, App. B, Alg. 2).

Signs, identifiability and cost are in docs/statistics.md; docs/ranking.md has the study.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.special import expit

from .errors import StatsInputError
from .ranking import Comparisons, FloatArray, IntArray, Ranking

__all__ = ["TaskFit", "TaskModelOptions", "fit_task"]


@dataclasses.dataclass(frozen=True)
class TaskModelOptions:
    """Hyperparameters of the EM (defaults: seed 001 App. B.6, Table 1).

    ``n_restarts`` random initialisations are run and the highest marginal log-likelihood is kept.
    ``n_boot`` (default 50): the SE of ``theta`` is the SD of the EM's ``theta`` over ``n_boot``
    resamples of the comparisons (the whole procedure refitted from the same seeded starts, so the
    uncertainty of ``psi``, ``tau``, the buckets, and the EM's own early stopping all count), which covers at the stated level in
    hard worlds (0.951 (0.004) at 0.95 over 160 datasets, every policy within binomial noise of it;
    docs/ranking.md).  ``n_boot = 0`` keeps the cheap conditional
    information ``1 / sqrt(-d2Q/dtheta_p^2)`` at fixed responsibilities, which ignores all of that and
    covers only 0.80-0.84 there: the ranking is then marked ``calibrated = False``.  The bootstrap
    interval is Student's t with ``n_boot - 1`` df (the SD of ``n_boot`` refits is itself noisy;
    :attr:`TaskFit.ranking`), so any ``n_boot`` keeps the level; 50 rather than 100 halves the
    refits for intervals about 1 % wider on average (``t_49 c_4(50)`` against ``t_99 c_4(100)``).
    """

    n_buckets: int = 60
    em_iters: int = 60
    step_clip: float = 1.0
    step_decay: float = 0.99
    l2_theta: float = 1e-2
    l2_psi: float = 1e-2
    tol: float = 1e-4
    partial_weight: float = 0.0
    sigma_partial: float = 0.3
    n_restarts: int = 1
    n_boot: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_buckets", "em_iters", "n_restarts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StatsInputError(f"`{name}` must be a positive integer; found {value!r}")
        for name in ("step_clip", "l2_theta", "l2_psi", "tol", "sigma_partial"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise StatsInputError(f"`{name}` must be a positive number; found {value!r}")
        if not 0.0 < self.step_decay <= 1.0:
            raise StatsInputError(f"`step_decay` must lie in (0, 1]; found {self.step_decay!r}")
        if not self.partial_weight >= 0.0:
            raise StatsInputError(f"`partial_weight` must be >= 0; found {self.partial_weight!r}")
        if isinstance(self.n_boot, bool) or not isinstance(self.n_boot, int) or self.n_boot < 0 or self.n_boot == 1:
            raise StatsInputError(f"`n_boot` must be 0 (no bootstrap) or an integer >= 2; found {self.n_boot!r}")


@dataclasses.dataclass(frozen=True)
class TaskFit:
    """The fitted task-aware model (arrays indexed by policy and bucket).

    ``theta`` (N,), ``psi`` (N, T), ``tau`` (T,), ``nu`` (T,), ``nu_tie``; ``loglik`` is the
    marginal log-likelihood ``sum_n log P(y_n)`` (with the partial term when used);
    ``theta_se`` the SE of ``theta`` (``n_boot``: the bootstrap resamples behind it, 0 = the
    conditional information, not calibrated); ``iterations`` the EM iterations run.
    """

    policies: tuple[str, ...]
    theta: FloatArray
    psi: FloatArray
    tau: FloatArray
    nu: FloatArray
    nu_tie: float
    loglik: float
    theta_se: FloatArray
    iterations: int
    n_boot: int = 0

    @property
    def ranking(self) -> Ranking:
        """Policies scored by ``theta`` (Algorithm 2 returns them sorted by ``theta``).

        With the bootstrap SE the interval is Student's t with ``n_boot - 1`` degrees of freedom.
        ``theta_se`` is the SD of ``B = n_boot`` refits, a Monte Carlo estimate of the ideal
        bootstrap SE with coefficient of variation about ``sqrt((Delta + 2) / 4B)`` (``Delta`` the
        excess kurtosis of the refits; Efron & Tibshirani 1993, *An Introduction to the Bootstrap*,
        Sec. 6.4, Eq. 6.9): about 0.13 at ``B = 30``.  For normal refits ``(B - 1) se^2 / se_ideal^2``
        is chi-square with ``B - 1`` df, independent of the data's sampling error given the data, so
        ``(score - theta) / se`` is ``t_{B-1}`` and ``score -+ t_{B-1} se`` keeps the level that the
        normal quantile loses (``P(|t_29| <= 1.96) = 0.940``, ``P(|t_99| <= 1.96) = 0.947``).
        """
        if self.n_boot > 1:
            method, calibrated = f"bootstrap over comparisons ({self.n_boot} EM refits)", True
            df: FloatArray | None = np.full(self.theta.size, self.n_boot - 1.0)
        else:
            method, calibrated, df = "conditional information (ignores psi, tau, buckets: too narrow)", False, None
        return Ranking("task", self.policies, self.theta, self.theta_se, {"loglik": self.loglik},
                       se_method=method, calibrated=calibrated, df=df)

    def solve_rates(self) -> FloatArray:
        """Model solve rate of each policy averaged over the buckets, ``sum_t nu_t q_{p,t}``."""
        q = expit(self.theta[:, None] + self.psi - self.tau[None, :])
        return np.asarray(q @ self.nu)


class _Design:
    """The comparisons as distinct rows with counts, and the maps of the EM.

    Comparisons equal in ``(i, j, y)`` (and, with the App. B.4 term, in both progress scores) are
    one row with a count: every sum of App. B.2 is a count-weighted sum over rows, and a bootstrap
    resample is the same rows with other counts (:meth:`reweighted`).  ``log P(y_n | t)`` depends on
    the state only through per-policy tables (:func:`_tables`), so :attr:`rows` gathers it with
    two entries per row (four with the B.4 term; row constants apart, which cancel from the
    responsibilities).  The rows are sorted by ``(i, j, y)`` (and whether each progress was
    recorded), so the M-step's per-policy and per-pair sums of the responsibilities are the sums
    over runs of equal rows and the per-policy progress-weighted sums (:attr:`collect`, one entry
    a row, three with the B.4 term) mapped by the small :attr:`group_map`.
    """

    def __init__(self, data: Comparisons, options: TaskModelOptions) -> None:
        weight = options.partial_weight / options.sigma_partial**2
        s_i, s_j = data.progress_a, data.progress_b
        partial = bool(weight > 0 and not (np.isnan(s_i).all() and np.isnan(s_j).all()))
        columns = [data.i, data.j, data.outcome]
        if partial:  # progress enters log P(y|t): rows must agree on it too (whether recorded, then its value)
            columns += [~np.isnan(s_i), ~np.isnan(s_j), np.nan_to_num(s_i), np.nan_to_num(s_j)]
        rows, inverse = np.unique(np.column_stack(columns).astype(np.float64), axis=0, return_inverse=True)
        #: original comparison -> its distinct row
        self.inverse = np.asarray(inverse).ravel()
        self.n_policies, self.partial, self.weight = data.n_policies, partial, weight
        self._rows = rows
        self._build(rows, np.bincount(self.inverse, minlength=rows.shape[0]).astype(np.float64))

    def _build(self, rows: FloatArray, counts: FloatArray) -> None:
        n, u = self.n_policies, rows.shape[0]
        self.counts, self.total = counts, float(counts.sum())
        self.i, self.j, y = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2].astype(np.int64)
        self.tie = y == 1
        if self.partial:
            rec_i, rec_j = rows[:, 3].astype(np.int64), rows[:, 4].astype(np.int64)
            self.s_i, self.s_j = rows[:, 5], rows[:, 6]
        else:
            rec_i = rec_j = np.zeros(u, dtype=np.int64)
            self.s_i = self.s_j = np.zeros(u)
        self.w_i, self.w_j = self.weight * rec_i, self.weight * rec_j
        # log nu_t + log P(y|t) (App. B.1; Algorithm 2 line 11's joint), row constants apart: the
        # i-slot table [win log q, loss log(1 - q), tie their mean] (minus w q^2 / 2 where recorded)
        # plus log nu_t, the j-slot table likewise without log nu_t (win and loss swapped), and
        # w s q per recorded slot from the q table (App. B.4: -w (s - q)^2 / 2 = -w s^2 / 2 + w s q - w q^2 / 2)
        kind_i, kind_j = np.select([y == 2, y == 0], [0, 1], 2), np.select([y == 2, y == 0], [1, 0], 2)
        at = np.arange(u)
        cols = [(kind_i * 2 + rec_i) * n + self.i, _SLOT_TABLES * n + (kind_j * 2 + rec_j) * n + self.j]
        vals, where = [np.ones(u), np.ones(u)], [at, at]
        if self.partial:
            cols += [2 * _SLOT_TABLES * n + self.i, 2 * _SLOT_TABLES * n + self.j]
            vals += [self.w_i * self.s_i, self.w_j * self.s_j]
            where += [at, at]
        self.rows = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(where), np.concatenate(cols))),
                                      shape=(u, _TABLE_ROWS * n))
        self.constant = -0.5 * (self.w_i * self.s_i**2 + self.w_j * self.s_j**2)
        # groups: runs of rows equal in (i, j, y, rec_i, rec_j); `collect` sums each group, and per
        # policy the rows' w s over both slots (s differs within a group)
        key = (((self.i * n + self.j) * 3 + y) * 2 + rec_i) * 2 + rec_j
        group = np.cumsum(np.r_[False, key[1:] != key[:-1]])
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        n_groups = starts.size
        cols, vals, where = [at], [np.ones(u)], [group]
        if self.partial:
            cols += [at, at]
            vals += [self.w_i * self.s_i, self.w_j * self.s_j]
            where += [n_groups + self.i, n_groups + self.j]
        self.collect = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(where), np.concatenate(cols))),
                                         shape=(n_groups + n, u))
        gi, gj, gy = self.i[starts], self.j[starts], y[starts]
        g_wi, g_wj = self.w_i[starts], self.w_j[starts]
        target_i = np.select([gy == 2, gy == 0], [1.0, 0.0], 0.5)
        pair, pair_of = np.unique(gi * n + gj, return_inverse=True)
        self.pair_a, self.pair_b = pair // n, pair % n
        # group sums -> moments (4N: per policy sum gamma, sum gamma * target, sum gamma w s, sum gamma w;
        # both slots; targets of App. B.2: win (1, 0), loss (0, 1), tie (1/2, 1/2)), then per (i, j) pair sum gamma
        g = np.arange(n_groups)
        self.group_map = sparse.csr_matrix((
            np.concatenate([np.ones(2 * n_groups), target_i, 1.0 - target_i, g_wi, g_wj, np.ones(n_groups + n)]),
            (np.concatenate([gi, gj, n + gi, n + gj, 3 * n + gi, 3 * n + gj, 4 * n + np.asarray(pair_of).ravel(),
                             2 * n + np.arange(n)]),
             np.r_[np.tile(g, 7), n_groups + np.arange(n)])), shape=(4 * n + pair.size, n_groups + n))

    @property
    def size(self) -> int:
        """Number of distinct rows."""
        return int(self.counts.size)

    def moments(self, gamma: FloatArray) -> FloatArray:
        """``(4N, T)``: per policy sum gamma, sum gamma * target, sum gamma w s, sum gamma w (count-weighted)."""
        return np.asarray(self.group_map @ (_scaled(self.collect, self.counts) @ gamma))[: 4 * self.n_policies]

    def reweighted(self, counts: IntArray) -> _Design:
        """The same comparisons counted ``counts`` times each (a bootstrap resample): rows counted 0 dropped.

        Equal to the design of the resample itself (``np.unique`` keeps the rows' order), so a refit on
        it is the estimator on the resample.
        """
        keep = counts > 0
        other = object.__new__(_Design)
        other.n_policies, other.partial, other.weight = self.n_policies, self.partial, self.weight
        other.inverse = np.full(self.inverse.size, -1)
        other._rows = self._rows[keep]
        other._build(other._rows, np.asarray(counts[keep], dtype=np.float64))
        return other


#: Tables per slot in :func:`_tables`: (win, loss, tie) x (progress not recorded, recorded), N rows each.
_SLOT_TABLES = 6
#: Table rows per policy: both slots' tables and the q table of the B.4 term.
_TABLE_ROWS = 2 * _SLOT_TABLES + 1


@dataclasses.dataclass
class _State:
    theta: FloatArray
    psi: FloatArray
    tau: FloatArray
    nu: FloatArray
    nu_tie: float


class _Batch:
    """Designs fitted together (a bootstrap's resamples): their maps stacked block-diagonally.

    The EM's arrays carry the resample first: ``theta`` (K, N), ``psi`` (K, N, T), ... .  Each
    resample's rows are its own design's, in its order, so a batch computes for each resample what
    a batch of that resample alone computes.
    """

    def __init__(self, designs: list[_Design]) -> None:
        self.k, self.n_policies, self.partial = len(designs), designs[0].n_policies, designs[0].partial
        self.weight = designs[0].weight
        self.rows = sparse.block_diag([d.rows for d in designs], format="csr")
        self.collect = sparse.block_diag([d.collect for d in designs], format="csr")
        self.group_map = sparse.block_diag([d.group_map for d in designs], format="csr")
        self.n_sums = 4 * self.n_policies + np.array([d.pair_a.size for d in designs])
        self.pair_owner = np.repeat(np.arange(self.k), [d.pair_a.size for d in designs])
        self.pair_a = np.concatenate([d.pair_a for d in designs])
        self.pair_b = np.concatenate([d.pair_b for d in designs])
        self.row_owner = np.repeat(np.arange(self.k), [d.size for d in designs])
        self.counts = np.concatenate([d.counts for d in designs])
        self.constant = np.concatenate([d.constant for d in designs])
        self.tie = np.concatenate([d.tie for d in designs])
        self.total = np.array([d.total for d in designs])
        #: per resample, where its moments (4N rows) and its pair sums lie in :meth:`sums`' output
        ends = np.cumsum(self.n_sums)
        self._moment_rows = (ends - self.n_sums)[:, None] + np.arange(4 * self.n_policies)[None, :]
        self._pair_rows = np.concatenate([np.arange(end - size + 4 * self.n_policies, end)
                                          for end, size in zip(ends, self.n_sums)])

    def sums(self, joint: FloatArray, scale: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Moments ``(K, 4N, T)`` (:meth:`_Design.moments`) and pair sums ``(pairs, T)`` of the
        responsibilities ``scale[:, None] * joint`` (rows, T), ``scale`` folded into the sums."""
        out = np.asarray(self.group_map @ (_scaled(self.collect, scale) @ joint))
        return out[self._moment_rows], out[self._pair_rows]


def _scaled(m: sparse.csr_matrix | sparse.csr_array, scale: FloatArray) -> sparse.csr_matrix:
    """``m @ diag(scale)``: each column of the CSR map ``m`` scaled (its entries, not the rows' values)."""
    return sparse.csr_matrix((m.data * scale[m.indices], m.indices, m.indptr), shape=m.shape)


def _solve(theta: FloatArray, psi: FloatArray, tau: FloatArray) -> FloatArray:
    """``q_{p,t} = sigma(theta_p + psi_{p,t} - tau_t)`` (..., N, T): solve probabilities (App. B.1)."""
    return np.asarray(expit(theta[..., :, None] + psi - tau[..., None, :]))


def _tables(theta: FloatArray, psi: FloatArray, tau: FloatArray, log_nu: FloatArray, weight: float) -> FloatArray:
    """The tables :attr:`_Design.rows` gathers ``log nu_t + log P(y|t)`` from (..., 13N, T).

    Per slot ``(win, loss, tie) x (progress not recorded, recorded)``: ``log q``, ``log (1 - q)``
    and their mean, less ``w q^2 / 2`` where recorded; the i-slot's with ``log_nu`` added, then
    the j-slot's, then ``q`` (for ``w s q``).
    """
    z = theta[..., :, None] + psi - tau[..., None, :]
    log_q = -np.logaddexp(0.0, -z)
    log_1q = log_q - z  # log(1 - sigma(z)) = log sigma(z) - z
    q = np.exp(log_q)
    half_q2 = 0.5 * weight * q * q
    mean = 0.5 * (log_q + log_1q)
    slot = np.concatenate([log_q, log_q - half_q2, log_1q, log_1q - half_q2, mean, mean - half_q2], axis=-2)
    return np.asarray(np.concatenate([slot + log_nu[..., None, :], slot, q], axis=-2))


def _log_conditional(d: _Design, s: _State) -> FloatArray:
    """``log P(y_n | t)`` (rows, T) of every distinct row (App. B.1, with the B.4 term when enabled)."""
    row_constant = d.constant + np.where(d.tie, np.log(2.0 * s.nu_tie), 0.0)
    tables = _tables(s.theta, s.psi, s.tau, np.zeros_like(s.nu), d.weight)
    return np.asarray(d.rows @ tables + row_constant[:, None])


#: Row sums of ``exp(joint - shift)`` outside these bounds are recomputed with the row's own maximum
#: subtracted (:func:`_responsibilities`): inside them every responsibility above ~1e-100 is exact to round-off.
_SUM_RANGE = (1e-200, 1e200)


def _responsibilities(b: _Batch, tables: FloatArray, shift: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """E-step (Algorithm 2 lines 10-14): ``counts * gamma_{n,t}`` as ``(joint, scale)`` with
    ``scale[:, None] * joint`` the product (the scale is folded into the M-step's sums), and
    ``log sum_t nu_t P(y_n|t)`` without row constants.

    ``tables`` carry ``log nu_t - shift`` (``shift`` per resample, the largest ``log nu_t``): every
    ``log P(y|t)`` is at most ``w/2`` per recorded slot (0 without progress), so the softmax needs
    no per-row maximum; a row whose sum leaves :data:`_SUM_RANGE` (an extreme ``w``) is recomputed with it.
    """
    flat = tables.reshape(-1, tables.shape[-1])
    gamma = np.asarray(b.rows @ flat)  # a new array: the softmax runs in place
    with np.errstate(over="ignore"):
        np.exp(gamma, out=gamma)
    total = gamma.sum(axis=1)
    log_mix = shift[b.row_owner]
    bad = ~((total > _SUM_RANGE[0]) & (total < _SUM_RANGE[1]))
    if bad.any():
        joint = np.asarray(b.rows[bad] @ flat)
        top = joint.max(axis=1, keepdims=True)
        joint -= top
        np.exp(joint, out=joint)
        gamma[bad], total[bad] = joint, joint.sum(axis=1)
        log_mix[bad] += top.ravel()  # a new array (fancy indexing)
    return gamma, b.counts / total, log_mix + np.log(total)


def _block_derivatives(partial: bool, moments: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``sum_n gamma_{n,t} dlogP/dz_{p,t}`` and ``sum_n gamma_{n,t} (-d2logP/dz_{p,t}^2)`` (..., N, T) (App. B.2).

    ``moments = d.moments @ gamma`` (..., 4N, T).  Per slot ``g = target - q + w (s - q) q (1 - q)``
    and ``h = q (1 - q) + w (q (1 - q))^2``; ``q`` is the policy's in both slots, so the
    count-weighted sums over a policy's rows need only its moments.
    """
    n = q.shape[-2]
    m0, m1 = moments[..., :n, :], moments[..., n : 2 * n, :]
    v = q * (1.0 - q)
    grad, info = m1 - q * m0, m0 * v
    if partial:
        m_ws, m_w = moments[..., 2 * n : 3 * n, :], moments[..., 3 * n :, :]
        grad = grad + v * (m_ws - q * m_w)
        info = info + m_w * v * v
    return grad, info


def _clip(step: FloatArray, bound: float) -> FloatArray:
    return np.asarray(np.clip(step, -bound, bound))


def _e_step(b: _Batch, theta: FloatArray, psi: FloatArray, tau: FloatArray,
            nu: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`_responsibilities` at the state (arrays with the resample first)."""
    log_nu = np.log(nu)
    shift = log_nu.max(axis=1)
    return _responsibilities(b, _tables(theta, psi, tau, log_nu - shift[:, None], b.weight), shift)


def _em(b: _Batch, o: TaskModelOptions, start: tuple[FloatArray, FloatArray]) -> list[tuple[_State, float, int, FloatArray]]:
    """Algorithm 2 from ``start`` (theta, tau) for every resample of ``b``: each stops at its own ``tol``."""
    k, n, t = b.k, b.n_policies, o.n_buckets
    theta, psi, tau = np.tile(start[0], (k, 1)), np.zeros((k, n, t)), np.tile(start[1], (k, 1))
    nu, nu_tie = np.full((k, t), 1.0 / t), np.full(k, 0.5)
    active, iterations = np.ones(k, dtype=bool), np.zeros(k, dtype=np.int64)
    for m in range(o.em_iters):
        bound = o.step_clip * o.step_decay**m
        moments, by_pair = b.sums(*_e_step(b, theta, psi, tau, nu)[:2])
        before = (theta, psi, tau, nu, nu_tie)
        grad, info = _block_derivatives(b.partial, moments, _solve(theta, psi, tau))  # theta block (lines 15-17)
        theta = theta + _clip((grad.sum(axis=2) - o.l2_theta * theta) / (info.sum(axis=2) + o.l2_theta), bound)
        grad, info = _block_derivatives(b.partial, moments, _solve(theta, psi, tau))  # psi block (lines 18-20)
        psi = psi + _clip((grad - o.l2_psi * psi) / (info + o.l2_psi), bound)
        grad, info = _block_derivatives(b.partial, moments, _solve(theta, psi, tau))  # tau block (lines 21-23)
        grad, info = -grad.sum(axis=1), info.sum(axis=1)  # dz/dtau = -1
        tau = tau + _clip(np.where(info > 1e-8, grad / np.maximum(info, 1e-8), 0.0), bound)
        nu = np.clip(moments[:, :n].sum(axis=1) / (2.0 * b.total[:, None]), 1e-300, None)  # line 25 (two slots a row)
        nu = nu / nu.sum(axis=1, keepdims=True)
        nu_tie = _tie_update(b, nu_tie, by_pair, _solve(theta, psi, tau))  # line 26
        theta, psi, tau = _identify(theta, psi, tau)
        if not active.all():  # resamples that stopped earlier keep their state
            done = ~active
            theta, psi, tau, nu, nu_tie = (np.where(done.reshape((k,) + (1,) * (new.ndim - 1)), old, new)
                                           for new, old in zip((theta, psi, tau, nu, nu_tie), before))
        iterations[active] = m + 1
        active &= np.abs(theta - before[0]).max(axis=1) >= o.tol  # line 27
        if not active.any():
            break
    joint, scale, log_mix = _e_step(b, theta, psi, tau, nu)
    per_row = b.counts * (log_mix + b.constant + np.where(b.tie, np.log(2.0 * nu_tie[b.row_owner]), 0.0))
    loglik = np.bincount(b.row_owner, weights=per_row, minlength=k)
    _, info = _block_derivatives(b.partial, b.sums(joint, scale)[0], _solve(theta, psi, tau))
    se = 1.0 / np.sqrt(info.sum(axis=2) + o.l2_theta)
    return [(_State(theta[r], psi[r], tau[r], nu[r], float(nu_tie[r])), float(loglik[r]), int(iterations[r]), se[r])
            for r in range(k)]


def _tie_update(b: _Batch, nu_tie: FloatArray, by_pair: FloatArray, q: FloatArray) -> FloatArray:
    """Algorithm 2 line 26: ``nu_tie <- 0.5 sum gamma p_tie / sum gamma p_win``, kept in (0, 1).

    ``p_tie = 2 nu_tie sqrt(q_i (1 - q_i) q_j (1 - q_j))`` and ``p_win = q_i (1 - q_j)`` depend on a
    row through its pair ``(i, j)`` only: the sums run over the pairs' moments.
    """
    q_a, q_b = q[b.pair_owner, b.pair_a], q[b.pair_owner, b.pair_b]
    tie = np.bincount(b.pair_owner, (by_pair * np.sqrt(q_a * (1.0 - q_a) * q_b * (1.0 - q_b))).sum(axis=1), b.k)
    win = np.bincount(b.pair_owner, (by_pair * q_a * (1.0 - q_b)).sum(axis=1), b.k)
    return np.asarray(np.clip(nu_tie * tie / np.maximum(win, 1e-300), 1e-6, 1.0 - 1e-6))


def _identify(theta: FloatArray, psi: FloatArray, tau: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Impose the identifiability constraints by exact reparametrisation (module docstring)."""
    per_policy = psi.mean(axis=-1)
    psi = psi - per_policy[..., None]
    theta = theta + per_policy
    per_bucket = psi.mean(axis=-2)
    psi = psi - per_bucket[..., None, :]
    tau = tau - per_bucket
    shift = theta.mean(axis=-1, keepdims=True)
    return theta - shift, psi, tau - shift


def fit_task(
    data: Comparisons, options: TaskModelOptions | None = None, *,
    progress: Callable[[int, int], None] | None = None,
) -> TaskFit:
    """Fit the task-aware model of seed 001 (Sec. 3.2 Eq. 1 with App. B's Davidson ties) by EM.

    Parameters
    ----------
    data : Comparisons
        The A/B outcomes (task labels are *not* used: the buckets are latent, App. B.1).
    options : TaskModelOptions, optional
        EM hyperparameters (App. B.6 defaults).
    progress : callable, optional
        Called as ``progress(done, total)`` after every bootstrap refit (long fits report progress).

    Returns
    -------
    TaskFit
        ``fit.ranking`` scores policies by ``theta``; SE the bootstrap SD over ``options.n_boot``
        resamples (default), or with ``n_boot = 0`` the conditional information
        ``1 / sqrt(-d2Q/dtheta_p^2)`` at the final responsibilities (which ignores the uncertainty
        in ``psi``, ``tau`` and the buckets, so it understates the error).
    """
    o = options or TaskModelOptions()
    if len(data) == 0:
        raise StatsInputError("`data` must hold at least one comparison; found none")
    design = _Design(data, o)
    state, loglik, iterations, se = _best_fit([design], o)[0]
    if o.n_boot > 1:
        # each refit is the estimator itself applied to a resample (Efron & Tibshirani 1993, Algorithm
        # 6.1): the same seeded starts as the fit above, so the EM's start noise (60 iterations rarely
        # reach `tol`) is not counted as sampling error; fresh starts made the SE ~4 % wider
        resample = np.random.default_rng([o.seed, 1])
        counts = [np.bincount(design.inverse[resample.integers(0, len(data), len(data))], minlength=design.size)
                  for _ in range(o.n_boot)]
        batches = [counts[k : k + _BATCH] for k in range(0, len(counts), _BATCH)]
        refit = lambda batch: [fit[0].theta for fit in _best_fit([design.reweighted(c) for c in batch], o)]  # noqa: E731
        boots = _refits(refit, batches, o.n_boot, progress)
        se = np.asarray(np.std(boots, axis=0, ddof=1))
    seen = np.bincount(np.r_[data.i, data.j], minlength=data.n_policies) > 0
    return TaskFit(
        data.policies, state.theta, state.psi, state.tau, state.nu, state.nu_tie, loglik,
        np.where(seen, se, np.nan), iterations, o.n_boot if o.n_boot > 1 else 0,
    )


#: Resamples refitted together by one EM run (:class:`_Batch`): enough that numpy's per-call cost
#: is small against the arrays' work, few enough that both cores get several batches.
_BATCH = 16


def _refits(refit: Callable[[list[IntArray]], list[FloatArray]], batches: list[list[IntArray]], total: int,
            progress: Callable[[int, int], None] | None) -> list[FloatArray]:
    """``refit(batch)`` for every batch of resample counts, in order, on every core; ``progress(done, total)``
    per refit as its batch ends.

    Threads: the EM's time is numpy's and scipy's array work, which runs without the GIL.
    """
    workers = max(1, min(len(os.sched_getaffinity(0)), len(batches)))
    out: list[FloatArray] = []
    with ThreadPoolExecutor(workers) as pool:
        for thetas in pool.map(refit, batches):
            for theta in thetas:
                out.append(theta)
                if progress is not None:
                    progress(len(out), total)
    return out


def _best_fit(designs: list[_Design], o: TaskModelOptions) -> list[tuple[_State, float, int, FloatArray]]:
    """The EM on each design from the seeded starts, each design's best restart by log-likelihood."""
    rng = np.random.default_rng(o.seed)
    batch = _Batch(designs)
    best: list[tuple[_State, float, int, FloatArray]] = []
    for _ in range(o.n_restarts):
        theta, tau = rng.normal(0.0, 0.1, batch.n_policies), rng.normal(0.0, 0.1, o.n_buckets)  # lines 3-8
        fits = _em(batch, o, (theta, tau))
        best = fits if not best else [new if new[1] > old[1] else old for new, old in zip(fits, best)]
    return best


def _objective(d: _Design, state: _State, gamma: NDArray[np.float64], o: TaskModelOptions) -> float:
    """``Q`` of App. B.2 at ``state`` for fixed responsibilities (rows, T) (used by the derivative tests)."""
    return float(
        (d.counts[:, None] * gamma * (np.log(state.nu)[None, :] + _log_conditional(d, state))).sum()
        - 0.5 * o.l2_theta * float(state.theta @ state.theta) - 0.5 * o.l2_psi * float((state.psi**2).sum())
    )
