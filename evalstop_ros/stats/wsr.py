"""WSR: the Waudby-Smith–Ramdas betting confidence sequence as a paired test (seed 000 App. B, Alg. 2)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._betting import BettingProcess, Lanes, Scores
from .sequential import SequentialResult, run_sequence
from .validation import check_open_unit

__all__ = ["WsrProcess", "wsr_test"]


class WsrProcess(BettingProcess):
    r"""WSR betting test on paired differences over ``R`` sequences (seed 000 App. B, Alg. 2).

    Parameters
    ----------
    n_sequences : int, optional
        Number ``R`` of independent paired sequences updated together.
    alpha : float, optional
        Family-wise Type-I error level in (0, 1), with the same meaning as for
        :class:`~evalstop_ros.stats.nscore.NScoreProcess`:

        * ``'two-sided'``: each side (capital :math:`K^+` for "B better", :math:`K^-` for
          "A better") runs at ``alpha / 2`` and crosses at :math:`2/\alpha`.  This is exactly
          the paper's WSR comparison test at level ``alpha`` (the confidence sequence at
          level ``alpha`` with the :math:`\tfrac12\max(K^+, K^-) \ge 1/\alpha` rule), so the
          probability of any false directional claim is at most ``alpha``.
        * ``'greater'`` / ``'less'``: the single side runs at ``alpha`` and crosses at
          :math:`1/\alpha`; its bet uses :math:`\log(1/\alpha)`.  It is therefore the one side
          of the two-sided test at level ``2 alpha``: the paper's "one-sided" Table I runs (its
          WSR at 0.05) correspond to ``alternative='greater', alpha=0.025`` here.
    alternative : {'two-sided', 'greater', 'less'}, optional
        Direction, as in :class:`~evalstop_ros.stats.nscore.NScoreProcess`.
    c : float, optional
        Cap on the bet in (0, 1) (Alg. 2 line 5; 0.95 in Table I, 0.75 and 0.5 in the RL
        scripts).

    See Also
    --------
    wsr_test : run the test over one recorded sequence.
    evalstop_ros.stats.nscore.NScoreProcess : N-SCORE, whose bet is tuned to the comparison.

    Notes
    -----
    With :math:`Y_t = (d_t + 1)/2 \in [0, 1]`, :math:`d_t = r_{1,t} - r_{0,t}`,

    .. math::

        \hat\mu_t = \frac{1/2 + \sum_{s \le t} Y_s}{t + 1}, \qquad
        \hat\sigma_t^2 = \frac{1/4 + \sum_{s \le t} (Y_s - \hat\mu_s)^2}{t + 1}, \qquad
        \lambda_t = \sqrt{\frac{2 \log(1/\alpha_{side})}{t \log(1 + t)\, \hat\sigma_{t-1}^2}},

    (Alg. 2 lines 9-11; line 11 prints a product inside the root, a typo: the reference code
    divides, as here; :math:`\hat\sigma_0^2 = 1/4`, and :math:`\log(1/\alpha_{side}) =
    \log(2/\alpha)` in the two-sided case).  At the candidate mean :math:`m = 1/2`
    (no difference) lines 13-14 become

    .. math::

        K_t^{\pm} = \prod_{s \le t} \bigl(1 \pm \xi^W_s d_s\bigr), \qquad
        \xi^W_s = \min(\lambda_s / 2,\; c),

    the same betting form as N-SCORE with a sign-blind bet.  A side decides at the first
    :math:`t \ge 3` with :math:`\max_{s \le t} K_s^{\pm} \ge 1/\alpha_{side}` (the reference
    returns the trivial interval for :math:`t \le 2`); the p-value is
    :math:`\min(1, 1/\max_s K_s^+)` one-sided and :math:`\min(1, 2/\max_s \max(K_s^+, K_s^-))`
    two-sided (1 before trial 3).

    References
    ----------
    .. [1] Snyder, D. et al. (N-SCORE), seed 000, App. B, Alg. 2.
    .. [2] Waudby-Smith, I. and Ramdas, A. "Estimating means of bounded random variables by
           betting", JRSS-B 86(1), 2024 (the hedged capital process and predictable plug-in).

    Examples
    --------
    >>> import numpy as np
    >>> from evalstop_ros.stats.wsr import WsrProcess
    >>> proc = WsrProcess()  # two-sided at 0.05: the paper's WSR test
    >>> for _ in range(6):
    ...     proc.update(np.array([0.0]), np.array([1.0]))
    >>> int(proc.decision[0]), int(proc.stopping_trial[0])
    (1, 6)
    """

    name = "wsr"
    min_decision_trial = 3

    def __init__(
        self,
        n_sequences: int = 1,
        *,
        alpha: float = 0.05,
        alternative: str = "two-sided",
        c: float = 0.95,
    ) -> None:
        self.c = check_open_unit(c, "c")
        super().__init__(n_sequences, alpha, alternative)
        self._log_term = 2.0 * math.log(1.0 / self.alpha_side)
        self._xi[:] = self._bet(1, np.full(self._xi.size, 0.25))

    def _init_lanes(self, n_lanes: int) -> None:
        self._xi = np.zeros(n_lanes)
        self._sum_y = np.zeros(n_lanes)
        self._sum_sq = np.zeros(n_lanes)

    def _bet(self, t: int, variance: NDArray[np.float64]) -> NDArray[np.float64]:
        # Alg. 2 line 11 (with the division): lambda_t from sigma^2_{t-1}; xi^W = min(lambda/2, c).
        lam = np.sqrt(self._log_term / (t * math.log1p(t) * variance))
        return np.minimum(0.5 * lam, self.c)

    def _log_factor(self, lanes: Lanes, r0: Scores, r1: Scores) -> Scores:
        # K^+ at m = 1/2: 1 + min(lambda, c/m)(Y - m) = 1 + xi^W d.
        return np.log1p(self._xi[lanes] * (r1 - r0))

    def _learn(self, lanes: Lanes, r0: Scores, r1: Scores) -> None:
        t = self.n
        y = 0.5 * (r1 - r0 + 1.0)
        sum_y = self._sum_y[lanes] + y
        mean = (0.5 + sum_y) / (t + 1)  # Alg. 2 line 9: mu_t includes Y_t
        sum_sq = self._sum_sq[lanes] + (y - mean) ** 2
        self._sum_y[lanes] = sum_y
        self._sum_sq[lanes] = sum_sq
        variance = (0.25 + sum_sq) / (t + 1)  # line 10, sigma^2_t
        self._xi[lanes] = self._bet(t + 1, variance)

    @property
    def xi(self) -> NDArray[np.float64]:
        """``(S, R)`` bets :math:`\\xi^W` that the *next* trial will use."""
        return self._per_side(self._xi).copy()


def wsr_test(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    c: float = 0.95,
    n_max: int | None = None,
) -> SequentialResult:
    r"""Run the WSR comparison test over one recorded paired sequence, in collection order.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (N,)
        Scores in [0, 1] of policy A (baseline) and policy B (candidate), paired by trial.
    alpha, alternative, c :
        As in :class:`WsrProcess` (two-sided at ``alpha`` = the paper's WSR at ``alpha``).
    n_max : int, optional
        Trial budget; ``BUDGET_EXHAUSTED`` if it passes without a decision.  The test is
        anytime-valid, so the guarantee does not depend on it.

    Returns
    -------
    SequentialResult

    Examples
    --------
    >>> from evalstop_ros.stats.wsr import wsr_test
    >>> res = wsr_test([0, 0, 1, 0, 0, 1] * 20, [1, 1, 0, 1, 0, 1] * 20)
    >>> res.decision.name, res.stopping_trial
    ('B_BETTER', 80)
    """
    process = WsrProcess(1, alpha=alpha, alternative=alternative, c=c)
    return run_sequence(process, scores_a, scores_b, alternative=alternative, n_max=n_max)
