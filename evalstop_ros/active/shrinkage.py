"""A hierarchical Bayesian (shrinkage) Gaussian-process surrogate for seed 004's Algorithm 1, beside the MLP.

Closed form, with the MLP's interface; the model is in docs/active.md.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg, stats

from .errors import ActiveError
from .observations import average_log_likelihood, check_observations
from .surrogate import OUTCOMES

__all__ = ["DRAWS", "ShrinkageSurrogate"]

FloatArray = NDArray[np.float64]
#: Prior SDs of the overall level, policy ability, task effect and policy x task effect.
PRIOR_SD = (0.3, 0.2, 0.2, 0.15)
#: Grids of the empirical-Bayes search: prior scale ``s`` and noise variance ``sigma^2``.
SCALES = (0.5, 1.0, 2.0)
NOISES = (0.05, 0.12, 0.25)
#: How posterior samples are drawn: through the covariance's symmetric square root (any LAPACK build
#: draws the same), or through its eigenvectors (the journals written before the choice existed).
DRAWS = ("symmetric-root", "eigenvectors")


class ShrinkageSurrogate:
    """Gaussian-process shrinkage surrogate over every (policy, task) pair (module docstring).

    Parameters
    ----------
    n_policies:
        ``M``.
    task_embeddings:
        ``(N, d)`` array; only the cosine similarities of its centred rows are used.
    outcome:
        ``"binary"`` or ``"binned"``.
    bins:
        Bins of the ``"binned"`` head (25, the paper's EIG bins).
    """

    def __init__(self, n_policies: int, task_embeddings: ArrayLike, *, outcome: str = "binary", bins: int = 25,
                 draws: str = "symmetric-root") -> None:
        if outcome not in OUTCOMES:
            raise ActiveError(f"`outcome` should be one of {OUTCOMES}; found {outcome!r}")
        if draws not in DRAWS:
            raise ActiveError(f"`draws` should be one of {DRAWS}; found {draws!r}")
        self.draws = draws
        if n_policies < 1 or bins < 2:
            raise ActiveError(f"`n_policies` must be >= 1 and `bins` >= 2; found {n_policies!r}, {bins!r}")
        tasks = np.asarray(task_embeddings, dtype=np.float64)
        if tasks.ndim != 2 or tasks.shape[0] < 1:
            raise ActiveError(f"`task_embeddings` must be a non-empty (N, d) array; found shape {tasks.shape}")
        centred = tasks - tasks.mean(axis=0)
        norm = np.linalg.norm(centred, axis=1, keepdims=True)
        unit = np.where(norm > 1e-12, centred / np.where(norm > 1e-12, norm, 1.0), 0.0)
        similarity = unit @ unit.T
        np.fill_diagonal(similarity, 1.0)
        m, n = n_policies, tasks.shape[0]
        self.outcome, self.bins, self._shape = outcome, bins if outcome == "binned" else 2, (m, n)
        t0, ta, tg, th = (sd**2 for sd in PRIOR_SD)
        same = np.eye(m)
        self._prior = (t0 + ta * np.kron(same, np.ones((n, n))) + tg * np.kron(np.ones((m, m)), similarity)
                       + th * np.kron(same, similarity))
        self._level = 0.5
        self._mean: FloatArray = np.full(m * n, 0.5)
        self._cov: FloatArray = self._prior.copy()
        self.noise = 0.25

    @property
    def shape(self) -> tuple[int, int]:
        """``(M, N)``: policies x tasks."""
        return self._shape

    def fit(self, policy: ArrayLike, task: ArrayLike, outcomes: ArrayLike, *, warm_start: bool = False) -> float:
        """Condition on the data (closed form; ``warm_start`` is accepted and changes nothing).

        Returns the log marginal likelihood of the cell means at the chosen ``(s, sigma^2)``.
        """
        del warm_start
        p, t, y = check_observations(policy, task, outcomes, shape=self.shape, outcome=self.outcome)
        if not y.size:
            self._mean, self._cov = np.full(self._prior.shape[0], 0.5), self._prior.copy()
            return float("nan")
        cell = p * self.shape[1] + t
        seen, inverse, count = np.unique(cell, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=y) / count
        centred = means - self._level
        block = self._prior[np.ix_(seen, seen)]
        best: tuple[float, float, float, FloatArray] | None = None
        for scale, noise in itertools.product(SCALES, NOISES):
            factor = linalg.cho_factor(scale * block + np.diag(noise / count), lower=True)
            alpha = linalg.cho_solve(factor, centred)
            evidence = -0.5 * float(centred @ alpha) - float(np.log(np.diag(factor[0])).sum())
            if best is None or evidence > best[0]:
                best = (evidence, scale, noise, alpha)
        assert best is not None
        evidence, scale, self.noise, alpha = best
        cross = scale * self._prior[:, seen]
        factor = linalg.cho_factor(scale * block + np.diag(self.noise / count), lower=True)
        self._mean = self._level + cross @ alpha
        self._cov = scale * self._prior - cross @ linalg.cho_solve(factor, cross.T)
        return evidence

    def _distributions(self, f: FloatArray) -> FloatArray:
        """Outcome distribution of each mean in ``f`` (any shape), last axis the classes."""
        if self.outcome == "binary":
            q = np.clip(f, 1e-3, 1.0 - 1e-3)
            return np.stack([1.0 - q, q], axis=-1)
        edges = np.linspace(0.0, 1.0, self.bins + 1)
        cdf = stats.norm.cdf((edges - np.clip(f, 0.0, 1.0)[..., None]) / np.sqrt(self.noise))
        mass = np.diff(cdf, axis=-1) + 1e-9
        return np.asarray(mass / mass.sum(axis=-1, keepdims=True))

    def predict(self, *, samples: int = 0, seed: int = 0) -> FloatArray:
        """Outcome distributions of every pair, ``(S, M, N, B)``; ``samples=0`` uses the posterior mean."""
        m, n = self.shape
        if samples == 0:
            f = self._mean[None]
        else:
            rng = np.random.default_rng(seed)
            root = self.covariance_root() if self.draws == "symmetric-root" else self._eigenvector_root()
            f = self._mean[None] + rng.standard_normal((samples, m * n)) @ root.T
        return self._distributions(f).reshape(f.shape[0], m, n, self.bins)

    def covariance_root(self) -> FloatArray:
        """The unique symmetric positive semi-definite square root ``R`` of the posterior covariance.

        ``f = mean + R z`` with ``z ~ N(0, I)`` draws the posterior (the samples the EIG of seed 004
        Eq. 1 averages over).  ``R = V diag(sqrt(lambda)) V^T`` is a function of the matrix alone:
        ``numpy.linalg.eigh`` may return the eigenvectors with other signs, in another order, or
        in another basis of a repeated eigenvalue on another LAPACK build, and ``R`` is the same
        (up to rounding) for all of them, so an audit replays the draws on any machine.  (Drawing
        through ``V diag(sqrt(lambda))`` itself, as before, was not.)  Eigenvalues below 0
        (rounding of a singular covariance) count as 0.
        """
        values, vectors = np.linalg.eigh(self._cov)
        root = (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
        return np.asarray(0.5 * (root + root.T))

    def _eigenvector_root(self) -> FloatArray:
        """``V diag(sqrt(lambda))``: the draws of sessions journaled before ``draws`` existed (``eigenvectors``).

        A square root of the covariance too, but LAPACK's choice of the eigenvectors' signs, order and
        basis moves the draws: such a session replays its choices only on a machine whose LAPACK
        returns the same eigenvectors.
        """
        values, vectors = np.linalg.eigh(self._cov)
        return np.asarray(vectors * np.sqrt(np.clip(values, 0.0, None)))

    def centres(self) -> FloatArray:
        """The outcome each class stands for: ``(0, 1)``, or the bin centres."""
        if self.outcome == "binary":
            return np.array([0.0, 1.0])
        return (np.arange(self.bins) + 0.5) / self.bins

    def mean(self) -> FloatArray:
        """Posterior mean outcome of every pair, ``(M, N)``, clipped to [0, 1]."""
        return np.asarray(np.clip(self._mean, 0.0, 1.0).reshape(self.shape))

    def log_likelihood(self, policy: ArrayLike, task: ArrayLike, outcomes: ArrayLike) -> float:
        """Average log-likelihood (density for ``"binned"``: ``log(q_b K)``) of outcomes (seed 004 §V)."""
        p, t, y = check_observations(policy, task, outcomes, shape=self.shape, outcome=self.outcome)
        return average_log_likelihood(self.predict()[0][p, t], y, outcome=self.outcome, bins=self.bins)
