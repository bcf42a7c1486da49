"""N-SCORE: anytime-valid paired comparison of bounded scores by betting (seed 000 Alg. 1, Theorem 1).

Scores are normalised to [0, 1] with bounds fixed before the data (seed 000 footnote 2).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._betting import BettingProcess, Lanes, Scores
from .errors import StatsInputError
from .sequential import Decision, SequentialResult
from .validation import check_open_unit, check_pairs, check_positive_int

__all__ = ["NScoreProcess", "nscore_test"]

#: Tolerance of the bin edges, ``bin(x) = max{k : c_k <= x + 1e-9}`` (seed 000 App. A-C).
BIN_TOLERANCE = 1e-9
#: Newton/bisection stops when a step is below this (in units of xi).
_ROOT_TOL = 1e-13
_ROOT_MAX_ITER = 100
#: A Newton step this small leaves an error of order its square (below 1e-15).
_NEWTON_TOL = 1e-9
#: First block of trials a recorded sequence is replayed in (:func:`nscore_test`); blocks double
#: up to ``_REPLAY_BLOCK_MAX`` so an early stop costs little and memory stays bounded.
_REPLAY_BLOCK = 64
_REPLAY_BLOCK_MAX = 8192


def _check_bins(bins: int) -> int:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 2:
        raise StatsInputError(f"`bins` must be an integer >= 2; found {bins!r}")
    return int(bins)


class NScoreProcess(BettingProcess):
    r"""N-SCORE e-process over ``R`` paired sequences (seed 000, Alg. 1).

    Parameters
    ----------
    n_sequences : int, optional
        Number ``R`` of independent paired sequences updated together (1 for online use).
    alpha : float, optional
        Family-wise Type-I error level in (0, 1).
    alternative : {'two-sided', 'greater', 'less'}, optional
        ``'greater'``: policy B (candidate, :math:`\pi_1`) has the larger mean, tested at level
        ``alpha``.  ``'less'``: policy A has the larger mean, at level ``alpha``.
        ``'two-sided'``: two mirrored one-sided processes, **each at** ``alpha / 2``, so the
        probability of any false directional claim is at most ``alpha`` even at an exact tie
        :math:`\mu_0 = \mu_1` (the [ref-code] default "comparison" mode runs each child at
        ``alpha`` and can err with probability up to ``2 alpha`` at a tie).
    bins : int, optional
        Number ``K >= 2`` of score levels :math:`c_k = k/(K-1)` used to *choose* the bet.
        ``K = 2`` is the binary test (Table II's N-SCORE_2).  In seed 000 Table I the
        Bernoulli columns N-SCORE_2 and N-SCORE_inf are ``K = 3`` and ``K = 10``, and the
        nonparametric N-SCORE_inf is ``K = 21`` (seed 000 App. A-C, Remark 1).
    xi_max : float, optional
        Cap of the bet, ``0 < xi_max < 1`` (0.995 = the top of the reference grid).
    grid : int or None, optional
        ``None`` (default): the exact maximiser of the plug-in objective (root of its
        derivative), capped at ``xi_max``.  ``G``: maximise instead over the midpoint grid
        :math:`(m + 1/2)/G`, ``m = 0..G-1``, keeping the first (smallest) argmax; ``G = 100``
        mimics the reference continuous test and ``G = 500`` its partial-credit test: same
        decisions, p-values equal to ~1e-15 (we accumulate ``log X_n``, it multiplies ``X_n``),
        except after exactly tied empirical means, where the reference bets on a floating-point
        tie (p-values then differ by up to ~1e-3) and evalstop, checking the gate on integer bin
        sums, correctly bets 0.  ``xi_max`` is ignored with a grid.

    Attributes
    ----------
    n : int
        Trials fed so far.
    decision : ndarray of int8, shape (R,)
        :class:`~evalstop_ros.stats.sequential.Decision` values.
    stopping_trial : ndarray of int64, shape (R,)
        1-based trial of the decision, 0 while undecided.
    sides : tuple of int
        Directions of the children: ``+1`` tests "B better", ``-1`` "A better".
    alpha_side : float
        Level of each child (``alpha`` or ``alpha / 2``).

    See Also
    --------
    nscore_test : run the test over one recorded sequence.
    evalstop_ros.stats.wsr.WsrProcess : the WSR baseline, also a betting e-process.

    Notes
    -----
    **E-process** (seed 000 Eq. 3, Alg. 1).  With :math:`d_n = r_{1,n} - r_{0,n}` and
    :math:`X_0 = 1`,

    .. math::

        X_n = \prod_{m=1}^{n} \bigl(1 + \xi_m d_m\bigr), \qquad
        \xi_m = g(\mathcal{F}_{m-1}) \in [0, \xi_{\max}],

    computed as :math:`\log X_n` with ``log1p``.  The raw scores enter the factor; binning only
    shapes :math:`\xi` (seed 000 App. A-C: "the exact ... evaluation scores must be used").
    The sequence stops at the first :math:`n` with :math:`X_n \ge 1/\alpha_{side}` and the
    anytime p-value is :math:`p_n = \min(1, 1/\max_{m \le n} X_m)`.

    **Bet** (App. A-C, Remark 1, Eq. 21).  Scores are binned by
    :math:`b(x) = \lfloor (K-1)(x + 10^{-9}) \rfloor`; after :math:`n` pairs with bin counts
    :math:`n_{i,k}` the Dirichlet posterior means are
    :math:`\hat p_{i,k} = (n_{i,k} + 2/K)/(n + 2)` and :math:`\hat P = \hat p_0 \hat p_1^T`.
    The objective of App. A-C (4) equals the plug-in Kelly growth rate

    .. math::

        f(\xi) = \sum_{i,j} \hat P_{ij} \log\bigl(1 + \xi (c_j - c_i)\bigr)
               = \sum_{\delta} Q(\delta) \log(1 + \xi\delta),

    with :math:`Q` the cross-correlation of :math:`\hat p_0` and :math:`\hat p_1` on the
    :math:`2K-1` differences :math:`\delta = (j-i)/(K-1)`.  :math:`f` is strictly concave and
    :math:`f'(0) = \hat\mu_1 - \hat\mu_0`, so :math:`\xi = 0` whenever
    :math:`\hat\mu_1 \le \hat\mu_0` (checked exactly on the integer bin sums) and otherwise
    :math:`\xi` is the unique root of :math:`f'(\xi) = \sum_\delta Q(\delta)\,\delta/(1+\xi\delta)`
    in :math:`(0, \xi_{\max})` (safeguarded Newton, warm-started at the previous bet), or
    :math:`\xi_{\max}` if :math:`f'(\xi_{\max}) \ge 0`.  For ``K = 2`` the root has the closed
    form :math:`\xi^* = (P^+ - P^-)/(P^+ + P^-)` with :math:`P^+ = \hat p_{0,0}\hat p_{1,1}`,
    :math:`P^- = \hat p_{0,1}\hat p_{1,0}`.  The counts are updated *after* the factor of the
    trial is applied, so :math:`\xi_n` depends on pairs :math:`1..n-1` only; :math:`\xi_1 = 0`.

    **Partial credit.**  Scores that already lie on the ``K``-level grid :math:`k/(K-1)` (e.g.
    rubric stages 0..K-1 divided by K-1) are the paper's partial-credit setting with exact
    outcome model: run with ``bins=K`` (the :math:`10^{-9}` tolerance maps ``0.3`` to level 3
    of 11).  Add ``grid=500`` to mimic the reference partial-credit class.

    **Two-sided.**  The "less" child is the same process fed :math:`(r_1, r_0)`; each child
    runs at :math:`\alpha/2` and the p-value is :math:`\min(1, 2\min(p_>, p_<))`.  Both children
    cannot cross on the same trial.

    References
    ----------
    .. [1] Snyder, D. et al. "Beyond Binary Success: Sample-Efficient and Statistically Rigorous
           Robot Policy Comparison" (N-SCORE), seed 000: Eq. (3), Alg. 1, Lemma 1, Theorem 1,
           App. A-C Eqs. (11)-(21) and Remark 1.
    .. [2] Ville, J. "Étude critique de la notion de collectif" (1939); seed 000 Eq. (10).

    Examples
    --------
    >>> import numpy as np
    >>> from evalstop_ros.stats.nscore import NScoreProcess
    >>> proc = NScoreProcess(alternative="greater")
    >>> for _ in range(6):
    ...     proc.update(np.array([0.0]), np.array([1.0]))
    >>> int(proc.decision[0]), int(proc.stopping_trial[0])
    (1, 6)
    >>> round(float(proc.pvalue()[0]), 4)
    0.0493
    """

    name = "nscore"

    def __init__(
        self,
        n_sequences: int = 1,
        *,
        alpha: float = 0.05,
        alternative: str = "two-sided",
        bins: int = 2,
        xi_max: float = 0.995,
        grid: int | None = None,
    ) -> None:
        self.bins = _check_bins(bins)
        self.xi_max = check_open_unit(xi_max, "xi_max")
        self.grid = None if grid is None else check_positive_int(grid, "grid")
        super().__init__(n_sequences, alpha, alternative)

    # -- state -------------------------------------------------------------------------------
    def _init_lanes(self, n_lanes: int) -> None:
        k = self.bins
        self._xi = np.zeros(n_lanes)
        self._closed_form = k == 2 and self.grid is None
        if self._closed_form:
            # Bin-1 counts of r0 and r1 (the pair count n is shared by all running lanes).
            self._s0 = np.zeros(n_lanes)
            self._s1 = np.zeros(n_lanes)
            return
        prior = 2.0 / k
        width = 3 * k - 2  # K - 1 zeros | K pseudo-counts | K - 1 zeros
        self._w0 = np.zeros((n_lanes, width))
        self._w0[:, k - 1 : 2 * k - 1] = prior
        self._w1 = self._w0.copy()
        self._w0_flat = self._w0.reshape(-1)
        self._w1_flat = self._w1.reshape(-1)
        offsets = np.arange(-(k - 1), k)
        # Q(delta) up to the factor (n + 2)^2, which changes neither the root nor the argmax.
        self._q = np.tile((k - np.abs(offsets)) * prior * prior, (n_lanes, 1))
        self._offsets = np.arange(2 * k - 1)
        self._delta = offsets / (k - 1)
        self._gate = np.zeros(n_lanes, dtype=np.int64)  # sum of bin indices, r1 minus r0
        self._row_start = np.arange(n_lanes) * width
        if self.grid is not None:
            self._grid_values = (np.arange(self.grid) + 0.5) / self.grid
            self._grid_logs = np.log1p(np.outer(self._delta, self._grid_values))

    def _bin(self, x: NDArray[np.float64]) -> NDArray[np.intp]:
        # seed 000 Eq. (11) generalised: bin(x) = max{k : k/(K-1) <= x + 1e-9} = floor.
        k = self.bins - 1
        return np.minimum((k * (x + BIN_TOLERANCE)).astype(np.intp), k)

    # -- hooks -------------------------------------------------------------------------------
    def _log_factor(self, lanes: Lanes, r0: Scores, r1: Scores) -> Scores:
        # seed 000 Alg. 1: a_{n-1} = 1 + xi_{n-1} (r_{1,n} - r_{0,n}) with the raw scores.
        return np.log1p(self._xi[lanes] * (r1 - r0))

    def _learn(self, lanes: Lanes, r0: Scores, r1: Scores) -> None:
        # Pitfall 1: the counts absorb pair n only after X_n; the new bet serves pair n + 1.
        k0, k1 = self._bin(r0), self._bin(r1)
        if self._closed_form:
            s0 = self._s0[lanes] + k0
            s1 = self._s1[lanes] + k1
            self._s0[lanes] = s0
            self._s1[lanes] = s1
            n = self.n
            p_plus = (n - s0 + 1.0) * (s1 + 1.0)  # p0[0] p1[1], both up to (n + 2)
            p_minus = (s0 + 1.0) * (n - s1 + 1.0)  # p0[1] p1[0]
            xi = (p_plus - p_minus) / (p_plus + p_minus)
            self._xi[lanes] = np.clip(xi, 0.0, self.xi_max)
            return
        k = self.bins
        start = self._row_start[lanes]
        # Q <- (w0 + e_k0) * (w1 + e_k1) incrementally (cross-correlation, O(K) per lane):
        # Q[d] += w1[k0 + d], then Q[d] += w0_new[k1 - d].
        q = self._q[lanes] + self._w1_flat[(start + k0)[:, None] + self._offsets]
        self._w0_flat[start + (k - 1) + k0] += 1.0
        q += self._w0_flat[(start + (2 * k - 2) + k1)[:, None] - self._offsets]
        self._w1_flat[start + (k - 1) + k1] += 1.0
        self._q[lanes] = q
        gate = self._gate[lanes] + (k1 - k0)
        self._gate[lanes] = gate
        self._xi[lanes] = self._choose(q, gate > 0, self._xi[lanes])

    # -- bet ---------------------------------------------------------------------------------
    def _choose(self, q: NDArray[np.float64], gate: NDArray[np.bool_],
                previous: NDArray[np.float64]) -> NDArray[np.float64]:
        """Maximise f on the lanes passing the gate (App. A-C (4)); 0 elsewhere."""
        xi = np.zeros(q.shape[0])
        if not gate.any():
            return xi
        idx = np.flatnonzero(gate)
        qg = q[idx]
        if self.grid is not None:
            # [ref-code] convention: first argmax of f over the midpoint grid.
            xi[idx] = self._grid_values[np.argmax(qg @ self._grid_logs, axis=1)]
        elif idx.size == 1:
            xi[idx] = self._root_one(qg[0] * self._delta, float(previous[idx[0]]))
        else:
            xi[idx] = self._root(qg * self._delta, previous[idx])
        return xi

    def _root(self, qd: NDArray[np.float64], start: NDArray[np.float64]) -> NDArray[np.float64]:
        """Root of f'(xi) = sum Q delta / (1 + xi delta) in (0, xi_max], ``qd = Q * delta``.

        Vectorised safeguarded Newton: each lane keeps a bracket [lo, hi] with f'(lo) > 0 >
        f'(hi) and bisects whenever the Newton step leaves it.
        """
        delta = self._delta
        hi_cap = self.xi_max
        x = np.full(qd.shape[0], hi_cap)
        g_cap = (qd / (1.0 + hi_cap * delta)).sum(axis=1)
        open_ = g_cap < 0.0  # otherwise f is still increasing at the cap: xi = xi_max
        if not open_.any():
            return x
        qd = qd[open_]
        qdd = qd * delta
        lo = np.zeros(qd.shape[0])
        hi = np.full(qd.shape[0], hi_cap)
        y = np.clip(start[open_], 0.0, hi_cap)
        for _ in range(_ROOT_MAX_ITER):
            inv = 1.0 / (1.0 + np.multiply.outer(y, delta))
            g = (qd * inv).sum(axis=1)  # f'(y)
            curvature = (qdd * (inv * inv)).sum(axis=1)  # -f''(y) > 0
            lo = np.where(g > 0.0, y, lo)
            hi = np.where(g < 0.0, y, hi)
            new = y + g / curvature  # Newton step on f'
            outside = (new < lo) | (new > hi)
            bisected = bool(outside.any())
            if bisected:
                new = np.where(outside, 0.5 * (lo + hi), new)
            step = float(np.abs(new - y).max())
            y = new
            # Quadratic convergence: after a pure Newton step of size s the error is O(s^2).
            if step <= _ROOT_TOL or (step <= _NEWTON_TOL and not bisected):
                break
        x[open_] = y
        return x

    def _root_one(self, qd: NDArray[np.float64], start: float) -> float:
        """:meth:`_root` for one lane with scalar bracket logic (the online ``R = 1`` case)."""
        delta = self._delta
        hi = self.xi_max
        if float(qd @ (1.0 / (1.0 + hi * delta))) >= 0.0:
            return hi
        qdd = qd * delta
        lo = 0.0
        y = min(max(start, 0.0), hi)
        for _ in range(_ROOT_MAX_ITER):
            inv = 1.0 / (1.0 + y * delta)
            g = float(qd @ inv)
            if g > 0.0:
                lo = y
            elif g < 0.0:
                hi = y
            else:
                return y
            new = y + g / float(qdd @ (inv * inv))
            bisected = not lo <= new <= hi
            if bisected:
                new = 0.5 * (lo + hi)
            step = abs(new - y)
            y = new
            if step <= _ROOT_TOL or (step <= _NEWTON_TOL and not bisected):
                break
        return y

    @property
    def xi(self) -> NDArray[np.float64]:
        """``(S, R)`` bets that the *next* trial will use (rows in the order of :attr:`sides`)."""
        return self._per_side(self._xi).copy()


def nscore_test(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    bins: int = 2,
    xi_max: float = 0.995,
    grid: int | None = None,
    n_max: int | None = None,
) -> SequentialResult:
    r"""Run N-SCORE over one recorded paired sequence, in collection order.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (N,)
        Scores in [0, 1] of policy A (baseline, :math:`\pi_0`) and policy B (candidate,
        :math:`\pi_1`), paired trial by trial.
    alpha, alternative, bins, xi_max, grid :
        As in :class:`NScoreProcess`.
    n_max : int, optional
        Trial budget.  If it passes without a decision the result is ``BUDGET_EXHAUSTED``.
        The guarantee does not depend on it (anytime-valid): stopping or continuing for any
        reason stays valid.

    Returns
    -------
    SequentialResult
        Decision, stopping trial and the p-value/e-value trajectories up to the decision.

    Notes
    -----
    Stops at the first :math:`n` with :math:`X_n \ge 1/\alpha` (one-sided) or
    :math:`\max(X_n^>, X_n^<) \ge 2/\alpha` (two-sided); see :class:`NScoreProcess` and seed 000
    Alg. 1.

    Examples
    --------
    >>> from evalstop_ros.stats.nscore import nscore_test
    >>> res = nscore_test([0] * 10, [1] * 10)  # two-sided: each side at alpha / 2
    >>> res.decision.name, res.stopping_trial, round(res.pvalue, 4)
    ('B_BETTER', 8, 0.0255)
    """
    process = NScoreProcess(1, alpha=alpha, alternative=alternative, bins=bins, xi_max=xi_max, grid=grid)
    a, b = check_pairs(scores_a, scores_b)
    if a.ndim != 1:
        raise StatsInputError(f"`scores_a` must be one-dimensional; found shape {a.shape}")
    limit = a.size if n_max is None else min(a.size, check_positive_int(n_max, "n_max"))
    children = [_Replay(process, *((a, b) if side == 1 else (b, a))) for side in process.sides]
    log_threshold = process._log_threshold  # the online process's own threshold, -log(alpha_side)
    best_parts, e_parts = [], []
    start, block, stop, decision = 0, _REPLAY_BLOCK, 0, Decision.CONTINUE
    while start < limit and not stop:
        end = min(limit, start + block)
        paths = [child.advance(end) for child in children]  # (log X_n, running max) per child
        best = np.max([running for _, running in paths], axis=0)
        crossed = [np.flatnonzero(running >= log_threshold) for _, running in paths]
        first = [int(c[0]) if c.size else end - start for c in crossed]
        cut = min(first)
        if cut < end - start:  # the first crossing; on a (never seen) same-trial tie the larger max wins
            stop = start + cut + 1
            side = max((i for i in range(len(paths)) if first[i] == cut), key=lambda i: paths[i][1][cut])
            decision = Decision.B_BETTER if process.sides[side] == 1 else Decision.A_BETTER
            end = stop
        best_parts.append(best[: end - start])
        with np.errstate(over="ignore"):  # alpha < 1e-300 only
            e_parts.append(np.mean([np.exp(log_e[: end - start]) for log_e, _ in paths], axis=0))
        start, block = end, min(2 * block, _REPLAY_BLOCK_MAX)
    n_observed = stop or start
    pvalues = np.minimum(1.0, len(process.sides) * np.exp(-np.concatenate(best_parts or [np.zeros(0)])))
    if decision == Decision.CONTINUE and n_max is not None and n_observed >= n_max:
        decision = Decision.BUDGET_EXHAUSTED
    return SequentialResult(
        method=process.name, alpha=process.alpha, alternative=alternative, decision=decision,
        stopping_trial=stop or None, n_observed=n_observed, pvalues=pvalues,
        evalues=np.concatenate(e_parts or [np.zeros(0)]),
    )


class _Replay:
    """One one-sided child of :class:`NScoreProcess` replayed over a whole recorded sequence.

    The analysis path (``evalstop analyze``, :func:`nscore_test`) knows every pair up front, so
    instead of one :meth:`NScoreProcess.update` per pair it evaluates the same recursion a block
    of trials at a time: bin counts and the cross-correlation ``Q`` by cumulative sums (in the
    process's own order of floating-point additions, so they are bit-identical), every bet of
    the block by the process's own root search warm-started at the previous bet (a grid bet by
    one matrix product per block), and ``log X_n`` by a cumulative sum of the factors of seed
    000 Alg. 1.  The e-values, p-values and decisions are therefore those of the online process
    -- bit for bit with the exact root (tested), to the last digit of a BLAS product with a grid.
    """

    def __init__(self, process: NScoreProcess, r0: Scores, r1: Scores) -> None:
        self.process, self.r0, self.r1 = process, r0, r1
        self.n = 0
        self.xi = 0.0  # the bet for the next pair (xi_1 = 0)
        self.log_e = 0.0
        self.log_e_max = 0.0
        k = process.bins
        self.gate = 0
        if not process._closed_form:
            prior = 2.0 / k
            self.w0 = np.zeros(3 * k - 2)
            self.w0[k - 1 : 2 * k - 1] = prior
            self.w1 = self.w0.copy()
            offsets = np.arange(-(k - 1), k)
            self.q = (k - np.abs(offsets)) * prior * prior
        else:
            self.s0 = self.s1 = 0.0

    def advance(self, end: int) -> tuple[Scores, Scores]:
        """Feed pairs ``n + 1..end``; return ``log X`` and its running maximum after each."""
        proc = self.process
        r0, r1 = self.r0[self.n : end], self.r1[self.n : end]
        k0, k1 = proc._bin(r0), proc._bin(r1)
        if proc._closed_form:  # xi[i] = the bet chosen after pair n + i + 1
            s0 = np.add.accumulate(np.concatenate(([self.s0], k0.astype(np.float64))))[1:]
            s1 = np.add.accumulate(np.concatenate(([self.s1], k1.astype(np.float64))))[1:]
            self.s0, self.s1 = float(s0[-1]), float(s1[-1])
            n = np.arange(self.n + 1, end + 1, dtype=np.float64)
            p_plus = (n - s0 + 1.0) * (s1 + 1.0)
            p_minus = (s0 + 1.0) * (n - s1 + 1.0)
            xi = np.clip((p_plus - p_minus) / (p_plus + p_minus), 0.0, proc.xi_max)
        else:
            xi = self._bets(k0, k1)
        bets = np.concatenate(([self.xi], xi[:-1]))
        factors = np.log1p(bets * (r1 - r0))
        log_e = np.add.accumulate(np.concatenate(([self.log_e], factors)))[1:]
        running = np.maximum.accumulate(np.concatenate(([self.log_e_max], log_e)))[1:]
        self.xi, self.log_e, self.log_e_max = float(xi[-1]), float(log_e[-1]), float(running[-1])
        self.n = end
        return log_e, running

    def _bets(self, k0: NDArray[np.intp], k1: NDArray[np.intp]) -> Scores:
        """Bets after each pair of the block: App. A-C (4) maximised on the updated counts."""
        proc = self.process
        k = proc.bins
        size = k0.size
        rows = np.arange(size)
        # Padded bin weights before (w1) and after (w0) each pair's own count, as in _learn.
        hits0 = np.zeros((size + 1, 3 * k - 2))
        hits0[0] = self.w0
        hits0[rows + 1, k - 1 + k0] = 1.0
        w0 = np.add.accumulate(hits0, axis=0)
        hits1 = np.zeros((size + 1, 3 * k - 2))
        hits1[0] = self.w1
        hits1[rows + 1, k - 1 + k1] = 1.0
        w1 = np.add.accumulate(hits1, axis=0)
        offsets = proc._offsets
        steps = np.empty((2 * size + 1, 2 * k - 1))
        steps[0] = self.q
        steps[1::2] = w1[rows[:, None], k0[:, None] + offsets]  # Q[d] += w1[k0 + d]
        steps[2::2] = w0[rows[:, None] + 1, (2 * k - 2 + k1)[:, None] - offsets]  # Q[d] += w0_new[k1 - d]
        q = np.add.accumulate(steps, axis=0)[2::2]
        gate = self.gate + np.cumsum(k1 - k0)
        self.w0, self.w1, self.q, self.gate = w0[-1], w1[-1], q[-1].copy(), int(gate[-1])
        if proc.grid is not None:
            return proc._choose(q, gate > 0, np.zeros(size))
        # The root search warm-starts at the previous bet, exactly as the online process does
        # (same start, same scalar iteration), so the bets are bit-identical to it.
        xi = np.zeros(size)
        delta = proc._delta
        for i in np.flatnonzero(gate > 0):
            xi[i] = proc._root_one(q[i] * delta, self.xi if i == 0 else float(xi[i - 1]))
        return xi
