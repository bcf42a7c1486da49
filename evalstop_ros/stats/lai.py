"""Lai's sequential test on discordant pairs (a baseline of seed 003 §V): approximately valid only, within ``n_max``.

Its constant is calibrated by Monte Carlo at ``p_0 = p_1 = 1/2``, so its Type-I guarantee is empirical.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ._betting import SIDES, check_trial
from .sequential import Decision, SequentialResult, run_sequence
from .validation import check_alpha, check_alternative, check_binary, check_positive, check_positive_int

__all__ = ["LaiProcess", "lai_test", "calibrate_lai_c", "lai_boundary", "lai_g", "lai_h0"]

#: Monte Carlo sequences and seed of the default calibration.
CALIBRATION_SEQUENCES = 10_000
CALIBRATION_SEED = 1988
#: Search range of ``log10(c)`` for the calibration.
_LOG10_C_RANGE = (-12.0, 0.0)


def lai_h0(t: ArrayLike) -> NDArray[np.float64]:
    r"""Lai's (1988) approximation :math:`h_0^*(t)` to the optimal stopping boundary, Eq. (2.12).

    Piecewise in the rescaled time :math:`t = c\,m > 0`:

    .. math::

        h_0^*(t) \approx \begin{cases}
          \sqrt{t\,[2\log t^{-1} + \log\log t^{-1} - \log 4\pi - 3 e^{-0.016/\sqrt t}]}
              & t < 0.01, \\
          0.39 - 0.015\,t^{-1/2} & 0.01 \le t < 0.1, \\
          e^{-0.69 t - 1} & 0.1 \le t < 0.8, \\
          \tfrac14 \sqrt{2/\pi}\,\bigl(t^{-1/2} - \tfrac{5}{48\pi} t^{-5/2}\bigr) & t \ge 0.8.
        \end{cases}
    """
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    small = t < 0.01
    ts = t[small]
    log_inv = np.log(1.0 / ts)
    correction = 3.0 * np.exp(-0.016 / np.sqrt(ts))
    out[small] = np.sqrt(
        ts * (2.0 * log_inv + np.log(log_inv) - math.log(4.0 * math.pi) - correction)
    )
    mid = (t >= 0.01) & (t < 0.1)
    out[mid] = 0.39 - 0.015 / np.sqrt(t[mid])
    upper_mid = (t >= 0.1) & (t < 0.8)
    out[upper_mid] = np.exp(-0.69 * t[upper_mid] - 1.0)
    large = t >= 0.8
    tl = t[large]
    out[large] = 0.25 * math.sqrt(2.0 / math.pi) * (tl**-0.5 - 5.0 / (48.0 * math.pi) * tl**-2.5)
    return out


def lai_g(t: ArrayLike) -> NDArray[np.float64]:
    r"""Boundary :math:`g^*(t) = h_0^*(t)^2 / (2t)` of Lai (1988) (definition above Eq. 4.2).

    No indifference zone (:math:`\theta_1 = \theta_0`, so :math:`\gamma = 0` in Eqs. 2.13, 5.3).
    """
    t = np.asarray(t, dtype=np.float64)
    g: NDArray[np.float64] = lai_h0(t) ** 2 / (2.0 * t)
    return g


def _kl_half(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    """KL(Ber(theta) || Ber(1/2)) with 0 log 0 = 0."""
    kl = np.asarray(special.xlogy(theta, 2.0 * theta), dtype=np.float64)
    kl += np.asarray(special.xlogy(1.0 - theta, 2.0 * (1.0 - theta)), dtype=np.float64)
    return kl


def lai_boundary(c: float, n_max: int) -> NDArray[np.int64]:
    r"""Integer stopping boundary: entry ``m`` is the smallest count ``u > m/2`` with
    :math:`m\,KL(u/m \,\|\, 1/2) \ge g^*(c\,m)` (``m + 1`` if none), for ``m = 0..n_max``.

    A sequence with ``m`` discordant pairs, ``u`` of them won by B, stops for B when
    ``u >= boundary[m]`` and for A when ``m - u >= boundary[m]``.
    """
    m = np.arange(1, n_max + 1, dtype=np.float64)
    g = lai_g(c * m)
    bound = np.full(n_max + 1, 1, dtype=np.int64)
    bound[1:] = m.astype(np.int64) + 1
    # Solve KL(theta || 1/2) = g/m on [1/2, 1] by bisection (KL increases there, max log 2).
    target = g / m
    lo = np.full(m.size, 0.5)
    hi = np.ones(m.size)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        above = _kl_half(mid) >= target
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    guess = np.ceil(m * hi).astype(np.int64)
    mi = m.astype(np.int64)
    for shift in (2, 1, 0, -1, -2):  # settle float ties exactly, smallest passing u wins
        u = guess - shift
        ok = (2 * u > mi) & (u <= mi) & (m * _kl_half(np.clip(u, 0, mi) / m) >= g)
        bound[1:] = np.where(ok, np.minimum(bound[1:], u), bound[1:])
    return bound


def _null_rejections(bound: NDArray[np.int64], up: NDArray[np.integer[Any]],
                     n_disc: NDArray[np.int64], two_sided: bool) -> int:
    """Number of simulated null sequences that stop with a (false) claim."""
    n_max = up.shape[1]
    steps = np.arange(1, n_max + 1, dtype=up.dtype)
    thr = np.minimum(bound[1:], n_max + 1).astype(up.dtype)
    valid = steps[None, :] <= n_disc[:, None]
    cross = up >= thr
    if two_sided:
        cross |= (steps - up) >= thr
    return int((cross & valid).any(axis=1).sum())


@functools.lru_cache(maxsize=32)
def calibrate_lai_c(
    alpha: float,
    n_max: int,
    alternative: str = "two-sided",
    *,
    n_sequences: int = CALIBRATION_SEQUENCES,
    seed: int = CALIBRATION_SEED,
) -> float:
    r"""Monte Carlo calibration of Lai's constant ``c`` for ``(alpha, n_max, alternative)``.

    Simulates ``n_sequences`` null sequences of ``n_max`` independent pairs with
    :math:`p_0 = p_1 = 1/2` (``np.random.default_rng(seed)``) and returns, by bisection on
    :math:`\log_{10} c \in [-12, 0]`, the largest ``c`` whose number of false claims ``k``
    satisfies :math:`k \le R\alpha - 2\sqrt{R\alpha(1-\alpha)}` (a two-standard-error margin, so
    that the true rate is below ``alpha`` with about 97.7 % confidence).  Cached in memory.

    Notes
    -----
    Only discordant pairs move the statistic.  At :math:`p_0 = p_1 = 1/2` their number by
    ``n_max`` is Binomial(``n_max``, 1/2) and each is won by B with probability 1/2, so the
    simulation draws that walk directly (same law as simulating the pairs).  Among independent
    pairs with :math:`p_0 = p_1 = p`, ``p = 1/2`` maximises the discordance rate
    :math:`2p(1-p)` and hence the rejection probability; outcomes that are dependent *within* a
    pair (e.g. negatively correlated) can produce more discordant pairs and are not covered.
    """
    alpha = check_alpha(alpha)
    n_max = check_positive_int(n_max, "n_max")
    two_sided = len(SIDES[check_alternative(alternative)]) == 2
    rng = np.random.default_rng(seed)
    n_disc = rng.binomial(n_max, 0.5, size=n_sequences)
    steps = rng.integers(0, 2, size=(n_sequences, n_max), dtype=np.int8)
    dtype = np.int16 if n_max < 32_000 else np.int32
    up: NDArray[np.integer[Any]] = np.cumsum(steps, axis=1, dtype=dtype)
    allowed = n_sequences * alpha - 2.0 * math.sqrt(n_sequences * alpha * (1.0 - alpha))

    def rejections(log10_c: float) -> int:
        return _null_rejections(lai_boundary(math.pow(10.0, log10_c), n_max), up, n_disc, two_sided)

    lo, hi = _LOG10_C_RANGE
    if rejections(hi) <= allowed:
        return math.pow(10.0, hi)
    while hi - lo > 1e-4:
        mid = 0.5 * (lo + hi)
        if rejections(mid) <= allowed:
            lo = mid
        else:
            hi = mid
    return math.pow(10.0, lo)


class LaiProcess:
    r"""Lai's (1988) sequential test on discordant Bernoulli pairs over ``R`` sequences.

    **Approximately valid within the pre-declared budget** ``n_max`` **only**: the boundary
    constant ``c`` is calibrated by simulation (:func:`calibrate_lai_c`), so the Type-I error is
    controlled up to Monte Carlo error, under independent pairs, and only for decisions made by
    trial ``n_max``.  No p-value or e-value is defined (NaN).

    Parameters
    ----------
    n_sequences : int, optional
        Number ``R`` of independent paired sequences updated together.
    alpha : float, optional
        Family-wise Type-I error level in (0, 1).  ``'two-sided'`` is calibrated so that *any*
        false claim at :math:`p_0 = p_1` has probability about ``alpha`` or less; the one-sided
        alternatives calibrate the single direction at ``alpha``.
    alternative : {'two-sided', 'greater', 'less'}, optional
        ``'greater'``: B has the higher success rate.  One-sided tests ignore crossings in the
        other direction and continue (as in the reference code).
    n_max : int
        Pre-declared trial budget.  Sequences undecided after trial ``n_max`` become
        ``BUDGET_EXHAUSTED``.
    c : float, optional
        Boundary constant; ``None`` (default) calibrates it for ``(alpha, n_max,
        alternative)``.  The reference code's default ``4.3321e-05`` was tuned for one-sided
        ``alpha = 0.05`` and ``n_max = 500`` with its own calibration rule.

    Notes
    -----
    Keep only discordant pairs (:math:`x_0 \ne x_1`); after ``m`` of them, ``u`` won by B,
    :math:`\hat\theta = u/m` estimates :math:`\theta = P(x_1 = 1 \mid x_0 \ne x_1)`, which is
    :math:`\le 1/2` iff :math:`p_1 \le p_0` (for independent outcomes).  The generalised
    likelihood ratio statistic for :math:`\theta = 1/2` is :math:`m\,KL(\hat\theta \| 1/2)`,
    and the sequence stops at the first ``m`` with

    .. math::

        m\,KL(\hat\theta \,\|\, \tfrac12) \;\ge\; g^*(c\,m),

    claiming B better if :math:`\hat\theta > 1/2` and A better otherwise (two-sided),
    with :math:`g^*` from :func:`lai_g` (Lai 1988, Eqs. 2.12 and 4.2, no indifference zone).

    References
    ----------
    .. [1] Lai, T. L. "Nearly optimal sequential tests of composite hypotheses", Annals of
           Statistics 16(2):856-886, 1988, Eqs. (2.12), (2.13), (4.2), (5.3).
    .. [2] Snyder, D. et al. "Is your imitation learning policy better than mine?" (STEP),
           seed 003, §V (the "Lai" baseline) and Figs. 3 and 6 (its conservative Type-I error
           away from p = 1/2).

    Examples
    --------
    >>> from evalstop_ros.stats.lai import lai_test
    >>> res = lai_test([0] * 30, [1] * 30, alternative="greater", n_max=100, c=4.3321e-05)
    >>> res.decision.name, res.stopping_trial
    ('B_BETTER', 10)
    """

    name = "lai"

    def __init__(
        self,
        n_sequences: int = 1,
        *,
        alpha: float = 0.05,
        alternative: str = "two-sided",
        n_max: int,
        c: float | None = None,
    ) -> None:
        self.n_sequences = check_positive_int(n_sequences, "n_sequences")
        self.alpha = check_alpha(alpha)
        self.alternative = check_alternative(alternative)
        self.n_max = check_positive_int(n_max, "n_max")
        if c is None:
            c = calibrate_lai_c(self.alpha, self.n_max, self.alternative)
        else:
            c = check_positive(c, "c")
        self.c = c
        self.sides = SIDES[self.alternative]
        #: ``boundary[m]``: smallest winning count that stops after ``m`` discordant pairs.
        self.boundary = lai_boundary(c, self.n_max)
        self.n = 0
        self.decision = np.zeros(self.n_sequences, dtype=np.int8)
        self.stopping_trial = np.zeros(self.n_sequences, dtype=np.int64)
        #: Discordant pairs so far, and how many of them B won, per sequence.
        self.discordant = np.zeros(self.n_sequences, dtype=np.int64)
        self.b_wins = np.zeros(self.n_sequences, dtype=np.int64)

    def update(self, scores_a: ArrayLike, scores_b: ArrayLike) -> None:
        """Feed trial ``n + 1`` (0/1 per sequence and policy); frozen after a decision."""
        trial = self.n + 1
        a = check_trial(scores_a, "scores_a", self.n_sequences, trial)
        b = check_trial(scores_b, "scores_b", self.n_sequences, trial)
        check_binary(a, "scores_a", method="Lai's test", trial=trial)
        check_binary(b, "scores_b", method="Lai's test", trial=trial)
        self.n = trial
        running = self.decision == Decision.CONTINUE
        if trial > self.n_max:
            return  # every sequence stopped at n_max
        moved = np.flatnonzero(running & (a != b))
        if moved.size:
            m = self.discordant[moved] + 1
            u = self.b_wins[moved] + (b[moved] > a[moved])
            self.discordant[moved] = m
            self.b_wins[moved] = u
            thr = self.boundary[m]
            decided = np.zeros(moved.size, dtype=np.int8)
            if 1 in self.sides:
                decided[u >= thr] = Decision.B_BETTER
            if -1 in self.sides:
                decided[(m - u) >= thr] = Decision.A_BETTER
            hit = decided != Decision.CONTINUE
            self.decision[moved[hit]] = decided[hit]
            self.stopping_trial[moved[hit]] = trial
        if trial == self.n_max:
            self.decision[self.decision == Decision.CONTINUE] = Decision.BUDGET_EXHAUSTED

    def pvalue(self) -> NDArray[np.float64]:
        """Not defined for Lai's test: NaN."""
        return np.full(self.n_sequences, np.nan)

    def evalue(self) -> NDArray[np.float64]:
        """Not defined for Lai's test: NaN."""
        return np.full(self.n_sequences, np.nan)


def lai_test(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    n_max: int,
    c: float | None = None,
) -> SequentialResult:
    """Run Lai's test over one recorded sequence of paired successes (0/1).

    Approximately valid only within the pre-declared ``n_max`` (see :class:`LaiProcess`).
    Data beyond ``n_max`` trials are not read.

    Returns
    -------
    SequentialResult
        ``BUDGET_EXHAUSTED`` when ``n_max`` trials pass without a decision; p-values and
        e-values are NaN.
    """
    process = LaiProcess(1, alpha=alpha, alternative=alternative, n_max=n_max, c=c)
    return run_sequence(process, scores_a, scores_b, alternative=alternative, n_max=n_max)
