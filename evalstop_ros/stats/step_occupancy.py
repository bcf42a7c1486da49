"""Exact forward propagation of STEP's not-yet-stopped state distribution (seed 003, Eqs. 5 and 8).

With a ``floor`` > 0 rows of negligible mass are dropped into a rigorous upper bound (docs/step_synthesis.md).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Columns added on each side when mass reaches the band's edge (additive growth keeps the band
#: within a few columns of the true reach, which is what bounds synthesis memory).
_WIDEN_BY = 6
#: Points updated per pass in :meth:`Occupancy.advance`: small enough that a pass's slice of the
#: band and its scratch copy stay in a core's cache (several times faster than 32 at ``N_max`` 500).
_POINTS_PER_PASS = 4


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
        self._stay0, self._stay1 = 1.0 - self.p0, 1.0 - self.p1
        self.n_max = n_max
        self.n = 0
        self.half_width = 4
        self.mass = np.zeros((self.p0.shape[0], n_max + 2, 2 * self.half_width + 1))
        self.mass[:, 0, self.half_width] = 1.0
        self.floor = floor
        #: The groups of points updated together, and the rows ``lo .. hi`` of each that hold
        #: its unstopped mass not dropped (every other row of the group is 0).
        self._groups = [slice(start, start + _POINTS_PER_PASS) for start in range(0, self.p0.shape[0], _POINTS_PER_PASS)]
        self._lo = np.zeros(len(self._groups), dtype=np.intp)
        self._hi = np.zeros(len(self._groups), dtype=np.intp)
        self._starts = np.array([part.start for part in self._groups], dtype=np.intp)
        self._group_of = np.repeat(np.arange(len(self._groups)), _POINTS_PER_PASS)[: self.p0.shape[0]]
        #: Rows ``lo .. hi`` hold every unstopped mass not dropped, at every point.
        self.lo, self.hi = 0, 0
        #: Per point, the mass dropped with its rows (0 at ``floor`` 0).
        self.dropped = np.zeros(self.p0.shape[0])
        self._scratch = np.empty(0)

    def _widen(self) -> None:
        extra = _WIDEN_BY
        points, rows, width = self.mass.shape
        wider = np.zeros((points, rows, width + 2 * extra))  # pages of rows not reached yet stay untouched
        wider[:, : self.n + 1, extra : extra + width] = self.mass[:, : self.n + 1]  # rows past n hold nothing
        self.mass = wider
        self.half_width += extra

    def advance(self) -> None:
        """Apply one trial of the dynamics (Eq. 5) to every point's unstopped mass."""
        h = self.half_width
        if h < self.n + 1 and self.mass[:, self.lo : self.hi + 1, [0, 2 * h]].any():
            self._widen()
        width = self.mass.shape[2]
        size = _POINTS_PER_PASS * int((self._hi - self._lo).max() + 2) * (width - 1)
        if self._scratch.size < size:
            self._scratch = np.empty(2 * size)
        for part, lo, hi in zip(self._groups, self._lo, self._hi):
            n_rows = hi + 2 - lo
            q = self.mass[part, lo : hi + 2]
            points = q.shape[0]
            # z1 ~ Ber(p1): g -> g + 1
            moved = self._scratch[: points * n_rows * (width - 1)].reshape(points, n_rows, width - 1)
            np.multiply(q[:, :, :-1], self.p1[part], out=moved)
            q *= self._stay1[part]
            q[:, :, 1:] += moved
            # z0 ~ Ber(p0): (a, g) -> (a + 1, g - 1)
            moved = self._scratch[: points * (n_rows - 1) * (width - 1)].reshape(points, n_rows - 1, width - 1)
            np.multiply(q[:, :-1, 1:], self.p0[part], out=moved)
            q *= self._stay0[part]
            q[:, 1:, :-1] += moved
        self.n += 1
        self._hi += 1
        if self.floor > 0.0:
            self._drop_empty_rows()
        self.lo, self.hi = int(self._lo.min()), int(self._hi.max())

    def _drop_empty_rows(self) -> None:
        """Drop the rows at either end of each group's ``lo .. hi`` below :attr:`floor` at its every point.

        The end rows of all groups are summed at once (the sums :meth:`_drop_group_rows` would take), and
        only a group with an end row to drop goes on to it."""
        points = np.arange(self.mass.shape[0])
        head = self.mass[points, self._lo[self._group_of]].sum(axis=1)
        tail = self.mass[points, self._hi[self._group_of]].sum(axis=1)
        kept = (np.maximum.reduceat(head, self._starts) >= self.floor) & (
            (np.maximum.reduceat(tail, self._starts) >= self.floor) | (self._hi <= self._lo))
        for group in np.flatnonzero(~kept):
            self._drop_group_rows(int(group))

    def _drop_group_rows(self, group: int) -> None:
        """Move the rows at either end of a group's ``lo .. hi`` below :attr:`floor` at its every point into :attr:`dropped`."""
        part, lo, hi = self._groups[group], int(self._lo[group]), int(self._hi[group])
        gone: list[NDArray[np.float64]] = []
        first = lo
        while first <= hi:
            row_mass = self.mass[part, first].sum(axis=1)
            if (row_mass >= self.floor).any():
                break
            gone.append(row_mass)
            first += 1
        last = hi
        tail: list[NDArray[np.float64]] = []
        while last > first:
            row_mass = self.mass[part, last].sum(axis=1)
            if (row_mass >= self.floor).any():
                break
            tail.append(row_mass)
            last -= 1
        if gone or tail:
            # summed in row order, as the rows lie
            self.dropped[part] += np.stack(gone + tail[::-1], axis=1).sum(axis=1)
            self.mass[part, lo:first] = 0.0
            self.mass[part, last + 1 : hi + 1] = 0.0
            self._lo[group], self._hi[group] = first, max(last, first)

    def reach(self, gaps: int) -> NDArray[np.bool_]:
        """``(n + 1, gaps)``: whether state ``(a, a + g)``, ``g = 1..gaps``, holds more than :attr:`floor` at some point."""
        block = self.reject_block(gaps)
        out = np.zeros(block.shape[1:], dtype=bool)
        for part, lo, hi in zip(self._groups, self._lo, self._hi):
            out[lo : hi + 1] |= (block[part, lo : hi + 1] > self.floor).any(axis=0)
        return out

    def reject_block(self, gaps: int) -> NDArray[np.float64]:
        """View ``(B, n + 1, gaps)`` of the mass on states ``g = 1..gaps`` (policy B ahead)."""
        self._ensure(gaps)
        h = self.half_width
        return self.mass[:, : self.n + 1, h + 1 : h + 1 + gaps]

    def pair_mass(self, low: NDArray[np.intp], high: NDArray[np.intp], gap_index: NDArray[np.intp],
                  out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """``(B, k)``: the mass on states ``(low, low + gap_index + 1)`` plus, where ``high != low``, on
        ``(high, high + gap_index + 1)``: the tied pairs of the synthesis's LP columns (into ``out`` if given).

        ``low`` ascending.  Each group of points is gathered only over the states whose row it holds (a
        run of ``low``, and of the mirrors around it); every other entry is 0 there, and adding 0 is
        exact, so this equals the sum of the two full gathers.  A state that is its own mirror reads
        its second term from row ``n_max + 1``, which never holds mass (step ``n`` fills rows ``0..n``).
        """
        width = self.mass.shape[2]
        flat = self.mass.reshape(self.mass.shape[0], -1)
        column = self.half_width + 1 + gap_index
        low_index = low * width + column
        high_index = np.where(high != low, high * width + column, (self.mass.shape[1] - 1) * width)
        gaps = int(gap_index.max()) + 1 if gap_index.size else 0
        if out is None:
            out = np.empty((self.mass.shape[0], low.size))
        for part, lo, hi in zip(self._groups, self._lo, self._hi):
            start, stop = np.searchsorted(low, (lo, hi + 1))
            out[part, :start] = 0.0
            out[part, start:stop] = flat[part][:, low_index[start:stop]]
            out[part, stop:] = 0.0
            # high = n - low - gap_index - 1 lies in lo..hi only if low lies in n - gaps - hi .. n - 1 - lo
            start, stop = np.searchsorted(low, (self.n - gaps - hi, self.n - lo))
            out[part, start:stop] += flat[part][:, high_index[start:stop]]
        return out

    def _ensure(self, gaps: int) -> None:
        while self.half_width < gaps:
            self._widen()

    def stop(self, weights: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Remove the mass that stops now and return ``(rejected, accepted)`` per point.

        ``weights[a, g - 1]`` is the reject probability ``w_n(a, a + g)`` for ``g >= 1``; the
        accept region is its mirror, ``w_acc(S0, S1) = w_rej(S1, S0)`` (seed 003 footnote 4).
        Only the rows ``lo .. hi`` (the others hold no mass) and the gap columns with some
        ``w > 0`` are touched; each state's mass is multiplied by ``1 - w`` as in Eq. 5.
        """
        gaps = weights.shape[1]
        self._ensure(gaps)
        h, lo, hi = self.half_width, self.lo, min(self.hi, weights.shape[0] - 1)
        stopped = [np.zeros(self.mass.shape[0]), np.zeros(self.mass.shape[0])]
        if hi < lo or gaps == 0:
            return stopped[0], stopped[1]
        g = np.arange(1, gaps + 1)
        # reject state (a, a + g) sits at (a, +g)
        reject_w = weights[lo : hi + 1]
        # its mirror (a + g, a) at (a + g, -g): row r of the band takes w_n(r - g, r), r - g >= 0
        source = np.arange(lo, hi + 1)[:, None] - g[None, :]
        accept_w = np.where(source >= 0, weights[np.maximum(source, 0), g - 1], 0.0)
        for out, w, band in ((stopped[0], reject_w, self.mass[:, :, h + 1 : h + 1 + gaps]),
                             (stopped[1], accept_w, self.mass[:, :, h - gaps : h][:, :, ::-1])):
            used = np.flatnonzero(w.any(axis=0))
            if used.size == 0:
                continue
            cols = slice(int(used[0]), int(used[-1]) + 1)
            w = w[:, cols]
            keep = 1.0 - w
            for part, first, last in zip(self._groups, self._lo, self._hi):
                last = min(last, hi)
                if last < first:
                    continue
                block = band[part, first : last + 1, cols]
                rows = slice(first - lo, last + 1 - lo)
                out[part] = np.einsum("bij,ij->b", block, w[rows])
                block *= keep[rows]
        return stopped[0], stopped[1]
