"""The task-aware Bradley-Terry model of RoboArena, fitted by EM (seed 001 Sec. 3.2 Eq. 1, App. B).

Each comparison belongs to one of ``T`` latent task buckets (never observed).  In bucket ``t``
policy ``p`` solves the task with probability ``q_{p,t} = sigma(theta_p + psi_{p,t} - tau_t)``,
independently of its opponent (App. B.1, "independent solve"), and

.. math::

    P(y=2 \\mid t) = q_i (1 - q_j), \\quad P(y=0 \\mid t) = (1 - q_i) q_j, \\quad
    P(y=1 \\mid t) = 2 \\nu_{tie} \\sqrt{q_i (1 - q_i) q_j (1 - q_j)}, \\quad
    P(y) = \\sum_t \\nu_t P(y \\mid t).

EM (App. B.3, Algorithm 2): the E-step computes the responsibilities ``gamma_{n,t}``; the M-step
takes one clipped Newton step per block (``theta``, then ``psi``, then ``tau``) on the expected
complete-data objective of App. B.2,

.. math::

    Q = \\sum_{n,t} \\gamma_{n,t} [\\log \\nu_t + \\log P(y_n \\mid t)]
        - \\tfrac{\\lambda_\\theta}{2} \\sum_p \\theta_p^2 - \\tfrac{\\lambda_\\psi}{2} \\sum_{p,t} \\psi_{p,t}^2,

then sets ``nu_t`` to the mean responsibility and updates ``nu_tie`` as Algorithm 2 line 26.

Signs, checked here rather than copied (and tested against finite differences):

* ``dQ/dtheta_p`` *adds* the j-slot sum: ``z_j = theta_j + ...`` so ``dz_j/dtheta_j = +1``; App.
  B.2 prints a minus before that sum, which would push a policy's ability the wrong way whenever it
  plays under label B.
* both L2 terms are penalties: ``-lambda theta`` in the gradient and ``-lambda`` in the second
  derivative (the released ``em_hybrid`` code adds the psi term with the wrong sign).
* the clipped Newton step ``x - clip(g/h)`` with ``h < 0`` is an ascent step.

``nu_tie`` multiplies ``P(y=1|t)`` by the same factor in every bucket, so it cancels from the
responsibilities and from every ``theta``/``psi``/``tau`` update: it cannot change the ranking.
It is kept (as Algorithm 2 writes it, clipped to its domain (0, 1)) for the log-likelihood only.

Identifiability.  The likelihood is unchanged by ``theta_p += c, psi_{p,.} -= c`` (per policy),
``psi_{.,t} += c, tau_t += c`` (per bucket) and ``theta += c, tau += c`` (global).  After every
M-step these three shifts are used to impose ``sum_t psi_{p,t} = 0`` for every policy,
``sum_p psi_{p,t} = 0`` for every bucket and ``sum_p theta_p = 0``: exact reparametrisations that
leave the fit unchanged (the paper's "centering ... to maintain zero mean", Sec. 3.2, done so
that centring ``theta`` and ``tau`` separately cannot move the overall solve rate).

Partial success (App. B.4, off by default): with ``partial_weight > 0`` each recorded progress
``s`` adds ``-w (s - q)^2 / (2 sigma_partial^2)`` to ``log P(y|t)``; its gradient
``w (s - q) q (1 - q) / sigma^2`` and Gauss-Newton curvature ``w (q (1 - q))^2 / sigma^2`` join the
M-step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.special import expit

from .errors import StatsInputError
from .ranking import Comparisons, FloatArray, Ranking

__all__ = ["TaskFit", "TaskModelOptions", "fit_task"]


@dataclasses.dataclass(frozen=True)
class TaskModelOptions:
    """Hyperparameters of the EM (defaults: seed 001 App. B.6, Table 1).

    ``n_restarts`` random initialisations are run and the highest marginal log-likelihood is kept.
    ``n_boot`` (default 100): the SE of ``theta`` is the SD of the EM's ``theta`` over ``n_boot``
    resamples of the comparisons (the whole procedure refitted from the same seeded starts, so the
    uncertainty of ``psi``, ``tau``, the buckets, and the EM's own early stopping all count), which covers at the stated level in
    hard worlds (0.951 (0.004) at 0.95 over 160 datasets, every policy within binomial noise of it;
    issue 20, docs/ranking.md).  ``n_boot = 0`` keeps the cheap conditional
    information ``1 / sqrt(-d2Q/dtheta_p^2)`` at fixed responsibilities, which ignores all of that and
    covers only 0.80-0.84 there: the ranking is then marked ``calibrated = False``.  The bootstrap
    interval is Student's t with ``n_boot - 1`` df (the SD of ``n_boot`` refits is itself noisy;
    :attr:`TaskFit.ranking`).
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
    n_boot: int = 100
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
    """Data in array form: one-hot policy maps for the i- and j-slot and per-outcome masks."""

    def __init__(self, data: Comparisons, options: TaskModelOptions) -> None:
        m, n = len(data), data.n_policies
        self.i, self.j = data.i, data.j
        rows = np.arange(m)
        self.slot_i = sparse.csr_matrix((np.ones(m), (data.i, rows)), shape=(n, m))
        self.slot_j = sparse.csr_matrix((np.ones(m), (data.j, rows)), shape=(n, m))
        y = data.outcome[:, None]
        self.win, self.tie, self.loss = (y == 2), (y == 1), (y == 0)
        weight = options.partial_weight / options.sigma_partial**2
        self.s_i, self.s_j = data.progress_a[:, None], data.progress_b[:, None]
        self.w_i = np.where(np.isnan(self.s_i), 0.0, weight)
        self.w_j = np.where(np.isnan(self.s_j), 0.0, weight)
        self.s_i, self.s_j = np.nan_to_num(self.s_i), np.nan_to_num(self.s_j)
        self.partial = bool(weight > 0 and (self.w_i.any() or self.w_j.any()))
        # per-outcome targets of the slot gradients (App. B.2): win (1, 0), loss (0, 1), tie (1/2, 1/2)
        self.target_i = np.where(self.win, 1.0, np.where(self.loss, 0.0, 0.5))
        self.target_j = 1.0 - self.target_i


