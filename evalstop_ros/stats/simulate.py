"""Vectorised Monte Carlo of a sequential test's operating characteristics (seed 000 §VI, seed 003 §V-B)."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from tqdm import tqdm

from .errors import StatsInputError
from .sequential import Decision, PairedProcess, run_batch
from .validation import check_positive, check_positive_int

#: ``sampler(rng, shape) -> (scores_a, scores_b)``, each of ``shape`` with values in [0, 1].
Sampler = Callable[[np.random.Generator, tuple[int, int]], tuple[NDArray[np.float64], NDArray[np.float64]]]
#: ``factory(n_sequences, seed) -> PairedProcess``; ``seed`` differs per chunk (see monte_carlo).
ProcessFactory = Callable[[int, int], PairedProcess]
#: Two true means closer than this count as equal (a null): floating-point round-off only.
MEAN_TIE_TOLERANCE = 1e-12
#: Default chunk holds about this many scores per policy (16 MiB per float64 array).
_CHUNK_ELEMENTS = 1 << 21


@dataclasses.dataclass(frozen=True)
class ScoreModel:
    """A pair of score laws, one per policy, with known means.

    Attributes
    ----------
    name:
        Human-readable description, e.g. ``"bernoulli(p0=0.3, p1=0.5)"``.
    mean_a, mean_b:
        True mean scores of policy A (baseline) and B (candidate).
    sampler:
        ``sampler(rng, (R, N))`` returns the ``(R, N)`` score arrays of A and B.
    """

    name: str
    mean_a: float
    mean_b: float
    sampler: Sampler = dataclasses.field(repr=False)

    @property
    def is_null(self) -> bool:
        """True when the two policies have equal means (within :data:`MEAN_TIE_TOLERANCE`)."""
        return math.isclose(self.mean_a, self.mean_b, rel_tol=0.0, abs_tol=MEAN_TIE_TOLERANCE)

    def sample(self, rng: np.random.Generator, reps: int, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Draw ``reps`` paired sequences of ``n`` trials: two ``(reps, n)`` arrays."""
        return self.sampler(rng, (reps, n))

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description."""
        return {"name": self.name, "mean_a": self.mean_a, "mean_b": self.mean_b}


def _check_probability(value: float, name: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError) as err:
        raise StatsInputError(f"`{name}` must be a number in [0, 1]; found {value!r}") from err
    if not 0.0 <= p <= 1.0:
        raise StatsInputError(f"`{name}` must lie in [0, 1]; found {value!r}")
    return p


def bernoulli(p0: float, p1: float) -> ScoreModel:
    """Binary success scores: A ~ Bernoulli(p0), B ~ Bernoulli(p1), as in Table I (seeds 000, 003).

    Examples
    --------
    >>> model = bernoulli(0.3, 0.5)
    >>> a, b = model.sample(np.random.default_rng(0), 2, 4)
    >>> a.shape, set(np.unique(np.concatenate([a, b]))) <= {0.0, 1.0}
    ((2, 4), True)
    """
    p0 = _check_probability(p0, "p0")
    p1 = _check_probability(p1, "p1")

    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return (rng.random(shape) < p0).astype(np.float64), (rng.random(shape) < p1).astype(np.float64)

    return ScoreModel(f"bernoulli(p0={p0:g}, p1={p1:g})", p0, p1, draw)


def _check_probs(probs: ArrayLike, name: str, k: int) -> NDArray[np.float64]:
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (k,):
        raise StatsInputError(f"`{name}` must hold one probability per level ({k}); found shape {p.shape}")
    if not ((p >= 0.0) & (p <= 1.0)).all():
        index = int(np.argmax(~((p >= 0.0) & (p <= 1.0))))
        raise StatsInputError(f"`{name}` must lie in [0, 1]; found {float(p[index])!r} at level {index}")
    if not math.isclose(float(p.sum()), 1.0, abs_tol=1e-9):
        raise StatsInputError(f"`{name}` must sum to 1; found {float(p.sum())!r}")
    normalised: NDArray[np.float64] = p / p.sum()
    return normalised


def partial_credit(levels: Sequence[float], probs_a: ArrayLike, probs_b: ArrayLike) -> ScoreModel:
    """K-level partial-credit scores: P(score = levels[k]) = probs[k] for each policy.

    Parameters
    ----------
    levels : sequence of float
        Distinct, increasing score levels in [0, 1] (seed 000 App. A-C: e.g. ``k / (K - 1)``).
    probs_a, probs_b : array_like
        Probabilities of each level for policy A and B; each sums to 1.

    Examples
    --------
    >>> partial_credit([0, 0.5, 1], [0.5, 0.25, 0.25], [0.25, 0.25, 0.5]).mean_b
    0.625
    """
    lv = np.asarray(levels, dtype=np.float64)
    if lv.ndim != 1 or lv.size < 2:
        raise StatsInputError(f"`levels` must list at least two score levels; found {levels!r}")
    if not (np.isfinite(lv).all() and lv[0] >= 0.0 and lv[-1] <= 1.0 and (np.diff(lv) > 0).all()):
        raise StatsInputError(f"`levels` must increase strictly within [0, 1]; found {levels!r}")
    pa = _check_probs(probs_a, "probs_a", lv.size)
    pb = _check_probs(probs_b, "probs_b", lv.size)
    cdf_a, cdf_b = np.cumsum(pa), np.cumsum(pb)

    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        # inverse-CDF lookup; min() guards the round-off of a cumulative sum just below 1
        index_a = np.minimum(np.searchsorted(cdf_a, rng.random(shape), side="right"), lv.size - 1)
        index_b = np.minimum(np.searchsorted(cdf_b, rng.random(shape), side="right"), lv.size - 1)
        return lv[index_a], lv[index_b]

    name = f"partial_credit(levels={lv.tolist()}, probs_a={pa.tolist()}, probs_b={pb.tolist()})"
    return ScoreModel(name, float(lv @ pa), float(lv @ pb), draw)


def continuous_beta(mean_a: float, mean_b: float, concentration: float) -> ScoreModel:
    """Continuous scores: Beta(mean * kappa, (1 - mean) * kappa) per policy, kappa = concentration.

    Examples
    --------
    >>> model = continuous_beta(0.4, 0.6, 10.0)
    >>> a, b = model.sample(np.random.default_rng(0), 400, 50)
    >>> bool(abs(b.mean() - 0.6) < 0.01)
    True
    """
    means = []
    for value, name in ((mean_a, "mean_a"), (mean_b, "mean_b")):
        m = _check_probability(value, name)
        if m in (0.0, 1.0):
            raise StatsInputError(f"`{name}` must lie strictly inside (0, 1) for a Beta law; found {value!r}")
        means.append(m)
    kappa = check_positive(concentration, "concentration")
    ma, mb = means

    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return rng.beta(ma * kappa, (1.0 - ma) * kappa, shape), rng.beta(mb * kappa, (1.0 - mb) * kappa, shape)

    return ScoreModel(f"continuous_beta(mean_a={ma:g}, mean_b={mb:g}, concentration={kappa:g})", ma, mb, draw)


@dataclasses.dataclass(frozen=True)
class SimulationSummary:
    """Operating characteristics of a sequential test estimated by Monte Carlo.

    Attributes
    ----------
    reps, n_max:
        Number of simulated sequences and their length (the test's budget).
    mean_a, mean_b:
        True means of the score model.
    power, power_se:
        P(correct directional claim): ``B_BETTER`` when ``mean_b > mean_a``, ``A_BETTER`` when
        ``mean_a > mean_b``, within ``n_max`` trials; NaN for a null (equal means), where no
        claim is correct.  The SE is the binomial ``sqrt(p (1 - p) / reps)``.
    fpr, fpr_se:
        P(false claim): any claim under a null, the wrong direction otherwise.
    p_b_better, p_a_better:
        Fractions of sequences that ended with each claim.
    mean_ttd, ttd_se:
        Mean stopping trial ``E[min(stop, n_max)]`` of any decision, with sequences that reached
        ``n_max`` undecided counted as ``n_max`` (the convention of STEP's ``expected_stop``,
        seed 003 §V-B; Table I of seed 000 counts ``N + 1`` instead), and its
        standard error ``std / sqrt(reps)``.
    """

    reps: int
    n_max: int
    mean_a: float
    mean_b: float
    power: float
    power_se: float
    fpr: float
    fpr_se: float
    p_b_better: float
    p_a_better: float
    mean_ttd: float
    ttd_se: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation (NaN becomes ``None``)."""
        return {
            key: None if isinstance(value, float) and math.isnan(value) else value
            for key, value in dataclasses.asdict(self).items()
        }


def _binomial_se(p: float, reps: int) -> float:
    return math.sqrt(p * (1.0 - p) / reps)


def monte_carlo(
    process_factory: ProcessFactory,
    model: ScoreModel,
    *,
    reps: int,
    n_max: int,
    rng: np.random.Generator,
    chunk: int | None = None,
    progress: bool | Callable[[int, int], None] = False,
) -> SimulationSummary:
    """Estimate power, false-claim rate and mean stopping time of a sequential test.

    Parameters
    ----------
    process_factory : callable
        ``process_factory(n_sequences, seed)`` returns a fresh
        :class:`~evalstop_ros.stats.sequential.PairedProcess` for ``n_sequences`` sequences, e.g.
        ``lambda r, s: make_process("step", r, alpha=0.05, alternative="greater", n_max=100, seed=s)``.
        Each chunk gets a new ``seed`` drawn from ``rng``, so a randomized test (STEP) never
        reuses its uniforms across chunks (seed 003 §IV-B: the randomization is part of the test); deterministic tests ignore it.
    model : ScoreModel
        The score laws (:func:`bernoulli`, :func:`partial_credit`, :func:`continuous_beta`).
    reps : int
        Number of simulated paired sequences.
    n_max : int
        Trials per sequence: the test's budget.
    rng : numpy.random.Generator
        Source of all randomness.  The result is a deterministic function of its state,
        ``reps``, ``n_max`` and ``chunk``.
    chunk : int, optional
        Sequences simulated at once (memory ``~ 2 * 8 * chunk * n_max`` bytes).  The default
        keeps each score array near 16 MiB.
    progress : bool or callable, optional
        ``True``: a tqdm progress bar on stderr; a callable: ``progress(done, total)`` after every
        trial of every chunk, in simulated pairs (``total = reps * n_max``; a chunk whose sequences
        all decided early counts as fed to ``n_max``).

    Returns
    -------
    SimulationSummary

    Examples
    --------
    A test that never decides has no power, no false claims, and always runs to ``n_max``:

    >>> class Never:
    ...     name, alpha = "never", 0.05
    ...     def __init__(self, r): self.n, self.decision, self.stopping_trial = 0, np.zeros(r, np.int8), np.zeros(r, np.int64)
    ...     def update(self, a, b): self.n += 1
    ...     def pvalue(self): return np.ones(self.decision.size)
    ...     def evalue(self): return np.ones(self.decision.size)
    >>> s = monte_carlo(lambda r, seed: Never(r), bernoulli(0.2, 0.6), reps=10, n_max=5, rng=np.random.default_rng(0))
    >>> s.power, s.fpr, s.mean_ttd
    (0.0, 0.0, 5.0)
    """
    reps = check_positive_int(reps, "reps")
    n_max = check_positive_int(n_max, "n_max")
    if not isinstance(rng, np.random.Generator):
        raise StatsInputError(f"`rng` must be a numpy.random.Generator; found {type(rng).__name__}")
    if not isinstance(model, ScoreModel):
        raise StatsInputError(f"`model` must be a ScoreModel; found {type(model).__name__}")
    chunk = max(1, _CHUNK_ELEMENTS // n_max) if chunk is None else check_positive_int(chunk, "chunk")

    decisions = np.empty(reps, dtype=np.int8)
    stops = np.empty(reps, dtype=np.int64)
    total = reps * n_max
    with tqdm(total=total, unit="pair", unit_scale=True, disable=progress is not True, file=sys.stderr,
              leave=False) as bar:

        def report(done: int) -> None:
            bar.update(done - bar.n)
            if callable(progress):
                progress(done, total)

        for start in range(0, reps, chunk):
            size = min(chunk, reps - start)
            scores_a, scores_b = model.sample(rng, size, n_max)
            seed = int(rng.integers(2**63 - 1))
            outcome = run_batch(process_factory(size, seed), scores_a, scores_b,
                                lambda n: report(start * n_max + size * n))
            decisions[start : start + size] = outcome.decision
            stops[start : start + size] = outcome.stopping_trial
            report((start + size) * n_max)

    b_better = float(np.mean(decisions == Decision.B_BETTER))
    a_better = float(np.mean(decisions == Decision.A_BETTER))
    decided = (decisions == Decision.B_BETTER) | (decisions == Decision.A_BETTER)
    ttd = np.where(decided, stops, n_max).astype(np.float64)
    if model.is_null:
        power, fpr = math.nan, b_better + a_better
    elif model.mean_b > model.mean_a:
        power, fpr = b_better, a_better
    else:
        power, fpr = a_better, b_better
    return SimulationSummary(
        reps=reps,
        n_max=n_max,
        mean_a=model.mean_a,
        mean_b=model.mean_b,
        power=power,
        power_se=math.nan if math.isnan(power) else _binomial_se(power, reps),
        fpr=fpr,
        fpr_se=_binomial_se(fpr, reps),
        p_b_better=b_better,
        p_a_better=a_better,
        mean_ttd=float(ttd.mean()),
        ttd_se=float(ttd.std(ddof=1) / math.sqrt(reps)) if reps > 1 else math.nan,
    )
