"""Permutation paths of the paper's step-down AdaStop (``"split"`` and ``"relabel"``, seed 002 §3.3-3.4)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["PaperPaths", "all_splits"]


def all_splits(n: int) -> NDArray[np.float64]:
    """``(C(2n, n), 2n)`` signs of every split of 2n positions into n "first" (+1) and n (-1)."""
    total = math.comb(2 * n, n)
    signs = -np.ones((total, 2 * n))
    for row, first in enumerate(itertools.combinations(range(2 * n), n)):
        signs[row, list(first)] = 1.0
    return signs


class PaperPaths:
    """Path machinery of the ``"split"`` and ``"relabel"`` schemes (mixed into ``AdaStop``)."""

    n_agents: int
    n_per_interim: int
    n_interims: int
    n_permutations: int
    seed: int
    _pairs: NDArray[np.intp]
    _open: NDArray[np.bool_]
    _relabel: bool
    _exact: list[bool]
    _splits: NDArray[np.float64] | None
    _random_signs: NDArray[np.int8] | None
    _orders: NDArray[np.int16] | NDArray[np.int32] | None
    _relabel_cache: dict[tuple[int, tuple[int, ...]], NDArray[np.float64]]
    _blocks: list[NDArray[np.float64]]

    def _draw_paths(self) -> NDArray[np.int8]:
        """``(B, K, 2N)`` split signs: path 0 the identity, the others uniform, from ``seed``."""
        n, b, k = self.n_per_interim, self.n_permutations, self.n_interims
        rng = np.random.default_rng(self.seed)
        first = np.argsort(rng.random((b - 1, k, 2 * n)), axis=-1)[..., :n]  # uniform n-subsets
        signs = -np.ones((b, k, 2 * n), dtype=np.int8)
        np.put_along_axis(signs[1:], first, np.int8(1), axis=-1)
        signs[0, :, :n] = 1
        return signs

    def _draw_relabelings(self) -> NDArray[np.int32]:
        """``(B, K, L N)`` orders of the pooled block positions: path 0 the identity, from ``seed``.

        Restricted to the positions of a set of agents, the order stays uniform over that set, so
        one draw serves every component (see :meth:`_group_sums`).
        """
        n, b, k, agents = self.n_per_interim, self.n_permutations, self.n_interims, self.n_agents
        rng = np.random.default_rng(self.seed)
        orders = np.empty((b, k, agents * n), dtype=np.int16 if agents * n < 2**15 else np.int32)
        orders[0] = np.arange(agents * n)
        orders[1:] = np.argsort(rng.random((b - 1, k, agents * n)), axis=-1)
        return orders

    def _components(self, open_mask: NDArray[np.bool_]) -> tuple[tuple[int, ...], ...]:
        """Agent sets of the connected components of the graph of open comparisons."""
        parent = list(range(self.n_agents))

        def root(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for l1, l2 in self._pairs[open_mask]:
            parent[root(int(l1))] = root(int(l2))
        groups: dict[int, list[int]] = {}
        for l in sorted({int(x) for x in self._pairs[open_mask].ravel()}):
            groups.setdefault(root(l), []).append(l)
        return tuple(tuple(g) for g in groups.values())

    def _group_sums(self, i: int, component: tuple[int, ...]) -> NDArray[np.float64]:
        """``(B, L)`` sums of the scores each agent of ``component`` receives at block ``i`` (0-based).

        Each path deals the block's scores of the component's agents among those agents, N each,
        in the order the path's draw puts their positions (a uniform relabeling of the pool).
        """
        key = (i, component)
        cached = self._relabel_cache.get(key)
        if cached is not None:
            return cached
        assert self._orders is not None
        n = self.n_per_interim
        inside = np.zeros(self.n_agents * n, dtype=bool)
        for l in component:
            inside[l * n : (l + 1) * n] = True
        order = self._orders[:, i, :]
        picked = order[inside[order]].reshape(order.shape[0], len(component), n)
        sums = np.zeros((order.shape[0], self.n_agents))
        sums[:, list(component)] = self._blocks[i].reshape(-1)[picked].sum(axis=2)
        self._relabel_cache[key] = sums
        return sums

    def _cumulative(self, k: int, pairs: NDArray[np.intp]) -> tuple[NDArray[np.float64], int]:
        """Signed sums of the paths of interim ``k`` for ``pairs``: ``(k, J, m_k)`` and id's column.

        Entry ``[m - 1, j, p]`` is the Eq. (8) sum (before ``| |``) of comparison ``j`` over the
        first ``m`` blocks of path ``p``.
        """
        n = self.n_per_interim
        l1, l2 = pairs[:, 0], pairs[:, 1]
        if self._relabel:
            components = self._components(self._open)
            cum = np.empty((k, len(pairs), self.n_permutations))
            for i in range(k):
                sums = np.zeros((self.n_permutations, self.n_agents))
                for component in components:
                    sums += self._group_sums(i, component)
                cum[i] = (sums[:, l1] - sums[:, l2]).T
                if i:
                    cum[i] += cum[i - 1]
            return cum, 0
        if self._exact[k - 1]:
            assert self._splits is not None
            half = self._splits[self._splits[:, 0] == 1.0]  # global swap removed: C/2 splits
            grids = []
            for i in range(k):
                table = half if i == 0 else self._splits
                block = self._blocks[i]
                first, second = table[:, :n] @ block.T, table[:, n:] @ block.T  # (S, L)
                grids.append((first[:, l1] + second[:, l2]).T)  # (J, S)
            sizes = [g.shape[1] for g in grids]
            cum = np.zeros((k, len(pairs), math.prod(sizes)))
            running = np.zeros((len(pairs),) + (1,) * k)
            for i, g in enumerate(grids):
                shape = [len(pairs)] + [1] * k
                shape[i + 1] = sizes[i]
                running = running + g.reshape(shape)
                cum[i] = np.broadcast_to(running, (len(pairs), *sizes)).reshape(len(pairs), -1)
            # the identity split is row "positions 0..N-1 first" of each table
            identity = [int(np.flatnonzero((t[:, :n] == 1.0).all(axis=1))[0]) for t in
                        [half] + [self._splits] * (k - 1)]
            return cum, int(np.ravel_multi_index(identity, sizes))
        assert self._random_signs is not None
        cum = np.empty((k, len(pairs), self.n_permutations))
        for i in range(k):
            signs = self._random_signs[:, i, :].astype(np.float64)
            block = self._blocks[i]
            first, second = signs[:, :n] @ block.T, signs[:, n:] @ block.T  # (B, L)
            cum[i] = (first[:, l1] + second[:, l2]).T
            if i:
                cum[i] += cum[i - 1]
        return cum, 0
