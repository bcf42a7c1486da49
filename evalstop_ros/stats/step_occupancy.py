"""Exact forward propagation of STEP's not-yet-stopped state distribution (seed 003, Eqs. 5 and 8).

The state after ``n`` paired Bernoulli trials is ``(S0, S1)``; we store it in the coordinates
``(a, g) = (S0, S1 - S0)`` so that the unstopped mass, which lives in a band ``|g| <= G`` around
the diagonal (everything further out has been stopped), fits a ``(B, N_max + 1, 2G + 1)`` array
for ``B`` parameter points at once.  One step applies the dynamics of Eq. 5,

.. math::  q_n(a, g) = \\sum_{z_0, z_1} P(z_0) P(z_1)\\, q_{n-1}(a - z_0, g - z_1 + z_0),

as two in-place one-dimensional updates (first ``z1``, then ``z0``), so the peak memory is two
copies of the band.  The band widens on demand when mass reaches its edge.

With a ``floor`` > 0 the propagation also keeps only the rows ``a`` (successes of policy A)
that hold mass: a row whose mass is below ``floor`` at every point is removed and its mass added
to :attr:`Occupancy.dropped`.  Whatever that mass would have done later, it can stop in the reject
region at most once, so ``rejected + dropped`` is a rigorous upper bound of the reject
probability (:func:`~.step_oc.check_type1` uses it); at ``floor`` 0 nothing is dropped and the
propagation is exact.  Under a null the mass of ``S0 ~ Bin(n, p)`` lives within a few standard
deviations of ``n p``, so most rows go (a several-fold speed-up at ``N_max`` 500).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Columns added on each side when mass reaches the band's edge (additive growth keeps the band
#: within a few columns of the true reach, which is what bounds synthesis memory).
_WIDEN_BY = 6
#: Points updated per pass in :meth:`Occupancy.advance` (bounds the temporary copy).
_POINTS_PER_PASS = 32


class Occupancy:
    """Sub-probabilities of being in each state without having stopped, for ``B`` points.

    Parameters
    ----------
    p0, p1:
        ``(B,)`` success probabilities of policy A (pi_0) and policy B (pi_1).
    n_max:
        Horizon; fixes the ``a`` extent of the arrays.
    floor:
        Rows of less mass than this at every point are dropped into :attr:`dropped` (module
        docstring); 0 (default) keeps every row: exact.
    """

    def __init__(self, p0: NDArray[np.float64], p1: NDArray[np.float64], n_max: int, *, floor: float = 0.0) -> None:
        self.p0 = np.asarray(p0, dtype=np.float64)[:, None, None]
        self.p1 = np.asarray(p1, dtype=np.float64)[:, None, None]
        self.n_max = n_max
        self.n = 0
        self.half_width = 4
        self.mass = np.zeros((self.p0.shape[0], n_max + 2, 2 * self.half_width + 1))
        self.mass[:, 0, self.half_width] = 1.0
        self.floor = floor
        #: Rows ``lo .. hi`` hold every unstopped mass not dropped.
        self.lo, self.hi = 0, 0
        #: Per point, the mass dropped with its rows (0 at ``floor`` 0).
        self.dropped = np.zeros(self.p0.shape[0])

    def _widen(self) -> None:
        extra = _WIDEN_BY
        self.mass = np.pad(self.mass, ((0, 0), (0, 0), (extra, extra)))
        self.half_width += extra

    def advance(self) -> None:
        """Apply one trial of the dynamics (Eq. 5) to every point's unstopped mass."""
        h = self.half_width
        edge = self.mass[:, : self.n + 1, [0, 2 * h]]
        if self.half_width < self.n + 1 and edge.any():
            self._widen()
        rows = slice(self.lo, self.hi + 2)
        for start in range(0, self.mass.shape[0], _POINTS_PER_PASS):
            part = slice(start, start + _POINTS_PER_PASS)
            q, p0, p1 = self.mass[part, rows], self.p0[part], self.p1[part]
            # z1 ~ Ber(p1): g -> g + 1
            moved = q[:, :, :-1] * p1
            q *= 1.0 - p1
            q[:, :, 1:] += moved
            # z0 ~ Ber(p0): (a, g) -> (a + 1, g - 1)
            moved = q[:, :-1, 1:] * p0
            q *= 1.0 - p0
            q[:, 1:, :-1] += moved
        self.n += 1
        self.hi += 1
        if self.floor > 0.0:
            self._drop_empty_rows()

    def _drop_empty_rows(self) -> None:
        """Move the rows at either end of ``lo .. hi`` below :attr:`floor` at every point into :attr:`dropped`."""
        row_mass = self.mass[:, self.lo : self.hi + 1].sum(axis=2)  # (B, rows)
        keep = np.flatnonzero((row_mass >= self.floor).any(axis=0))
        first, last = (int(keep[0]), int(keep[-1])) if keep.size else (row_mass.shape[1], -1)
        gone = np.r_[0:first, last + 1 : row_mass.shape[1]]
        if gone.size:
            self.dropped += row_mass[:, gone].sum(axis=1)
            self.mass[:, self.lo + gone] = 0.0
            self.lo, self.hi = self.lo + first, max(self.lo + last, self.lo + first)

    def reject_block(self, gaps: int) -> NDArray[np.float64]:
        """View ``(B, n + 1, gaps)`` of the mass on states ``g = 1..gaps`` (policy B ahead)."""
        self._ensure(gaps)
        h = self.half_width
        return self.mass[:, : self.n + 1, h + 1 : h + 1 + gaps]

    def _ensure(self, gaps: int) -> None:
        while self.half_width < gaps:
            self._widen()

    def stop(self, weights: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Remove the mass that stops now and return ``(rejected, accepted)`` per point.

        ``weights[a, g - 1]`` is the reject probability ``w_n(a, a + g)`` for ``g >= 1``; the
        accept region is its mirror, ``w_acc(S0, S1) = w_rej(S1, S0)`` (seed 003 footnote 4).
        Only the states with ``w > 0`` are touched.
        """
        self._ensure(weights.shape[1])
        a, g = np.nonzero(weights)
        w = weights[a, g]
        g = g + 1
        h = self.half_width
        stopped = []
        # reject state (a, a + g) sits at (a, +g); its mirror (a + g, a) at (a + g, -g)
        for rows, cols, keep in ((a, h + g, slice(None)), (a + g, h - g, a + g <= self.n)):
            rows, cols, w_keep = rows[keep], cols[keep], w[keep]
            mass = self.mass[:, rows, cols]
            stopped.append(mass @ w_keep)
            self.mass[:, rows, cols] = mass * (1.0 - w_keep)
        return stopped[0], stopped[1]
