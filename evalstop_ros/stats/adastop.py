r"""AdaStop: a group-sequential permutation test comparing L agents (seed 002 Alg. 3, Eqs. 8-12).

:class:`AdaStop` runs interim by interim, :func:`adastop_test` replays a table of scores; with three
or more agents the default ``permutation="closed"`` uses :mod:`.adastop_closed` (docs/adastop.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .adastop_closed import ClosedAdaStop
from .adastop_paths import PaperPaths, all_splits
from .adastop_result import AdaStopResult
from .adastop_welch import WelchReference
from .errors import StatsInputError
from .validation import check_alpha, check_policies, check_positive_int

if TYPE_CHECKING:  # Python 3.11+ (the core runs on 3.10: annotations are not evaluated)
    from typing import Required, Unpack

__all__ = ["DECISIONS", "GUARANTEES", "PERMUTATIONS", "AdaStop", "AdaStopOptions", "AdaStopResult", "adastop_test"]

#: Decision vocabulary of one comparison (seed 002 §2; ``"continue"`` while undecided).
DECISIONS = ("continue", "equal", "larger", "smaller")
#: Permutation schemes: see the Notes of :class:`AdaStop`, item 2; ``"closed"`` is the default.
PERMUTATIONS = ("closed", "relabel", "split")
#: What each scheme guarantees, for reports (docs/adastop.md).
GUARANTEES = {
    "closed": "exact for every N: agents with equal score distributions are declared different with probability "
              "<= alpha (family-wise); for equal means with unequal spreads: a skewness-corrected bootstrap of "
              "Welch's statistic (asymptotic; weakest for strongly skewed scores at small N)",
    "relabel": "exact under the global null only; partial nulls with unequal spreads are not controlled",
    "split": "the paper's Eq. (8); with three or more agents not exact even under the global null",
}
#: Relative slack of the survival check ``T <= b_m`` on a path whose statistic is recomputed with a
#: different summation order than when ``b_m`` was set (exact interim followed by random ones).
_SURVIVAL_RTOL = 1e-12
#: Slack (in permutation counts) of ``floor(level * m_k)``: the spent level is a sum of ratios.
_COUNT_TOL = 1e-9


def _check_comparisons(comparisons: Sequence[Sequence[int]] | None, n_agents: int) -> tuple[tuple[int, int], ...]:
    if comparisons is None:
        return tuple((i, j) for i in range(n_agents) for j in range(i + 1, n_agents))
    pairs: list[tuple[int, int]] = []
    seen: set[frozenset[int]] = set()
    for pair in comparisons:
        ok = isinstance(pair, (Sequence, np.ndarray)) and not isinstance(pair, str) and len(pair) == 2
        ok = ok and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in pair)
        if not ok or not (0 <= pair[0] < n_agents and 0 <= pair[1] < n_agents) or pair[0] == pair[1]:
            raise StatsInputError(
                f"`comparisons` must hold pairs of two distinct agent indices in [0, {n_agents}); found {pair!r}"
            )
        key = frozenset((int(pair[0]), int(pair[1])))
        if key in seen:
            raise StatsInputError(f"`comparisons` must not repeat a pair; found {tuple(pair)!r} twice")
        seen.add(key)
        pairs.append((int(pair[0]), int(pair[1])))
    if not pairs:
        raise StatsInputError("`comparisons` must hold at least one pair; found none")
    return tuple(pairs)


class AdaStop(PaperPaths):
    r"""AdaStop comparison of ``n_agents`` agents, updated interim by interim (seed 002, Alg. 3).

    Parameters
    ----------
    n_agents : int
        Number ``L >= 2`` of agents.
    n_per_interim : int
        Scores ``N`` per agent per interim.
    n_interims : int
        Maximum number ``K`` of interims (budget ``N K`` scores per agent; the paper advises
        ``N K >= 30``, Sec. 2.5).
    alpha : float, optional
        Family-wise error level in (0, 1) (Theorem 1: strong control for ``H_j: P_l1 = P_l2``).
    comparisons : sequence of (int, int), optional
        The comparisons ``C_0`` as pairs of agent indices; default all ``L (L - 1) / 2`` pairs
        ``(i, j)``, ``i < j``.  ``[(0, l) for l in range(1, L)]`` is the paper's "one vs rest".
    n_permutations : int, optional
        ``B``: the most permutation paths used at an interim (``10**4`` in the paper).
    seed : int, optional
        Seed of the random permutation paths, drawn at construction, before any data.
    agent_names : sequence of str, optional
        Names for reports (default ``"agent0"``, ``"agent1"``, ...).
    permutation : {"closed", "relabel", "split"}, optional
        How the permutation paths act on the comparisons (Notes, item 2).  ``"closed"`` (default)
        has strong family-wise control under every partial null, unequal spreads included;
        ``"split"`` is the paper's Eq. (8) as the spec reads it; ``"relabel"`` its repair for the
        global null.  The three coincide when only two agents are compared.

    Attributes
    ----------
    interim : int
        Interims analysed so far.
    is_finished : bool
        True once every comparison is decided.
    active : ndarray of bool, shape (L,)
        Agents the next interim needs.
    result : AdaStopResult
        The state after the latest interim.

    See Also
    --------
    adastop_test : the same test over a table of scores in interim order.

    Notes
    -----
    With :math:`z^{(j)}_i` the :math:`2N` scores of comparison :math:`j = (l_1, l_2)` at interim
    :math:`i` (agent :math:`l_1` first), a permutation path :math:`\sigma_{1:k}` and the
    statistics of seed 002 Eqs. (8)-(9),

    .. math::

        T^{(j)}_{N,k}(\sigma_{1:k}) = \Bigl| \sum_{i=1}^{k} \Bigl( \sum_{n \le N} z^{(j)}_i[\sigma_i(n)]
            - \sum_{n > N} z^{(j)}_i[\sigma_i(n)] \Bigr) \Bigr|, \qquad
        \bar T^{(C)}_{N,k} = \max_{j \in C} T^{(j)}_{N,k},

    the boundary of Eq. (10) is the smallest value :math:`b` of :math:`\bar T^{(C)}_{N,k}` over the
    surviving paths :math:`\hat S_{N,k}` (Eq. 11) with
    :math:`\text{spent} + \#\{\bar T > b\}/m_k \le k\alpha/K`, and the step-down (Alg. 2/3) rejects
    :math:`\arg\max_{j \in C} T^{(j)}(\mathrm{id})` while :math:`\bar T^{(C)}(\mathrm{id}) > b`,
    recomputing :math:`b` for the smaller :math:`C`.

    Choices where the paper or the spec leaves room (the paper's section in brackets):

    1. **Absolute values on both sides** (seed 002 Eq. 8-9): the permuted statistics are
       :math:`|\cdot|` as in Eq. (8).  The public package takes the max of *signed* permuted
       differences against an absolute observed one, a two-sided test at about :math:`2\alpha`.
    2. **How a permutation path acts on the comparisons** (§3.3, P2).  Three schemes, one test
       when only two agents are compared (the paper's, with exact enumeration):

       * ``permutation="closed"`` (default) -- closed testing over the intersection hypotheses,
         each with its own exact permutation group (:mod:`.adastop_closed`): an intersection of
         comparisons says that the agents of each connected component share one law, so its test
         relabels the scores within each component only, with the largest Welch statistic
         (Satterthwaite df, normal scale: :func:`~.adastop_welch.welch_z`) as statistic and the
         boundaries of Eqs. (10)-(12) on its own surviving paths.  Beside it a bootstrap
         test of the same intersection (each agent's own scores, centred: :class:`~.adastop_welch.WelchReference`);
         an intersection is rejected once both crossed, a comparison once every intersection
         that contains it is rejected.  Exact strong FWE control under equal laws (any spreads
         or tails of the other agents; the proof is in ``docs/adastop.md``); for pairs with equal
         means and unequal spreads, the bootstrap's approximation (a permutation test alone declares
         such pairs different in 0.09 of the runs at ``N = 5``).  With two agents: the paper's
         exact test and the pair's bootstrap test.  Cost: one test per partition of the
         agents (15, 52, 203, 877 for 4-7 agents, all pairs; more than
         :data:`~evalstop_ros.stats.adastop_closed.MAX_PARTITIONS` is refused).  Reported
         ``boundaries``/``level_spent`` are those of the permutation test of all comparisons
         together, on the normal scale (``inf`` once it crossed).
       * ``permutation="split"`` -- Eq. (8) literally: path :math:`b` gives every comparison the
         same split :math:`\sigma_i` of its concatenated :math:`2N` block positions (the spec's
         reading).  It reproduces the joint law of the statistics only when each agent has the
         same role (first or second) in all its comparisons (two agents, "one vs rest").  With all
         pairs and :math:`L \ge 3` no relabeling of the data produces it (an agent's scores get
         different signs in different comparisons), Lemma 2 fails, and the test is
         anti-conservative under the global null: FWE 0.057-0.059 (SE 0.004) for 4 agents,
         ``N = 5``, ``K = 1``, whose design level is :math:`6/126 = 0.048`; 0.059 (SE 0.0075) for
         5 agents, ``N = 5``, ``K = 6`` (our Monte Carlo, Gaussian scores).
       * ``permutation="relabel"`` -- path :math:`b` deals the pooled block-:math:`i` scores of the
         agents of each connected component of the open comparisons back to those agents,
         :math:`N` each.  The joint law is exact when all agents of a component share a law (the
         global null: FWE 0.051, SE 0.006, 5 agents, ``N = 5``, ``K = 6``), but not under a
         partial null whose agents differ in spread: pooling a low-spread pair with high-spread
         agents shrinks the law of the maximum, and the equal pairs of
         a1 = a2 ~ N(0, 0.1^2), a3 = a4 ~ N(0, 1) (``N = 4``, ``K = 5``) are declared different
         in 0.12 of the runs (``docs/adastop.md``).  Lemma 3's monotonicity holds, its premise
         (the permutation law of the true nulls is their null law) does not.
    3. **Permutation paths** (§3.4).  ``"split"``: :math:`m_k = \min(B, \tfrac12 \binom{2N}{N}^k)`.
       When :math:`\tfrac12\binom{2N}{N}^k \le B` every path is enumerated once up to the global
       swap of the two halves (first block restricted to splits that put position 0 first),
       otherwise the interim uses ``B`` paths: the identity plus ``B - 1`` paths of ``K`` uniform
       splits drawn from ``seed`` at construction, independent of the data (Phipson & Smyth
       2010).  ``"relabel"`` with three or more agents: ``B`` paths always (the group has
       :math:`(LN)!/(N!)^L` elements), the identity plus ``B - 1`` uniform relabelings per
       interim, drawn at construction; ``"closed"`` likewise (one draw of uniform keys serves
       every intersection test, each relabeling only its own blocks, and each test keeps its own
       survivors, boundaries and spent level).  Random paths are whole ``K``-interim paths, so interim
       ``k`` extends the prefixes used earlier; the repos' scheme of freezing the normaliser at
       the last enumerated interim is not copied.
    4. **Spending** (§3.5, Eq. 12 generalised): ``b`` and :math:`q_k = \#\{\bar T > b\}/m_k` as
       above, the level spent once per interim at the last step-down iteration; ``b = inf`` (no
       rejection possible) when the allowance rounds to zero paths.  Rejection is strict,
       :math:`\bar T(\mathrm{id}) > b` (P3).
    5. **Survivors** (§3.6): a path survives interim :math:`m < k` when its :math:`\bar T` over the
       comparisons *still undecided* does not exceed the boundary stored at the end of interim
       :math:`m`; computed once per interim, before the step-down.
    6. **Ties** of :math:`\arg\max` go to the earliest comparison (P9).
    7. **Direction**: ``"larger"`` when :math:`\sum e(l_1) - \sum e(l_2) > 0` at the deciding
       interim (§3.7).  Directional errors are not controlled by Theorem 1 (App. B.2).
    8. **Early accept** (App. F, :math:`\beta`) is not implemented: it is a heuristic not covered
       by Theorem 1.

    References
    ----------
    .. [1] Mathieu, T. et al. "AdaStop: adaptive statistical testing for sound comparisons of Deep
           RL agents", TMLR 2024 (seed 002): Alg. 3, Eqs. (8)-(12), Theorem 1, App. C-D.
    .. [2] Phipson, B. and Smyth, G. K. "Permutation p-values should never be zero". *Statistical
           Applications in Genetics and Molecular Biology* 9(1), 2010.

    Examples
    --------
    Two agents whose scores are far apart are separated at the first interim (``m_1 = 126``
    splits, ``q_1 = 6/126``):

    >>> import numpy as np
    >>> test = AdaStop(2, n_per_interim=5, n_interims=3, agent_names=["ppo", "sac"])
    >>> res = test.update(np.array([[1.0, 2, 3, 4, 5], [11, 12, 13, 14, 15]]))
    >>> res.decisions, res.decided_at, res.is_finished
    (('smaller',), (1,), True)
    >>> res.n_permutations, round(res.level_spent[0], 6)
    ((126,), 0.015873)
    """

    def __init__(
        self,
        n_agents: int,
        *,
        n_per_interim: int,
        n_interims: int,
        alpha: float = 0.05,
        comparisons: Sequence[Sequence[int]] | None = None,
        n_permutations: int = 10_000,
        seed: int = 0,
        agent_names: Sequence[str] | None = None,
        permutation: str = "closed",
    ) -> None:
        n_agents = check_positive_int(n_agents, "n_agents")
        if n_agents < 2:
            raise StatsInputError(f"`n_agents` must be at least 2; found {n_agents!r}")
        self.n_agents = n_agents
        self.n_per_interim = check_positive_int(n_per_interim, "n_per_interim")
        self.n_interims = check_positive_int(n_interims, "n_interims")
        self.alpha = check_alpha(alpha)
        self.n_permutations = check_positive_int(n_permutations, "n_permutations")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise StatsInputError(f"`seed` must be a non-negative integer; found {seed!r}")
        self.seed = int(seed)
        if agent_names is None:
            self.agent_names = tuple(f"agent{i}" for i in range(n_agents))
        else:
            self.agent_names = check_policies(agent_names)
            if len(self.agent_names) != n_agents:
                raise StatsInputError(
                    f"`agent_names` must name each of the {n_agents} agents; found {len(self.agent_names)} names"
                )
        self.comparisons = _check_comparisons(comparisons, n_agents)
        self._pairs = np.asarray(self.comparisons, dtype=np.intp)

        if permutation not in PERMUTATIONS:
            raise StatsInputError(f"`permutation` should be one of {PERMUTATIONS}; found {permutation!r}")
        self.permutation = permutation
        n = self.n_per_interim
        # With two agents in play the schemes are the same group: use the exact enumeration.
        several = len({l for pair in self.comparisons for l in pair}) > 2
        self._relabel = permutation == "relabel" and several
        self._closed = (
            ClosedAdaStop(self.comparisons, n_agents=n_agents, n_per_interim=n, n_interims=self.n_interims,
                          alpha=self.alpha, n_permutations=self.n_permutations, seed=self.seed)
            if permutation == "closed" and several else None
        )
        # m_k = min(B, C^k / 2): exact enumeration while it fits (seed 002 §4, "Choice of permutations").
        self._exact = [
            not (self._relabel or self._closed) and math.comb(2 * n, n) ** k // 2 <= self.n_permutations
            for k in range(1, self.n_interims + 1)
        ]
        self._splits = all_splits(n) if any(self._exact) else None
        self._random_signs = None if self._relabel or self._closed or all(self._exact) else self._draw_paths()
        self._orders = self._draw_relabelings() if self._relabel else None
        self._relabel_cache: dict[tuple[int, tuple[int, ...]], NDArray[np.float64]] = {}
        # "closed" with two agents: the paper's exact test and, required as well, the bootstrap
        # test of the pair (Notes, item 2)
        self._pair_reference = (
            WelchReference(self.comparisons, [np.arange(len(self.comparisons))], [[0]], n_agents=n_agents, n_per_interim=n,
                           n_interims=self.n_interims, alpha=self.alpha, n_permutations=self.n_permutations,
                           seed=self.seed)
            if permutation == "closed" and not several else None
        )
        self._permutation_crossed = False
        self._centre: float | None = None

        self.interim = 0
        self.is_finished = False
        self._blocks: list[NDArray[np.float64]] = []  # (L, N) per interim, zeros for agents not run
        self._open = np.ones(len(self.comparisons), dtype=bool)  # C: comparisons still undecided
        self._decisions = ["continue"] * len(self.comparisons)
        self._decided_at: list[int | None] = [None] * len(self.comparisons)
        self._diffs = [math.nan] * len(self.comparisons)
        self._boundaries: list[float] = []
        self._level_spent: list[float] = []
        self._m: list[int] = []
        self._spent = 0.0
        self._sums = np.zeros(n_agents)
        self._n_scores = np.zeros(n_agents, dtype=np.int64)
        self._last_interim = np.zeros(n_agents, dtype=np.int64)
        self.active = self._needed()

    # -- the test ----------------------------------------------------------------------------
    def _needed(self) -> NDArray[np.bool_]:
        needed = np.zeros(self.n_agents, dtype=bool)
        if not self.is_finished:
            needed[self._pairs[self._open].ravel()] = True
        return needed

    def _check_interim(self, interim_scores: ArrayLike) -> NDArray[np.float64]:
        if self.is_finished:
            raise StatsInputError(
                f"the comparison is finished after interim {self.interim}; no further `interim_scores` are needed"
            )
        try:
            block = np.array(interim_scores, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise StatsInputError(f"`interim_scores` must be a numeric array; found {interim_scores!r}") from err
        expected = (self.n_agents, self.n_per_interim)
        if block.shape != expected:
            raise StatsInputError(
                f"`interim_scores` must have shape {expected} (agents x n_per_interim); found {block.shape}"
            )
        active = self.active
        bad = ~np.isfinite(block) & active[:, None]
        if bad.any():
            agent, column = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise StatsInputError(
                f"`interim_scores` must be finite for agent {self.agent_names[agent]!r}, which interim "
                f"{self.interim + 1} needs; found {float(block[agent, column])!r} at score {column + 1}"
            )
        block[~active] = 0.0  # agents out of the rotation: never read
        return block

    def _paths(self, k: int) -> tuple[NDArray[np.intp], NDArray[np.float64], int, NDArray[np.bool_]]:
        """Open comparisons, their path sums at interim ``k``, the identity's column, survivors."""
        open_ids = np.flatnonzero(self._open)
        cum, identity = self._cumulative(k, self._pairs[open_ids])
        # Eq. (11): paths whose statistic over the comparisons still open stayed within every
        # earlier boundary (the identity always does).
        alive = np.ones(cum.shape[2], dtype=bool)
        for m in range(1, k):
            bound = self._boundaries[m - 1]
            alive &= np.abs(cum[m - 1]).max(axis=0) <= bound + _SURVIVAL_RTOL * abs(bound)
        return open_ids, cum, identity, alive

    def update(self, interim_scores: ArrayLike) -> AdaStopResult:
        """Analyse the next interim.

        Parameters
        ----------
        interim_scores : array_like, shape (n_agents, n_per_interim)
            The ``N`` new scores of every agent, in agent order.  Rows of agents that are not in
            :attr:`active` (their comparisons are decided) are ignored and may be NaN.

        Returns
        -------
        AdaStopResult
            The decisions so far; :attr:`is_finished` tells whether another interim is needed.
        """
        block = self._check_interim(interim_scores)
        active = self.active
        k = self.interim + 1
        self._blocks.append(block)
        self._sums[active] += block[active].sum(axis=1)
        self._n_scores[active] += self.n_per_interim
        self._last_interim[active] = k
        if self._closed is not None:
            self._update_closed(block, k)
            return self._finish_interim(k)
        if self._permutation_crossed:  # two agents: only the bootstrap test is still open
            self._boundaries.append(math.inf)
            self._level_spent.append(self._spent)
            self._m.append(self._m[-1])
            self._diffs[0] = float(self._sums[self._pairs[0, 0]] - self._sums[self._pairs[0, 1]]) / (k * self.n_per_interim)
            self._settle_pair(block, k)
            return self._finish_interim(k)

        open_ids, cum, identity, alive = self._paths(k)
        m_k = cum.shape[2]
        stats = np.abs(cum[k - 1][:, alive])  # (J_open, n_alive)
        observed = cum[k - 1][:, identity]  # signed sums, sum e(l1) - sum e(l2)
        allowed = math.floor((k * self.alpha / self.n_interims - self._spent) * m_k + _COUNT_TOL)
        rows = list(range(len(open_ids)))  # rows of `stats` still in C
        components = self._components(self._open) if self._relabel else ()
        while True:
            t_bar = stats[rows].max(axis=0)
            if allowed <= 0:
                boundary, exceed = math.inf, 0
            else:
                ordered = -np.sort(-t_bar)
                boundary = float(ordered[min(allowed, ordered.size - 1)])
                exceed = int(np.count_nonzero(t_bar > boundary))
            obs = np.abs(observed[rows])
            top = int(np.argmax(obs))  # first maximum: earliest comparison (P9)
            if not obs[top] > boundary:
                break
            j = int(open_ids[rows[top]])
            self._decisions[j] = "larger" if observed[rows[top]] > 0 else "smaller"
            self._decided_at[j] = k
            self._diffs[j] = float(observed[rows[top]]) / (k * self.n_per_interim)
            self._open[j] = False
            del rows[top]
            if not rows:
                break
            if self._relabel and self._components(self._open) != components:
                # the relabeling pools changed: recompute the paths of the comparisons left
                open_ids, cum, identity, alive = self._paths(k)
                stats = np.abs(cum[k - 1][:, alive])
                observed = cum[k - 1][:, identity]
                rows = list(range(len(open_ids)))
            components = self._components(self._open) if self._relabel else ()
        for r in rows:
            j = int(open_ids[r])
            self._diffs[j] = float(observed[r]) / (k * self.n_per_interim)
        self._spent += exceed / m_k
        self._boundaries.append(boundary)
        self._level_spent.append(self._spent)
        self._m.append(m_k)
        if self._pair_reference is not None:
            self._permutation_crossed = not self._open.any()
            self._settle_pair(block, k)
        return self._finish_interim(k)

    def _settle_pair(self, block: NDArray[np.float64], k: int) -> None:
        """Two agents, ``"closed"``: decide the pair once both its tests crossed (Notes, item 2)."""
        assert self._pair_reference is not None
        used = self._pairs[0]
        if self._centre is None:
            self._centre = float(block[used].mean())
        centred = np.zeros_like(block)
        centred[used] = block[used] - self._centre
        crossed = bool(self._pair_reference.update(centred, np.ones(1, dtype=bool))[0])
        if self._permutation_crossed and crossed:
            self._decisions[0] = "larger" if self._diffs[0] > 0 else "smaller"
            self._decided_at[0] = k
            self._open[0] = False
        else:
            self._decisions[0], self._decided_at[0] = "continue", None
            self._open[0] = True

    def _update_closed(self, block: NDArray[np.float64], k: int) -> None:
        """Interim ``k`` of the closed-testing scheme (Notes, item 2)."""
        assert self._closed is not None
        rejected = self._closed.update(block)
        observed = self._closed.signed_sums(self._sums)
        for j in map(int, np.flatnonzero(self._open)):
            self._diffs[j] = float(observed[j]) / (k * self.n_per_interim)
            if rejected[j]:
                self._decisions[j] = "larger" if observed[j] > 0 else "smaller"
                self._decided_at[j] = k
                self._open[j] = False
        top = self._closed.top
        self._boundaries.append(float(self._closed.boundary[top]))
        self._level_spent.append(float(self._closed.spent[top]))
        self._m.append(self.n_permutations)

    def _finish_interim(self, k: int) -> AdaStopResult:
        self.interim = k
        if not self._open.any():
            self.is_finished = True
        elif k == self.n_interims:
            for j in map(int, np.flatnonzero(self._open)):
                self._decisions[j] = "equal"
                self._decided_at[j] = k
            self._open[:] = False
            self.is_finished = True
        self.active = self._needed()
        return self.result

    @property
    def result(self) -> AdaStopResult:
        """The state after the latest interim."""
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self._n_scores > 0, self._sums / np.maximum(self._n_scores, 1), np.nan)
        return AdaStopResult(
            agents=self.agent_names,
            comparisons=self.comparisons,
            decisions=tuple(self._decisions),
            decided_at=tuple(self._decided_at),
            mean_differences=tuple(self._diffs),
            means=tuple(float(m) for m in means),
            n_scores=tuple(int(n) for n in self._n_scores),
            last_interim=tuple(int(k) for k in self._last_interim),
            interim=self.interim,
            is_finished=self.is_finished,
            boundaries=tuple(self._boundaries),
            level_spent=tuple(self._level_spent),
            n_permutations=tuple(self._m),
            alpha=self.alpha,
            n_per_interim=self.n_per_interim,
            n_interims=self.n_interims,
            seed=self.seed,
        )


class AdaStopOptions(TypedDict, total=False):
    """The keyword options of :class:`AdaStop`, which :func:`adastop_test` passes on (defaults there)."""

    n_per_interim: Required[int]
    n_interims: Required[int]
    alpha: float
    comparisons: Sequence[Sequence[int]] | None
    n_permutations: int
    seed: int
    agent_names: Sequence[str] | None
    permutation: str


def adastop_test(scores: ArrayLike, **options: Unpack[AdaStopOptions]) -> AdaStopResult:
    """Run AdaStop over scores collected in interim order.

    Parameters
    ----------
    scores : array_like, shape (k * n_per_interim, n_agents)
        One column per agent; rows ``(i - 1) N .. i N - 1`` are interim ``i``.  ``k <= K`` complete
        interims; an agent's cells may be NaN (or anything) from the interim after it left the
        rotation.  Rows after the test finished are not read.
    n_per_interim, n_interims, alpha, comparisons, n_permutations, seed, agent_names, permutation :
        As in :class:`AdaStop`.

    Returns
    -------
    AdaStopResult
        The state after the last interim read; not finished (``"continue"`` decisions) when the
        rows ran out first.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> scores = rng.normal([0.0, 0.0, 3.0], 1.0, size=(30, 3))  # agent 2 much better
    >>> res = adastop_test(scores, n_per_interim=5, n_interims=6, agent_names=["a", "b", "c"])
    >>> res.decision_table()["c"], res.decided_at
    ({'a': 'larger', 'b': 'larger'}, (6, 1, 1))
    >>> res.n_scores, res.stopped_early, res.letters()
    ((30, 30, 5), ('c',), {'c': 'a', 'a': 'b', 'b': 'b'})
    """
    table = np.asarray(scores, dtype=np.float64) if not isinstance(scores, np.ndarray) else scores.astype(np.float64)
    if table.ndim != 2:
        raise StatsInputError(f"`scores` must be a 2-D array (rows x agents); found shape {table.shape}")
    test = AdaStop(table.shape[1], **options)
    n = test.n_per_interim
    rows = table.shape[0]
    if rows % n != 0:
        raise StatsInputError(f"`scores` must hold whole interims of n_per_interim={n} rows; found {rows} rows")
    if rows > n * test.n_interims:
        raise StatsInputError(
            f"`scores` must hold at most n_interims * n_per_interim = {n * test.n_interims} rows; found {rows}"
        )
    for start in range(0, rows, n):
        if test.is_finished:
            break
        try:
            test.update(table[start : start + n].T)
        except StatsInputError as err:
            raise StatsInputError(f"{err} (rows {start + 1}-{start + n} of `scores`)") from err
    return test.result
