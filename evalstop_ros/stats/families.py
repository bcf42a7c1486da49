"""Families of comparisons among K policies: which pairs, at what level, run round by round, shown as letters.

Seed 003 footnote 5, seed 000 §VI-B; which of Bonferroni, Holm and Šidák stay valid with
sequential tests is in docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .engine import HolmEngine, HolmOptions
from .errors import StatsInputError
from .holm import side_alpha
from .letters import compact_letter_display
from .levels import split_alpha
from .sequential import Decision
from .validation import check_alpha, check_policies, check_positive_int

if TYPE_CHECKING:  # Python 3.11+ (the core runs on 3.10: annotations are not evaluated)
    from typing import Unpack

DESIGNS = ("all-pairs", "vs-baseline")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One paired comparison of a family, oriented as the sequential tests are.

    Attributes
    ----------
    policy_a:
        The baseline (pi_0, column 0, seed 000/003 orientation).
    policy_b:
        The candidate (pi_1, column 1); ``Decision.B_BETTER`` means this policy is better.
    """

    policy_a: str
    policy_b: str

    @property
    def pair(self) -> frozenset[str]:
        """The unordered pair, as :func:`~.letters.compact_letter_display` takes it in ``differs``."""
        return frozenset((self.policy_a, self.policy_b))


def comparison_pairs(
    policies: Sequence[str], *, design: str = "all-pairs", baseline: str | None = None
) -> tuple[Comparison, ...]:
    """The comparisons of a K-policy family, in a fixed order.

    Parameters
    ----------
    policies : sequence of str
        Distinct policy names, at least two.
    design : {"all-pairs", "vs-baseline"}, optional
        ``"all-pairs"``: every pair ``(policies[i], policies[j])`` with ``i < j``, the earlier
        one as baseline (seed 000 §VI-B, Fig. 2), ``K (K - 1) / 2`` in all.
        ``"vs-baseline"``: ``(baseline, other)`` for every other policy, ``K - 1`` in all.
    baseline : str, optional
        The reference policy; required by ``"vs-baseline"`` and refused by ``"all-pairs"``.

    Returns
    -------
    tuple of Comparison

    Examples
    --------
    >>> [(c.policy_a, c.policy_b) for c in comparison_pairs(["pi0", "pi1", "pi2"])]
    [('pi0', 'pi1'), ('pi0', 'pi2'), ('pi1', 'pi2')]
    >>> [(c.policy_a, c.policy_b) for c in comparison_pairs(["x", "ref", "y"], design="vs-baseline", baseline="ref")]
    [('ref', 'x'), ('ref', 'y')]
    """
    names = check_policies(policies)
    if design == "all-pairs":
        if baseline is not None:
            raise StatsInputError(f"`baseline` applies only to design 'vs-baseline'; found {baseline!r}")
        return tuple(Comparison(a, b) for i, a in enumerate(names) for b in names[i + 1 :])
    if design == "vs-baseline":
        if baseline not in names:
            raise StatsInputError(f"`baseline` must be one of `policies` {names!r}; found {baseline!r}")
        return tuple(Comparison(baseline, other) for other in names if other != baseline)
    raise StatsInputError(f"`design` should be one of {DESIGNS}; found {design!r}")


# -- running a family -------------------------------------------------------------------------------
#: Ways to share the family-wise level among the comparisons of a running family.
CORRECTIONS = ("bonferroni", "holm")