@dataclasses.dataclass
class _State:
    theta: FloatArray
    psi: FloatArray
    tau: FloatArray
    nu: FloatArray
    nu_tie: float


def _logits(d: _Design, s: _State) -> tuple[FloatArray, FloatArray]:
    """``z_i``, ``z_j`` (M, T): log-odds of solving in every bucket (App. B.1)."""
    base = s.psi - s.tau[None, :] + s.theta[:, None]
    return base[d.i], base[d.j]


def _log_conditional(d: _Design, s: _State) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``log P(y_n | t)`` (M, T) and the solve probabilities ``q_i``, ``q_j`` (App. B.1)."""
    z_i, z_j = _logits(d, s)
    log_q_i, log_q_j = -np.logaddexp(0.0, -z_i), -np.logaddexp(0.0, -z_j)
    log_1q_i, log_1q_j = log_q_i - z_i, log_q_j - z_j  # log(1 - sigma(z)) = log sigma(z) - z
    q_i, q_j = np.exp(log_q_i), np.exp(log_q_j)
    log_tie = np.log(2.0 * s.nu_tie) + 0.5 * (log_q_i + log_1q_i + log_q_j + log_1q_j)
    logp = np.where(d.win, log_q_i + log_1q_j, np.where(d.loss, log_1q_i + log_q_j, log_tie))
    # App. B.4: the Gaussian partial-success term (weight 0 unless enabled and recorded)
    if d.partial:
        logp = logp - 0.5 * (d.w_i * (d.s_i - q_i) ** 2 + d.w_j * (d.s_j - q_j) ** 2)
    return logp, q_i, q_j


def _solve_probabilities(d: _Design, s: _State) -> tuple[FloatArray, FloatArray]:
    z_i, z_j = _logits(d, s)
    return expit(z_i), expit(z_j)


def _slot_derivatives(
    d: _Design, s: _State, q: tuple[FloatArray, FloatArray] | None = None
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``g = d log P(y|t) / dz`` and ``h = -d2 log P(y|t) / dz2`` for both slots (App. B.2).

    ``q``: the solve probabilities at ``s``, when already computed.
    """
    q_i, q_j = _solve_probabilities(d, s) if q is None else q
    # win: (1 - q_i, -q_j); loss: (-q_i, 1 - q_j); tie: (1/2 - q_i, 1/2 - q_j)
    v_i, v_j = q_i * (1.0 - q_i), q_j * (1.0 - q_j)
    if not d.partial:
        return d.target_i - q_i, d.target_j - q_j, v_i, v_j
    g_i = d.target_i - q_i + d.w_i * (d.s_i - q_i) * v_i
    g_j = d.target_j - q_j + d.w_j * (d.s_j - q_j) * v_j
    return g_i, g_j, v_i + d.w_i * v_i**2, v_j + d.w_j * v_j**2


