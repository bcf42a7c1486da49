"""θ-SAVI: safe anytime-valid test for two Bernoulli success rates (Turner & Grünwald 2023; seed 000 Table I baseline)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._betting import BettingProcess, Lanes, Scores, check_trial
from .sequential import SequentialResult, run_sequence
from .validation import check_binary

__all__ = ["SaviProcess", "savi_test"]


class SaviProcess(BettingProcess):
    r"""θ-SAVI e-process for paired Bernoulli trials over ``R`` sequences.

    Parameters
    ----------
    n_sequences : int, optional
        Number ``R`` of independent paired sequences updated together.
    alpha : float, optional
        Family-wise Type-I error level in (0, 1).
    alternative : {'two-sided', 'greater', 'less'}, optional
        ``'greater'`` (B's success rate is higher) or ``'less'`` at level ``alpha``;
        ``'two-sided'``: two mirrored one-sided processes, each at ``alpha / 2``, so the
        probability of any false directional claim is at most ``alpha`` even when
        :math:`p_0 = p_1` (same convention as
        :class:`~evalstop_ros.stats.nscore.NScoreProcess`).

    See Also
    --------
    savi_test : run the test over one recorded sequence.

    Notes
    -----
    For the "greater" child (:math:`H_0: p_0 \ge p_1`), after :math:`n` pairs with
    :math:`S_i` successes the predictable plug-in estimates are the Beta(1, 2) and Beta(2, 1)
    posterior means

    .. math::

        \hat p_0 = \frac{S_0 + 1}{n + 3}, \qquad \hat p_1 = \frac{S_1 + 2}{n + 3}.

    If :math:`\hat p_0 < \hat p_1` the null point is the reverse-information projection
    :math:`\hat q_0 = \hat q_1 = (\hat p_0 + \hat p_1)/2` (the minimiser of
    :math:`KL(\hat p_0 \| q) + KL(\hat p_1 \| q)`; Turner & Grünwald Eq. 11, Thm. 2) and the
    next pair :math:`(x_0, x_1)` multiplies

    .. math::

        E_{n+1} = E_n \,
        \frac{\mathrm{Ber}(x_0; \hat p_0)\,\mathrm{Ber}(x_1; \hat p_1)}
             {\mathrm{Ber}(x_0; \hat q_0)\,\mathrm{Ber}(x_1; \hat q_1)};

    otherwise the factor is 1.  Computed in log space.  The sequence stops at the first
    :math:`E_n \ge 1/\alpha_{side}`, p-value :math:`\min(1, 1/\max_{m \le n} E_m)`.  The "less"
    child swaps the policies, hence the priors.

    Valid at any stopping time, no budget needed ("anytime-valid"); the price is power when
    the gap is small (seed 003 §V, Fig. 4).

    References
    ----------
    .. [1] Turner, R. J. and Grünwald, P. D. "Exact anytime-valid confidence intervals for
           contingency tables and beyond", Statistics & Probability Letters 198, 2023, §2.
    .. [2] Snyder, D. et al. (N-SCORE), seed 000, §VI-A and Table I (θ-SAVI baseline).

    Examples
    --------
    >>> from evalstop_ros.stats.savi import savi_test
    >>> res = savi_test([0, 0, 1, 0, 0, 1] * 10, [1, 1, 0, 1, 0, 1] * 10, alternative="greater")
    >>> res.decision.name, res.stopping_trial, round(res.pvalue, 4)
    ('B_BETTER', 38, 0.0397)
    """

    name = "savi"

    def __init__(self, n_sequences: int = 1, *, alpha: float = 0.05,
                 alternative: str = "two-sided") -> None:
        super().__init__(n_sequences, alpha, alternative)

    def _init_lanes(self, n_lanes: int) -> None:
        self._s0 = np.zeros(n_lanes)
        self._s1 = np.zeros(n_lanes)

    def _check_scores(self, values: ArrayLike, name: str, trial: int) -> NDArray[np.float64]:
        array = check_trial(values, name, self.n_sequences, trial)
        check_binary(array, name, method="θ-SAVI", trial=trial)
        return array

    def _log_factor(self, lanes: Lanes, r0: Scores, r1: Scores) -> Scores:
        denominator = self.n + 2.0  # n - 1 earlier pairs + 3 pseudo-observations
        p0 = (self._s0[lanes] + 1.0) / denominator
        p1 = (self._s1[lanes] + 2.0) / denominator
        q = 0.5 * (p0 + p1)
        bet = p0 < p1  # else the plug-in lies in the null: factor 1
        log_ratio = np.where(r0 == 1.0, np.log(p0 / q), np.log1p(-p0) - np.log1p(-q))
        log_ratio += np.where(r1 == 1.0, np.log(p1 / q), np.log1p(-p1) - np.log1p(-q))
        return np.where(bet, log_ratio, 0.0)

    def _learn(self, lanes: Lanes, r0: Scores, r1: Scores) -> None:
        self._s0[lanes] += r0
        self._s1[lanes] += r1


def savi_test(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    n_max: int | None = None,
) -> SequentialResult:
    """Run θ-SAVI over one recorded sequence of paired successes (0/1), in collection order.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (N,)
        Success (1) or failure (0) of policy A and policy B, paired trial by trial; any other
        value raises :class:`~evalstop_ros.stats.errors.StatsInputError` naming the trial.
    alpha, alternative :
        As in :class:`SaviProcess`.
    n_max : int, optional
        Trial budget; ``BUDGET_EXHAUSTED`` if it passes without a decision.

    Returns
    -------
    SequentialResult
    """
    process = SaviProcess(1, alpha=alpha, alternative=alternative)
    return run_sequence(process, scores_a, scores_b, alternative=alternative, n_max=n_max)