@dataclasses.dataclass(frozen=True)
class FamilyResult:
    """Outcome of a K-policy family of sequential comparisons (one session).

    Attributes
    ----------
    policies:
        Policy names, in the order given.
    comparisons:
        The comparisons (:func:`comparison_pairs` order and orientation).
    method, correction, alpha, alternative:
        The test of every comparison, how the family-wise ``alpha`` was shared, and the claims.
    comparison_alpha:
        Level each comparison's own test runs at (Bonferroni: ``alpha / m``; Holm: the first Holm
        threshold ``alpha / H`` of its ``H`` one-sided hypotheses, per direction).
    decisions:
        Per comparison, a :class:`~evalstop_ros.stats.sequential.Decision` (``B_BETTER``: the
        comparison's ``policy_b`` is better).
    stopping_trials:
        Per comparison, the round (trial of each policy) of the decision, or ``None``.
    pvalues:
        Per comparison, its anytime-valid p-value when it stopped or at the end (two-sided:
        ``min(1, 2 min(p_greater, p_less))``; NaN for STEP and Lai, which define none).
    n_trials:
        Per policy, the trials it ran before leaving the rotation (all of its comparisons
        decided) or the end.
    means:
        Per policy, the mean score over those trials (NaN if none).
    rounds:
        Rounds run.
    """

    policies: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    method: str
    correction: str
    alpha: float
    alternative: str
    comparison_alpha: float
    decisions: tuple[Decision, ...]
    stopping_trials: tuple[int | None, ...]
    pvalues: tuple[float, ...]
    n_trials: tuple[int, ...]
    means: tuple[float, ...]
    rounds: int

    def differs(self) -> set[frozenset[str]]:
        """The pairs separated by a claim, as :func:`~.letters.compact_letter_display` takes them."""
        return {
            c.pair for c, d in zip(self.comparisons, self.decisions) if d in (Decision.A_BETTER, Decision.B_BETTER)
        }

    def letters(self) -> dict[str, str]:
        """Compact letter display of the final decisions (seed 000 Fig. 2 procedure).

        Policies without trials get mean 0 for the ordering.
        """
        means = [0.0 if math.isnan(m) else m for m in self.means]
        return compact_letter_display(self.policies, means, self.differs())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation (NaN becomes ``None``)."""

        def number(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {
            "policies": list(self.policies),
            "method": self.method,
            "correction": self.correction,
            "alpha": self.alpha,
            "alternative": self.alternative,
            "comparison_alpha": self.comparison_alpha,
            "rounds": self.rounds,
            "comparisons": [
                {
                    "policy_a": c.policy_a,
                    "policy_b": c.policy_b,
                    "decision": d.name.lower(),
                    "stopping_trial": s,
                    "pvalue": number(p),
                }
                for c, d, s, p in zip(self.comparisons, self.decisions, self.stopping_trials, self.pvalues)
            ],
            "n_trials": dict(zip(self.policies, self.n_trials)),
            "means": {name: number(m) for name, m in zip(self.policies, self.means)},
            "letters": self.letters(),
        }


class FamilyProcess:
    r"""A K-policy family of paired sequential tests, run in rounds, over ``R`` sequences at once.

    Each round every policy still in the rotation runs one trial; trial ``n`` of two policies
    is pair ``n`` of their comparison (pairing by index, seed 000 §V-A).  A comparison
    stops at its first decision; a policy leaves the rotation once all its comparisons are
    decided; every comparison still open after ``n_max`` rounds is ``BUDGET_EXHAUSTED``.
    ``R = 1`` is the online use (the evaluation manager); ``R > 1`` the Monte Carlo one.

    Parameters
    ----------
    policies : sequence of str
        Distinct policy names (``K >= 2``).
    method : str
        Registered sequential test (:data:`~evalstop_ros.stats.registry.METHODS`).
    alpha : float
        Family-wise error level in (0, 1): the probability of any false claim in the family.
    design : {"all-pairs", "vs-baseline"}, optional
        Which comparisons (:func:`comparison_pairs`).
    baseline : str, optional
        The reference policy of ``"vs-baseline"``.
    correction : {"bonferroni", "holm"}, optional
        How ``alpha`` is shared (Notes).  Holm needs anytime-valid p-values (``nscore``, ``wsr``,
        ``savi``); STEP and Lai define none, so they take Bonferroni only.
    alternative : {"two-sided", "greater", "less"}, optional
        Claims of every comparison: either direction, only "``policy_b`` better" or only
        "``policy_a`` better" (STEP's one-sided tests still stop in the opposite direction).
    n_max : int, optional
        Rounds at most: STEP's and Lai's horizon (required for them), a budget for the others.
    n_sequences : int, optional
        Number ``R`` of independent families run side by side.
    seed, bins, c : optional
        Options of the method (:func:`~evalstop_ros.stats.registry.make_process`); comparison
        ``j`` uses the STEP seed ``SeedSequence([seed, j])``, fixed before the data.

    Attributes
    ----------
    comparisons : tuple of Comparison
    n : int
        Rounds fed so far.
    decision, stopping_trial : ndarray, shape (m, R)
        Per comparison and sequence (``Decision`` values; round of the decision, 0 if none).
    active : ndarray of bool, shape (K, R)
        Policies still in the rotation.
    n_trials : ndarray of int, shape (K, R)
        Trials each policy ran.

    Notes
    -----
    **Bonferroni** runs every comparison's own test at :math:`\alpha/m` (two-sided tests split it
    again between the directions, as the single tests do): the union bound holds under any
    dependence between comparisons that share a policy, for STEP within ``n_max``.

    **Holm** (sequential, anytime).  Every comparison contributes its directional hypotheses
    (``"two-sided"``: "B better" and "A better", :math:`H = 2m`; one-sided: :math:`H = m`), each
    tested by a one-sided e-process at :math:`\alpha/H` with the running-minimum p-value
    :math:`p_{h,n} = \min(1, 1/\max_{n' \le n} X_{h,n'})`.  After every round Holm's procedure
    is applied to the :math:`H` current p-values (a decided comparison keeps the values it had
    when it stopped) and every hypothesis it rejects becomes a claim.  Valid because each
    :math:`p_{h,n}` is anytime-valid, so its limit :math:`p_{h,\infty}` is a p-value (Ville);
    p-values never increase, so every claim made at any round is a Holm rejection of the
    :math:`p_{h,\infty}` (Holm is monotone), and Holm controls the FWE under arbitrary
    dependence.  Directional hypotheses, not one two-sided p-value per pair, keep the claims'
    *direction* covered (see the module notes).  Holm's first threshold is the Bonferroni
    level, so it never claims less than Bonferroni.

    Examples
    --------
    >>> fam = FamilyProcess(["a", "b", "c"], method="nscore", alpha=0.05, correction="holm")
    >>> for _ in range(30):
    ...     fam.update(np.array([0.0, 1.0, 1.0]))
    >>> [d.name for d in fam.result().decisions], fam.result().letters()
    (['B_BETTER', 'B_BETTER', 'CONTINUE'], {'b': 'a', 'c': 'a', 'a': 'b'})
    """

    def __init__(
        self,
        policies: Sequence[str],
        *,
        method: str,
        alpha: float,
        design: str = "all-pairs",
        baseline: str | None = None,
        correction: str = "bonferroni",
        alternative: str = "two-sided",
        n_max: int | None = None,
        n_sequences: int = 1,
        seed: int = 0,
        bins: int = 2,
        c: float = 0.95,
    ) -> None:
        from .methods import FACTS
        from .registry import make_process
        from .validation import check_alternative

        self.policies = check_policies(policies)
        self.comparisons = comparison_pairs(self.policies, design=design, baseline=baseline)
        self.alpha = check_alpha(alpha)
        self.alternative = check_alternative(alternative)
        if correction not in CORRECTIONS:
            raise StatsInputError(f"`correction` should be one of {CORRECTIONS}; found {correction!r}")
        if correction == "holm" and not (method in FACTS and FACTS[method].pvalue):
            raise StatsInputError(
                f"`correction` 'holm' needs anytime-valid p-values, which method {method!r} does not "
                "define; use 'bonferroni'"
            )
        self.correction = correction
        self.method = method
        self.n_sequences = check_positive_int(n_sequences, "n_sequences")
        self.n_max = None if n_max is None else check_positive_int(n_max, "n_max")
        m = len(self.comparisons)
        index = {name: i for i, name in enumerate(self.policies)}
        self._a = np.array([index[c.policy_a] for c in self.comparisons])
        self._b = np.array([index[c.policy_b] for c in self.comparisons])
        options = {"n_max": self.n_max, "bins": bins, "c": c}

        def seed_of(j: int) -> int:
            return int(np.random.SeedSequence([int(seed), j]).generate_state(1)[0])

        if correction == "bonferroni":
            self.comparison_alpha = split_alpha(self.alpha, m)
            self._processes = [
                make_process(method, self.n_sequences, alpha=self.comparison_alpha, alternative=alternative,
                             seed=seed_of(j), **options)  # type: ignore[arg-type]
                for j in range(m)
            ]
        else:
            self.comparison_alpha = side_alpha(self.alpha, m, alternative)
            self._holm = HolmEngine(m, HolmOptions(method, self.alpha, alternative, self.n_max, bins, c),
                                    lanes=self.n_sequences)
        shape = (m, self.n_sequences)
        self.n = 0
        self.decision = np.zeros(shape, dtype=np.int8)
        self.stopping_trial = np.zeros(shape, dtype=np.int64)
        self.active = np.ones((len(self.policies), self.n_sequences), dtype=bool)
        self.n_trials = np.zeros((len(self.policies), self.n_sequences), dtype=np.int64)
        self._sums = np.zeros((len(self.policies), self.n_sequences))

    @property
    def finished(self) -> NDArray[np.bool_]:
        """``(R,)``: every comparison of the sequence decided (or the budget spent)."""
        finished: NDArray[np.bool_] = ~(self.decision == Decision.CONTINUE).any(axis=0)
        return finished

    def update(self, scores: ArrayLike) -> None:
        """Feed one round: ``scores[k]`` (shape ``(K,)`` or ``(K, R)``) is policy ``k``'s trial.

        Scores of policies out of the rotation (:attr:`active` false) are not read and may be
        NaN; the others are checked by each comparison's test (e.g. in [0, 1], binary for STEP).
        """
        shape = (len(self.policies), self.n_sequences)
        array = np.asarray(scores, dtype=np.float64)
        if array.shape != shape:
            if array.size != shape[0] * shape[1]:
                raise StatsInputError(
                    f"`scores` must hold one trial per policy ({shape[0]}) and sequence ({shape[1]}); "
                    f"found shape {array.shape}"
                )
            array = array.reshape(shape)
        if self.n_max is not None and self.n >= self.n_max:
            raise StatsInputError(f"the family's budget of n_max={self.n_max} rounds is spent")
        missing = ~np.isfinite(array) & self.active
        if missing.any():
            k, r = np.unravel_index(int(np.argmax(missing)), shape)
            raise StatsInputError(
                f"`scores` must hold a finite score of every policy in the rotation; found "
                f"{float(array[k, r])!r} for {self.policies[k]!r} (sequence {r}) at round {self.n + 1}"
            )
        fed = np.where(self.active, array, 0.0)  # policies out of the rotation: never read
        self.n += 1
        self.n_trials += self.active
        self._sums += fed
        open_ = self.decision == Decision.CONTINUE
        if self.correction == "bonferroni":
            for j, process in enumerate(self._processes):
                if open_[j].any():
                    process.update(fed[self._a[j]], fed[self._b[j]])
                    newly = open_[j] & (process.decision != Decision.CONTINUE)
                    self.decision[j, newly] = process.decision[newly]
                    self.stopping_trial[j, newly] = self.n
        else:
            self._holm_round(fed, open_)
        if self.n_max is not None and self.n >= self.n_max:
            self.decision[self.decision == Decision.CONTINUE] = Decision.BUDGET_EXHAUSTED
        still = self.decision == Decision.CONTINUE
        active = np.zeros_like(self.active)
        for j in range(len(self.comparisons)):
            active[self._a[j]] |= still[j]
            active[self._b[j]] |= still[j]
        self.active = active

    def _holm_round(self, fed: NDArray[np.float64], open_: NDArray[np.bool_]) -> None:
        for j in range(len(self.comparisons)):
            if open_[j].any():  # a decided comparison keeps the p-values it had when it stopped
                self._holm.feed(j, fed[self._a[j]], fed[self._b[j]])
        self._holm.analyse()
        self.decision, self.stopping_trial = self._holm.decision.copy(), self._holm.stopping_step.copy()

    def pvalues(self) -> NDArray[np.float64]:
        """``(m, R)`` anytime-valid p-value of each comparison (NaN where the method has none)."""
        if self.correction == "bonferroni":
            return np.stack([process.pvalue() for process in self._processes])
        sides = len(self._holm.holm.sides)
        per_side = self._holm.holm.side_pvalues().reshape(len(self.comparisons), sides, self.n_sequences)
        combined: NDArray[np.float64] = np.minimum(1.0, sides * per_side.min(axis=1))
        return combined

    def result(self, sequence: int = 0) -> FamilyResult:
        """The :class:`FamilyResult` of sequence ``sequence`` (0 for an online run)."""
        r = sequence
        with np.errstate(invalid="ignore", divide="ignore"):
            means = self._sums[:, r] / self.n_trials[:, r]
        return FamilyResult(
            policies=self.policies,
            comparisons=self.comparisons,
            method=self.method,
            correction=self.correction,
            alpha=self.alpha,
            alternative=self.alternative,
            comparison_alpha=self.comparison_alpha,
            decisions=tuple(Decision(int(d)) for d in self.decision[:, r]),
            stopping_trials=tuple(int(s) or None for s in self.stopping_trial[:, r]),
            pvalues=tuple(float(p) for p in self.pvalues()[:, r]),
            n_trials=tuple(int(n) for n in self.n_trials[:, r]),
            means=tuple(float(m) for m in means),
            rounds=self.n,
        )


class FamilyOptions(TypedDict, total=False):
    """The keyword options of :class:`FamilyProcess` that :func:`run_family` passes on (defaults there)."""

    design: str
    baseline: str | None
    correction: str
    alternative: str
    n_max: int | None
    seed: int
    bins: int
    c: float


def run_family(
    scores: Mapping[str, ArrayLike], *, method: str, alpha: float, **options: Unpack[FamilyOptions]
) -> FamilyResult:
    """Replay recorded trials of K policies through a :class:`FamilyProcess`, round by round.

    Parameters
    ----------
    scores : mapping of str to array_like
        Each policy's scores in collection order (trial ``n`` at index ``n - 1``).  A policy's
        sequence may end (or hold NaN) after it left the rotation; the replay stops when a
        policy still in the rotation has no score for the next round, or at ``n_max``.
    method, alpha, design, baseline, correction, alternative, n_max, seed, bins, c :
        As in :class:`FamilyProcess`.

    Returns
    -------
    FamilyResult

    Examples
    --------
    >>> res = run_family({"a": [0] * 12, "b": [1] * 12, "c": [0] * 12}, method="nscore", alpha=0.05)
    >>> [(c.policy_a, c.policy_b, d.name, s) for c, d, s in zip(res.comparisons, res.decisions, res.stopping_trials)]
    [('a', 'b', 'B_BETTER', 9), ('a', 'c', 'CONTINUE', None), ('b', 'c', 'A_BETTER', 9)]
    >>> res.n_trials, res.letters()  # b left the rotation after trial 9
    ((12, 9, 12), {'b': 'a', 'a': 'b', 'c': 'b'})
    """
    if not isinstance(scores, Mapping):
        raise StatsInputError(f"`scores` must map policy names to score sequences; found {type(scores).__name__}")
    names = list(scores)
    columns = []
    for name in names:
        column = np.asarray(scores[name], dtype=np.float64)
        if column.ndim != 1:
            raise StatsInputError(f"`scores` of policy {name!r} must be one-dimensional; found shape {column.shape}")
        columns.append(column)
    family = FamilyProcess(names, method=method, alpha=alpha, **options)
    longest = max(column.size for column in columns)
    limit = min(longest, family.n_max or longest)
    for n in range(limit):
        row = np.array([column[n] if n < column.size else np.nan for column in columns])
        needed = family.active[:, 0]
        if not np.isfinite(row[needed]).all():
            break  # the data of a policy still in the rotation ran out
        family.update(row)
        if family.finished[0]:
            break
    return family.result()