def _per_policy(d: _Design, slot_i: FloatArray, slot_j: FloatArray) -> FloatArray:
    """``sum_{n: i_n = p} slot_i[n] + sum_{n: j_n = p} slot_j[n]`` for every policy (rows (N, T))."""
    return np.asarray(d.slot_i @ slot_i + d.slot_j @ slot_j)


def _clip(step: FloatArray, bound: float) -> FloatArray:
    return np.asarray(np.clip(step, -bound, bound))


def _em(data: Comparisons, d: _Design, o: TaskModelOptions, rng: np.random.Generator) -> tuple[_State, float, int, FloatArray]:
    n, t = data.n_policies, o.n_buckets
    # Algorithm 2 lines 3-8 (N(0, 0.1) read as standard deviation 0.1)
    s = _State(rng.normal(0.0, 0.1, n), np.zeros((n, t)), rng.normal(0.0, 0.1, t), np.full(t, 1.0 / t), 0.5)
    iterations = 0
    logp, q_i, q_j = _log_conditional(d, s)
    for m in range(o.em_iters):
        iterations = m + 1
        bound = o.step_clip * o.step_decay**m
        joint = np.log(s.nu)[None, :] + logp  # E-step (lines 10-14)
        gamma = np.exp(joint - _logsumexp_rows(joint))
        old_theta = s.theta.copy()
        g_i, g_j, h_i, h_j = _slot_derivatives(d, s, (q_i, q_j))  # theta block (lines 15-17)
        grad = _per_policy(d, gamma * g_i, gamma * g_j).sum(axis=1) - o.l2_theta * s.theta
        info = _per_policy(d, gamma * h_i, gamma * h_j).sum(axis=1) + o.l2_theta
        s.theta = s.theta + _clip(grad / info, bound)
        g_i, g_j, h_i, h_j = _slot_derivatives(d, s)  # psi block (lines 18-20)
        grad = _per_policy(d, gamma * g_i, gamma * g_j) - o.l2_psi * s.psi
        info = _per_policy(d, gamma * h_i, gamma * h_j) + o.l2_psi
        s.psi = s.psi + _clip(grad / info, bound)
        g_i, g_j, h_i, h_j = _slot_derivatives(d, s)  # tau block (lines 21-23): dz/dtau = -1
        grad = -(gamma * (g_i + g_j)).sum(axis=0)
        info = (gamma * (h_i + h_j)).sum(axis=0)
        s.tau = s.tau + _clip(np.where(info > 1e-8, grad / np.maximum(info, 1e-8), 0.0), bound)
        s.nu = np.clip(gamma.mean(axis=0), 1e-300, None)  # line 25
        s.nu = s.nu / s.nu.sum()
        logp, q_i, q_j = _log_conditional(d, s)  # also the next E-step's: identification keeps z
        new_tie = _tie_update(s, gamma, q_i, q_j)  # line 26
        logp = np.where(d.tie, logp + np.log(new_tie / s.nu_tie), logp)  # P(y=1|t) scales with nu_tie
        s.nu_tie = new_tie
        _identify(s)
        if float(np.max(np.abs(s.theta - old_theta))) < o.tol:  # line 27
            break
    joint = np.log(s.nu)[None, :] + logp
    loglik = float(_logsumexp_rows(joint).sum())
    gamma = np.exp(joint - _logsumexp_rows(joint))
    _, _, h_i, h_j = _slot_derivatives(d, s)
    info = _per_policy(d, gamma * h_i, gamma * h_j).sum(axis=1) + o.l2_theta
    return s, loglik, iterations, np.asarray(1.0 / np.sqrt(info))


