"""Shared lanes of the betting e-process tests (N-SCORE, WSR, θ-SAVI); not public API.

Two-sided tests are two mirrored one-sided children at ``alpha / 2`` each (seed 000 §V-A, §VI-B);
details in docs/statistics.md.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError
from .levels import split_alpha
from .sequential import Decision
from .validation import check_alpha, check_alternative, check_positive_int, check_scores

#: Lanes an update touches: every lane (``slice(None)``) or an index array of running lanes.
Lanes = slice | NDArray[np.intp]
Scores = NDArray[np.float64]

#: Direction of each child: +1 tests "B better" on (a, b), -1 tests "A better" on (b, a).
SIDES: dict[str, tuple[int, ...]] = {"greater": (1,), "less": (-1,), "two-sided": (1, -1)}


def check_trial(values: ArrayLike, name: str, n_sequences: int, trial: int) -> NDArray[np.float64]:
    """Return one trial's scores of ``n_sequences`` sequences as a float ``(R,)`` array in [0, 1].

    The message of a bad value names the argument, the value, the 1-based trial and (for
    ``R > 1``) the 0-based sequence, e.g. "`scores_b` must lie in [0, 1]; found 1.2 at trial 7".
    """
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (n_sequences,):
        if array.size != n_sequences:
            raise StatsInputError(
                f"`{name}` must hold one score per sequence ({n_sequences}); "
                f"found shape {array.shape} at trial {trial}"
            )
        array = array.reshape(n_sequences)
    return check_scores(array, name, trial=trial)


class BettingProcess:
    """Vectorised one- or two-sided e-process over ``R`` sequences (the ``PairedProcess`` shape).

    Subclasses implement three hooks on *lanes* (an index array, or ``slice(None)`` when every
    lane is active) with ``r0``/``r1`` the pair as the child sees it:

    * ``_log_factor(lanes, r0, r1)``: ``log`` of this trial's multiplicative factor, computed
      from state built on *earlier* trials only (predictability, seed 000 App. A-B);
    * ``_learn(lanes, r0, r1)``: absorb the trial into the state and choose the next bet;
    * ``_init_lanes(n_lanes)``: allocate the state.
    """

    name = "betting"
    #: First trial at which a decision may be made (WSR: 3).
    min_decision_trial = 1

    def __init__(self, n_sequences: int, alpha: float, alternative: str) -> None:
        self.n_sequences = check_positive_int(n_sequences, "n_sequences")
        self.alpha = check_alpha(alpha)
        self.alternative = check_alternative(alternative)
        #: Directions of the children, +1 = "B better", -1 = "A better".
        self.sides = SIDES[alternative]
        #: Level of each one-sided child: ``alpha`` (one-sided) or ``alpha / 2`` (two-sided).
        self.alpha_side = split_alpha(self.alpha, len(self.sides))
        self._log_threshold = -math.log(self.alpha_side)
        self.n = 0
        self.decision = np.zeros(self.n_sequences, dtype=np.int8)
        self.stopping_trial = np.zeros(self.n_sequences, dtype=np.int64)
        n_lanes = len(self.sides) * self.n_sequences
        self._log_e = np.zeros(n_lanes)
        self._log_e_max = np.zeros(n_lanes)
        self._init_lanes(n_lanes)

    # -- hooks -------------------------------------------------------------------------------
    def _init_lanes(self, n_lanes: int) -> None:
        raise NotImplementedError

    def _log_factor(self, lanes: Lanes, r0: Scores, r1: Scores) -> Scores:
        raise NotImplementedError

    def _learn(self, lanes: Lanes, r0: Scores, r1: Scores) -> None:
        raise NotImplementedError

    def _check_scores(self, values: ArrayLike, name: str, trial: int) -> NDArray[np.float64]:
        return check_trial(values, name, self.n_sequences, trial)

    # -- protocol ----------------------------------------------------------------------------
    def update(self, scores_a: ArrayLike, scores_b: ArrayLike) -> None:
        """Feed trial ``n + 1``: one score per sequence for policy A and for policy B.

        Sequences that have already decided are frozen: their state, e-value and p-value no
        longer change (seed 000 Alg. 1 stops at the first crossing).
        """
        trial = self.n + 1
        a = self._check_scores(scores_a, "scores_a", trial)
        b = self._check_scores(scores_b, "scores_b", trial)
        self.n = trial
        active = self.decision == Decision.CONTINUE
        if len(self.sides) == 2:
            r0, r1 = np.concatenate((a, b)), np.concatenate((b, a))
            lane_active = np.concatenate((active, active))
        elif self.sides[0] == 1:
            r0, r1, lane_active = a, b, active
        else:
            r0, r1, lane_active = b, a, active
        lanes: Lanes
        if lane_active.all():
            lanes = slice(None)
        else:
            lanes = np.flatnonzero(lane_active)
            if lanes.size == 0:
                return
            r0, r1 = r0[lanes], r1[lanes]
        # seed 000 Alg. 1: X_n = a_{n-1} X_{n-1} with the bet chosen before this pair.
        log_e = self._log_e[lanes] + self._log_factor(lanes, r0, r1)
        self._log_e[lanes] = log_e
        log_e_max = np.maximum(self._log_e_max[lanes], log_e)
        self._log_e_max[lanes] = log_e_max
        if trial >= self.min_decision_trial:
            crossed = log_e_max >= self._log_threshold
            if crossed.any():
                lanes, r0, r1 = self._decide(lanes, crossed, r0, r1)
                if lanes.size == 0:
                    return
        self._learn(lanes, r0, r1)

    def _decide(self, lanes: Lanes, crossed: NDArray[np.bool_], r0: Scores, r1: Scores
                ) -> tuple[NDArray[np.intp], Scores, Scores]:
        """Record first crossings and return the lanes (and their pair) still running."""
        n_seq = self.n_sequences
        lane_ids = np.arange(self._log_e.size)[lanes]
        hit = lane_ids[crossed]
        # Both children of one sequence cannot cross on the same trial (the pair moves them in
        # opposite directions); should it ever happen, the larger running maximum wins.
        hit = hit[np.argsort(self._log_e_max[hit], kind="stable")]
        side = np.asarray(self.sides)[hit // n_seq]
        seq = hit % n_seq
        self.decision[seq] = np.where(side == 1, Decision.B_BETTER, Decision.A_BETTER)
        self.stopping_trial[seq] = self.n
        still = self.decision[lane_ids % n_seq] == Decision.CONTINUE
        return lane_ids[still], r0[still], r1[still]

    def _per_side(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        return values.reshape(len(self.sides), self.n_sequences)

    def pvalue(self) -> NDArray[np.float64]:
        """``(R,)`` anytime-valid p-values ``min(1, 1/max_{m<=n} X_m)`` (seed 000 App. C).

        Two-sided: ``min(1, 2 min(p_greater, p_less))``.  A sequence rejects exactly when its
        p-value is at most ``alpha``; after the decision the p-value is frozen.
        """
        best = self._per_side(self._log_e_max).max(axis=0)
        p: Scores = np.minimum(1.0, len(self.sides) * np.exp(-best))
        if self.n < self.min_decision_trial:
            p[:] = 1.0
        return p

    def evalue(self) -> NDArray[np.float64]:
        """``(R,)`` current e-values ``X_n`` (two-sided: the mean of the two children).

        The mean of two test supermartingales is a test supermartingale for ``mu_0 = mu_1``;
        decisions nevertheless use each child separately at ``alpha / 2``.
        """
        with np.errstate(over="ignore"):  # alpha < 1e-300 only
            e: Scores = self._per_side(np.exp(self._log_e)).mean(axis=0)
        return e

    def log_evalues(self) -> NDArray[np.float64]:
        """``(S, R)`` current ``log X_n`` of each child (rows in the order of :attr:`sides`)."""
        return self._per_side(self._log_e).copy()
