"""Exact forward propagation of STEP's not-yet-stopped state distribution (seed 003, Eqs. 5 and 8).

The state after ``n`` paired Bernoulli trials is ``(S0, S1)``; we store it in the coordinates
``(a, g) = (S0, S1 - S0)`` so that the unstopped mass, which lives in a band ``|g| <= G`` around
the diagonal (everything further out has been stopped), fits a ``(B, N_max + 1, 2G + 1)`` array
for ``B`` parameter points at once.  One step applies the dynamics of Eq. 5,

.. math::  q_n(a, g) = \\sum_{z_0, z_1} P(z_0) P(z_1)\\, q_{n-1}(a - z_0, g - z_1 + z_0),

as two in-place one-dimensional updates (first ``z1``, then ``z0``), so the peak memory is two
copies of the band.  The band widens on demand when mass reaches its edge.
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
    """

    def __init__(self, p0: NDArray[np.float64], p1: NDArray[np.float64], n_max: int) -> None:
        self.p0 = np.asarray(p0, dtype=np.float64)[:, None, None]
        self.p1 = np.asarray(p1, dtype=np.float64)[:, None, None]
        self.n_max = n_max
        self.n = 0
        self.half_width = 4
        self.mass = np.zeros((self.p0.shape[0], n_max + 2, 2 * self.half_width + 1))
        self.mass[:, 0, self.half_width] = 1.0

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
        for start in range(0, self.mass.shape[0], _POINTS_PER_PASS):
            part = slice(start, start + _POINTS_PER_PASS)
            q, p0, p1 = self.mass[part, : self.n + 2], self.p0[part], self.p1[part]
            # z1 ~ Ber(p1): g -> g + 1
            moved = q[:, :, :-1] * p1
            q *= 1.0 - p1
            q[:, :, 1:] += moved
            # z0 ~ Ber(p0): (a, g) -> (a + 1, g - 1)
            moved = q[:, :-1, 1:] * p0
            q *= 1.0 - p0
            q[:, 1:, :-1] += moved
        self.n += 1

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
