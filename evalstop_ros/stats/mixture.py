r"""Mixture e-process: a paired comparison of bounded scores by a prior over constant bets (seed 000 Eq. 3, Lemma 1).

Design and validity in docs/hub.md ("The pairs' test").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._betting import BettingProcess, Lanes, Scores
from .sequential import SequentialResult, run_sequence

__all__ = ["CONCENTRATION", "GRID", "MixtureProcess", "mixture_bets", "mixture_test"]

#: Constant bets of the mixture: the midpoints ``(k + 1/2) / G`` of ``[0, 1)``.
GRID = 64
#: Prior on the discordant pairs' win probability ``q = (1 + lambda) / 2``: Beta(c, c) on
#: ``q >= 1/2`` (chosen on the hub's gaps of 0.15 at its first Holm level ``alpha / 30``; docs/hub.md).
CONCENTRATION = 4.0


def mixture_bets(grid: int = GRID, concentration: float = CONCENTRATION) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The mixture's constant bets and their prior weights (summing to 1).

    The weight of bet :math:`\\lambda` is proportional to :math:`(1 - \\lambda^2)^{c - 1}`, the
    Beta(c, c) density of :math:`q = (1 + \\lambda)/2` restricted to :math:`q \\ge 1/2`.

    >>> bets, weights = mixture_bets(4, 1.0)
    >>> bets.tolist(), weights.tolist()
    ([0.125, 0.375, 0.625, 0.875], [0.25, 0.25, 0.25, 0.25])
    """
    bets = (np.arange(grid) + 0.5) / grid
    weights = (1.0 - bets**2) ** (concentration - 1.0)
    return bets, weights / weights.sum()


class MixtureProcess(BettingProcess):
    r"""Mixture e-process over ``R`` paired sequences of scores in [0, 1].

    Parameters
    ----------
    n_sequences : int, optional
        Number ``R`` of independent paired sequences updated together (1 for online use).
    alpha : float, optional
        Type-I error level in (0, 1).
    alternative : {'two-sided', 'greater', 'less'}, optional
        As in :class:`~evalstop_ros.stats.nscore.NScoreProcess`: ``'two-sided'`` runs two
        mirrored one-sided processes, each at ``alpha / 2``.

    Notes
    -----
    With :math:`d_n = r_{1,n} - r_{0,n} \in [-1, 1]`, bets :math:`\lambda_k` and prior weights
    :math:`w_k` (:func:`mixture_bets`),

    .. math::

        X_n = \sum_k w_k \prod_{m=1}^{n} (1 + \lambda_k d_m)
            = \prod_{m=1}^{n} (1 + \bar\lambda_m d_m), \qquad
        \bar\lambda_m = \frac{\sum_k w_k \lambda_k \prod_{m' < m}(1 + \lambda_k d_{m'})}
                             {\sum_k w_k \prod_{m' < m}(1 + \lambda_k d_{m'})},

    so the mixture is a betting process whose bet :math:`\bar\lambda_m` (the posterior mean of
    the bets) depends on earlier pairs only.  For 0/1 scores :math:`d_m \in \{-1, 0, 1\}` and
    :math:`X_n = \sum_k w_k (2 q_k)^{n_+} (2 - 2 q_k)^{n_-}` with :math:`q_k = (1+\lambda_k)/2`
    and :math:`n_\pm` the discordant pairs won by each policy: a beta-binomial mixture of the
    sign test's likelihood ratios, a function of :math:`(n_+, n_-)` only.  Each product is a
    nonnegative supermartingale under :math:`H_0` (:math:`E[1 + \lambda d_m] \le 1` for
    :math:`\lambda \ge 0`), so :math:`P(\exists n: X_n \ge 1/\alpha) \le \alpha` (Ville).  The
    p-value is :math:`\min(1, 1/\max_{m \le n} X_m)`.

    References
    ----------
    .. [1] Snyder, D. et al. (N-SCORE), seed 000: Eq. (3), Lemma 1, Theorem 1 (Ville).
    .. [2] Robbins, H. "Statistical methods related to the law of the iterated logarithm".
           *Ann. Math. Statist.* 41(5), 1970 (mixture martingales).
    .. [3] Waudby-Smith, I. and Ramdas, A. "Estimating means of bounded random variables by
           betting". *JRSS-B* 86(1), 2024, §5 (mixtures of constant bets).

    Examples
    --------
    >>> proc = MixtureProcess(alpha=0.05, alternative="greater")
    >>> for _ in range(12):
    ...     proc.update(np.array([0.0]), np.array([1.0]))
    >>> int(proc.decision[0]), int(proc.stopping_trial[0]), round(float(proc.pvalue()[0]), 4)
    (1, 10, 0.0334)
    """

    name = "mixture"

    def __init__(self, n_sequences: int = 1, *, alpha: float = 0.05, alternative: str = "two-sided") -> None:
        bets, weights = mixture_bets()
        self._bets, self._log_prior = bets, np.log(weights)
        super().__init__(n_sequences, alpha, alternative)

    def _init_lanes(self, n_lanes: int) -> None:
        self._log_wealth = np.tile(self._log_prior, (n_lanes, 1))  # log w_k + log prod (1 + lambda_k d)
        self._bet = np.full(n_lanes, float(np.exp(self._log_prior) @ self._bets))

    def _log_factor(self, lanes: Lanes, r0: Scores, r1: Scores) -> Scores:
        # The mixture's ratio X_n / X_{n-1}: its bet was fixed by the pairs before this one.
        return np.log1p(self._bet[lanes] * (r1 - r0))

    def _learn(self, lanes: Lanes, r0: Scores, r1: Scores) -> None:
        log_wealth = self._log_wealth[lanes] + np.log1p(np.outer(r1 - r0, self._bets))
        self._log_wealth[lanes] = log_wealth
        posterior = np.exp(log_wealth - log_wealth.max(axis=1, keepdims=True))
        self._bet[lanes] = (posterior @ self._bets) / posterior.sum(axis=1)


def mixture_test(scores_a: ArrayLike, scores_b: ArrayLike, *, alpha: float = 0.05, alternative: str = "two-sided",
                 n_max: int | None = None) -> SequentialResult:
    """:class:`MixtureProcess` over one recorded sequence of paired scores in [0, 1] (A, then B),
    in collection order, stopped at its first decision or after ``n_max`` pairs (``BUDGET_EXHAUSTED``).

    >>> res = mixture_test([0] * 20, [1] * 20, alpha=0.05)  # each side at 0.025
    >>> res.decision.name, res.stopping_trial
    ('B_BETTER', 11)
    """
    process = MixtureProcess(1, alpha=alpha, alternative=alternative)
    return run_sequence(process, scores_a, scores_b, alternative=alternative, n_max=n_max)