def _logsumexp_rows(x: FloatArray) -> FloatArray:
    """``log sum_t exp x[n, t]`` per row, kept (M, 1) (scipy's general version costs more than the EM step)."""
    top = x.max(axis=1, keepdims=True)
    return np.asarray(top + np.log(np.exp(x - top).sum(axis=1, keepdims=True)))


def _tie_update(s: _State, gamma: FloatArray, q_i: FloatArray, q_j: FloatArray) -> float:
    """Algorithm 2 line 26: ``nu_tie <- 0.5 sum gamma p_tie / sum gamma p_win``, kept in (0, 1)."""
    p_tie = 2.0 * s.nu_tie * np.sqrt(q_i * (1.0 - q_i) * q_j * (1.0 - q_j))
    p_win = q_i * (1.0 - q_j)
    ratio = 0.5 * float((gamma * p_tie).sum()) / max(float((gamma * p_win).sum()), 1e-300)
    return float(np.clip(ratio, 1e-6, 1.0 - 1e-6))


def _identify(s: _State) -> None:
    """Impose the identifiability constraints by exact reparametrisation (module docstring)."""
    per_policy = s.psi.mean(axis=1)
    s.psi = s.psi - per_policy[:, None]
    s.theta = s.theta + per_policy
    per_bucket = s.psi.mean(axis=0)
    s.psi = s.psi - per_bucket[None, :]
    s.tau = s.tau - per_bucket
    shift = s.theta.mean()
    s.theta = s.theta - shift
    s.tau = s.tau - shift


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
    best = _best_fit(data, o, np.random.default_rng(o.seed))
    state, loglik, iterations, se = best
    if o.n_boot > 1:
        # each refit is the estimator itself applied to a resample (Efron & Tibshirani 1993, Algorithm
        # 6.1): the same seeded starts as the fit above, so the EM's start noise (60 iterations rarely
        # reach `tol`) is not counted as sampling error; fresh starts made the SE ~4 % wider
        resample = np.random.default_rng([o.seed, 1])
        boots = []
        for done in range(1, o.n_boot + 1):
            rows = resample.integers(0, len(data), len(data))
            boots.append(_best_fit(data.subset(rows), o, np.random.default_rng(o.seed))[0].theta)
            if progress is not None:
                progress(done, o.n_boot)
        se = np.asarray(np.std(boots, axis=0, ddof=1))
    seen = np.bincount(np.r_[data.i, data.j], minlength=data.n_policies) > 0
    return TaskFit(
        data.policies, state.theta, state.psi, state.tau, state.nu, state.nu_tie, loglik,
        np.where(seen, se, np.nan), iterations, o.n_boot if o.n_boot > 1 else 0,
    )


def _best_fit(data: Comparisons, o: TaskModelOptions, rng: np.random.Generator) -> tuple[_State, float, int, FloatArray]:
    design = _Design(data, o)
    fits = [_em(data, design, o, rng) for _ in range(o.n_restarts)]
    return max(fits, key=lambda fit: fit[1])


def _objective(data: Comparisons, state: _State, gamma: NDArray[np.float64], o: TaskModelOptions) -> float:
    """``Q`` of App. B.2 at ``state`` for fixed responsibilities (used by the derivative tests)."""
    logp, _, _ = _log_conditional(_Design(data, o), state)
    return float(
        (gamma * (np.log(state.nu)[None, :] + logp)).sum()
        - 0.5 * o.l2_theta * float(state.theta @ state.theta) - 0.5 * o.l2_psi * float((state.psi**2).sum())
    )
