r"""AdaStop by closed testing over exact per-partition permutation tests: strong family-wise control.

Replaces the paper's step-down (seed 002 Alg. 3, Lemma 3) for three or more agents; the argument
is in docs/adastop.md and docs/statistics.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from .adastop_welch import CHUNK, WelchReference, row_chunks, spend_interim, welch_z_squared
from .errors import StatsInputError

__all__ = ["MAX_PARTITIONS", "ClosedAdaStop", "closed_partitions"]

#: Most intersection tests (partitions of the agents) one comparison may hold.
MAX_PARTITIONS = 1000
#: Largest ``N`` whose within-block ranks are counted by direct key comparisons (cost ``N`` passes
#: per agent); above, by running counts over the ranks (a few passes, independent of ``N``).
_COUNT_BY_COMPARISON_MAX = 12
#: Fewest positions times paths (``L N B``) of an interim whose blocks go to the thread pool: below,
#: handing the blocks to threads costs more CPU than their arrays (B = 200: twice the CPU of one
#: thread, and no faster), above it both cores shorten the interim (B = 10^4 at 5 agents, N = 5).
_POOL_MIN_WORK = 100_000


_POOL: list[ThreadPoolExecutor] = []
os.register_at_fork(after_in_child=_POOL.clear)  # a forked child has none of the parent's threads


def _thread_pool() -> ThreadPoolExecutor:
    """The threads that compute the blocks' statistics (one per core, at most 4), started once."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="adastop"))
    return _POOL[0]


def _set_partitions(items: Sequence[int]) -> Iterator[list[list[int]]]:
    """Every partition of ``items`` into non-empty blocks (restricted-growth order)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in _set_partitions(rest):
        yield [[first], *smaller]
        for b in range(len(smaller)):
            yield [*smaller[:b], [first, *smaller[b]], *smaller[b + 1 :]]


def _connected(block: Sequence[int], edges: set[frozenset[int]]) -> bool:
    seen, todo = {block[0]}, [block[0]]
    while todo:
        a = todo.pop()
        for b in block:
            if b not in seen and frozenset((a, b)) in edges:
                seen.add(b)
                todo.append(b)
    return len(seen) == len(block)


def closed_partitions(comparisons: Sequence[tuple[int, int]]) -> list[tuple[tuple[int, ...], ...]] | None:
    """The intersection hypotheses of ``comparisons`` as partitions (module docstring).

    Each is a tuple of the non-singleton blocks (sorted agent indices), every block connected by
    the comparisons; the partition with only singletons (no hypothesis) is left out.  ``None``
    when there are more than :data:`MAX_PARTITIONS` (or too many partitions to look through).
    """
    agents = sorted({l for pair in comparisons for l in pair})
    edges = {frozenset(pair) for pair in comparisons}
    found = []
    for count, partition in enumerate(_set_partitions(agents)):
        if count > 200 * MAX_PARTITIONS:
            return None
        blocks = tuple(sorted(tuple(sorted(b)) for b in partition if len(b) > 1))
        if blocks and all(_connected(b, edges) for b in blocks):
            found.append(blocks)
            if len(found) > MAX_PARTITIONS:
                return None
    return found


class ClosedAdaStop:
    """The closed-testing engine behind ``AdaStop(permutation="closed")`` (module docstring).

    Parameters
    ----------
    comparisons : sequence of (int, int)
        ``C_0`` as agent index pairs (at least three agents involved).
    n_agents, n_per_interim, n_interims, alpha, n_permutations, seed :
        As in :class:`~evalstop_ros.stats.adastop.AdaStop`.

    Notes
    -----
    Path 0 is the identity; paths ``1 .. B-1`` give the ``L N`` positions of each interim i.i.d.
    uniform keys, drawn from ``seed`` at construction (stored as their ranks).  Sorting the
    positions of a block by key and dealing them ``N`` per agent is a uniform relabeling of that
    block, independent across disjoint blocks, so one draw serves every partition (Hemerik and
    Goeman 2018: a random subset of the group that contains the identity keeps the test exact).

    Cost: nothing is sorted per block.  Once per interim, for every agent and position,
    the number of the agent's positions with a smaller key is counted; a position's rank inside a
    block is the sum of these counts over the block's agents, and the rank says which agent
    receives it.  Each agent's sum and sum of squares then add its scores in position order (a
    masked sum over positions, all paths at once), so the result is bit for bit that of sorting
    and summing path by path (``test_adastop.py`` checks it against such a plain reference).
    """

    def __init__(
        self, comparisons: Sequence[tuple[int, int]], *, n_agents: int, n_per_interim: int, n_interims: int,
        alpha: float, n_permutations: int, seed: int,
    ) -> None:
        self.comparisons = tuple(comparisons)
        self.n_agents, self.n, self.k_max = n_agents, n_per_interim, n_interims
        self.alpha, self.b = alpha, n_permutations
        partitions = closed_partitions(self.comparisons)
        if partitions is None:
            agents = len({l for pair in self.comparisons for l in pair})
            raise StatsInputError(
                f"permutation 'closed' tests every partition of the agents and {agents} agents with these "
                f"comparisons have more than {MAX_PARTITIONS}; compare fewer agents, pass one-vs-rest "
                f"`comparisons`, or choose permutation 'relabel' or 'split' (not strongly controlled, see the docs)"
            )
        self.partitions = partitions
        pair_index = {frozenset(p): j for j, p in enumerate(self.comparisons)}
        #: per block: the comparisons inside it
        self.block_pairs: dict[tuple[int, ...], NDArray[np.intp]] = {}
        for blocks in self.partitions:
            for block in blocks:
                if block not in self.block_pairs:
                    inside = [pair_index[frozenset((a, c))] for i, a in enumerate(block) for c in block[i + 1 :]
                              if frozenset((a, c)) in pair_index]
                    self.block_pairs[block] = np.asarray(sorted(inside), dtype=np.intp)
        #: per block: the block-local columns of the first and of the second agents of its comparisons
        self._block_columns: dict[tuple[int, ...], tuple[NDArray[np.intp], NDArray[np.intp]]] = {}
        for block, inside_pairs in self.block_pairs.items():
            column = {l: c for c, l in enumerate(block)}
            self._block_columns[block] = (
                np.asarray([column[self.comparisons[int(j)][0]] for j in inside_pairs], dtype=np.intp),
                np.asarray([column[self.comparisons[int(j)][1]] for j in inside_pairs], dtype=np.intp),
            )
        #: every block's row in an interim's table of block statistics; per partition its blocks' rows,
        #: padded with its first (a maximum ignores repeats)
        self._block_row = {block: r for r, block in enumerate(self.block_pairs)}
        widest = max(len(blocks) for blocks in self.partitions)
        self._partition_rows = np.array([np.resize([self._block_row[b] for b in blocks], widest)
                                         for blocks in self.partitions], dtype=np.intp)
        #: per partition: the comparisons it implies, and per comparison the partitions implying it
        self.implies = [np.concatenate([self.block_pairs[b] for b in blocks]) for blocks in self.partitions]
        self.holding: list[list[int]] = [[] for _ in self.comparisons]
        for p, pairs in enumerate(self.implies):
            for j in pairs:
                self.holding[int(j)].append(p)
        top = max(range(len(self.partitions)), key=lambda p: (self.implies[p].size, -p))
        #: the intersection of all comparisons (weak-control test), reported as the boundary
        self.top = top
        size = n_agents * n_per_interim
        #: random keys of the positions: sorting a block's positions by key relabels the block
        drawn = np.random.default_rng(seed).random((self.b - 1, n_interims, size))
        # the keys are the ranks of the uniform draws (same order, no ties, small integers: fast
        # to compare); the ranks invert the sorting permutation (a scatter, not a second sort)
        dtype = np.int16 if size < 2**15 else np.int32
        order = np.argsort(drawn, axis=-1).reshape(-1, size)
        order += np.arange(0, order.size, size)[:, None]  # flat index of each row's sorted positions
        ranks = np.empty(drawn.shape, dtype=dtype)
        ranks.reshape(-1)[order.reshape(-1)] = np.tile(np.arange(size, dtype=dtype), len(order))
        #: the keys position-major, ``(K, L N, B)``: a block's rows are contiguous, path 0 the identity
        self.keys = np.empty((n_interims, size, self.b), dtype=dtype)
        self.keys[:, :, 0] = np.arange(size)
        self.keys[:, :, 1:] = ranks.transpose(1, 2, 0)
        #: ``(K, L N, B)``: the agent whose position holds each rank, for counting by running
        #: sums when ``N`` is large (:meth:`_interim_counts`)
        self._owner: NDArray[np.integer] | None = None
        if n_per_interim > _COUNT_BY_COMPARISON_MAX:
            self._owner = np.empty((n_interims, size, self.b), dtype=np.int8 if n_agents <= 127 else np.int16)
            self._owner[:, :, 0] = np.arange(size) // n_per_interim
            order -= np.arange(0, order.size, size)[:, None]
            order //= n_per_interim
            self._owner[:, :, 1:] = order.reshape(drawn.shape).transpose(1, 2, 0)
        #: within-block ranks need at most ``L N - 1``: the smallest integer type that holds them
        self._count_dtype = np.int8 if size <= 127 else dtype
        #: ``(L, L N, B)`` per interim: how many of agent ``a``'s positions have a smaller key
        self._counts: tuple[int, NDArray[np.integer]] | None = None
        #: per block: its positions; and the path indices
        self._positions = {block: np.concatenate([np.arange(l * n_per_interim, (l + 1) * n_per_interim)
                                                  for l in block]) for block in self.block_pairs}
        self._path_index = np.arange(self.b, dtype=np.intp)
        #: per partition: its permutation test crossed; its bootstrap test (:mod:`.adastop_welch`)
        #: crossed too (``decided``: the intersection hypothesis is rejected)
        self.crossed = np.zeros(len(self.partitions), dtype=bool)
        self.reference = WelchReference(self.comparisons, list(self.block_pairs.values()), self._partition_rows.tolist(),
                                        n_agents=n_agents, n_per_interim=n_per_interim, n_interims=n_interims,
                                        alpha=alpha, n_permutations=n_permutations, seed=seed)
        self.decided = np.zeros(len(self.partitions), dtype=bool)
        self.crossed_at = np.zeros(len(self.partitions), dtype=np.int64)
        self.alive = np.ones((len(self.partitions), self.b), dtype=bool)
        self.spent = np.zeros(len(self.partitions))
        self.boundary = np.full(len(self.partitions), math.inf)
        #: per block: running ``(|block|, B)`` sums and sums of squares of the scores each agent receives
        self._sums: dict[tuple[int, ...], tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        self._centre: float | None = None
        self.interim = 0

    def _block_sums(self, block: tuple[int, ...], scores: NDArray[np.float64],
                    k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(|block|, B)`` running sums and sums of squares of the scores each of the block's agents
        receives on each path, after interim ``k`` (kept for the next interim)."""
        n, width, b = self.n, len(block), self.b
        positions = self._positions[block]
        # Agent c of the block receives the positions whose key ranks in [cN, (c+1)N) among the
        # block's: a position's rank in the block is the sum over the block's agents of how many of
        # their positions have a smaller key (counted once per interim for all blocks, no sort).
        counts = self._interim_counts(k)
        rank = counts[block[0]][positions]
        for l in block[1:]:
            rank += counts[l][positions]
        # the agent (0 .. width - 1) dealt each position on each path, as a flat (agent, path) bin
        slot = np.floor_divide(rank, n, dtype=np.intp)
        slot *= b
        slot += self._path_index
        # Each agent's sum adds its scores one by one in position order: bincount adds its weights
        # in input order, and the input is position-major.  Paths that deal an agent the same scores
        # get bit-identical sums, so ties with the identity (the same or the mirrored assignment)
        # are exact ties, counted as no exceedance on every machine.
        z = np.broadcast_to(scores.reshape(-1)[positions][:, None], slot.shape).ravel()
        bins = slot.ravel()
        # (agent, path) sums; asarray: weighted counts are float64, which the stubs do not know
        s = np.asarray(np.bincount(bins, weights=z, minlength=width * b), dtype=np.float64).reshape(width, b)
        q = np.asarray(np.bincount(bins, weights=np.square(z), minlength=width * b), dtype=np.float64).reshape(width, b)
        if block in self._sums:
            previous_s, previous_q = self._sums[block]
            s += previous_s
            q += previous_q
        self._sums[block] = (s, q)
        return s, q

    def _block_stats(self, blocks: Sequence[tuple[int, ...]], scores: NDArray[np.float64],
                     k: int) -> list[NDArray[np.float64]]:
        """Per block, ``(B,)`` largest studentized statistic of its comparisons after interim ``k``.

        The permutation law of :math:`\\max_{j \\in I(\\pi)} S_j` restricted to one block (seed
        002 Eq. 8 per pair); it is computed once per block and interim and shared by every
        partition (intersection) that holds the block.  One Welch pass serves all ``blocks`` (their
        agents' sums stacked; the statistic is elementwise, so the bits are those of each block alone).
        """
        sums = [self._block_sums(block, scores, k) for block in blocks]
        widths = np.cumsum([0] + [len(block) for block in blocks])
        first = np.concatenate([self._block_columns[block][0] + w for block, w in zip(blocks, widths)])
        second = np.concatenate([self._block_columns[block][1] + w for block, w in zip(blocks, widths)])
        starts = np.cumsum([0] + [len(self._block_columns[block][0]) for block in blocks[:-1]])
        z_square = welch_z_squared(np.concatenate([s for s, _ in sums]), np.concatenate([q for _, q in sums]),
                                   first, second, k * self.n)
        return list(np.sqrt(np.maximum.reduceat(z_square, starts, axis=0)))

    def _chunks(self, blocks: Sequence[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
        """``blocks`` in runs of about :data:`~.adastop_welch.CHUNK` comparison-paths each: one Welch pass per run."""
        chunks: list[list[tuple[int, ...]]] = []
        size = 0
        for block in blocks:
            if not chunks or size + len(self.block_pairs[block]) * self.b > CHUNK:
                chunks.append([])
                size = 0
            chunks[-1].append(block)
            size += len(self.block_pairs[block]) * self.b
        return chunks

    def _interim_counts(self, k: int, agents: Sequence[int] | None = None) -> NDArray[np.integer]:
        """``(L, L N, B)``: per agent and position, how many of the agent's positions rank lower.

        Up to :data:`_COUNT_BY_COMPARISON_MAX` scores per interim, by comparing every position's
        key with each of the agent's ``N`` keys; above, by a running count over the ranks of the
        positions the agent holds, read back at each position's rank (``O(L N B)`` per agent).
        Only ``agents`` are counted (default: every agent of a comparison); the rows of the others
        stay 0.  Computed once per interim.
        """
        if self._counts is not None and self._counts[0] == k:
            return self._counts[1]
        keys, n = self.keys[k - 1], self.n
        counts = np.zeros((self.n_agents, *keys.shape), dtype=self._count_dtype)
        if agents is None:
            agents = sorted({l for pair in self.comparisons for l in pair})
        if self._owner is None:
            for l in agents:
                for row in keys[l * n : (l + 1) * n]:
                    counts[l] += keys > row
        else:
            owner = self._owner[k - 1]
            at_rank = keys.astype(np.intp)  # flat index of (rank of position p, path) in (L N, B)
            at_rank *= self.b
            at_rank += self._path_index
            for l in agents:
                held = owner == l
                below = np.cumsum(held, axis=0, dtype=self._count_dtype)
                np.subtract(below, held, out=below)  # agent l's positions at strictly smaller ranks
                np.take(below.reshape(-1), at_rank, out=counts[l])
        self._counts = (k, counts)
        return counts

    def update(self, block: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Analyse interim ``k`` (``block``: ``(L, N)`` scores); return the comparisons rejected so far.

        Each open partition's boundary spends ``alpha`` linearly over the surviving paths (seed 002
        Eqs. 10-12); the boundary is an order statistic, found by selection (``np.partition``).
        """
        k = self.interim + 1
        if self._centre is None:  # the statistics are shift-invariant: centre for numerical accuracy
            used = sorted({l for pair in self.comparisons for l in pair})
            self._centre = float(block[used].mean())
        scores = np.where(np.isfinite(block), block - self._centre, 0.0)
        open_parts = np.flatnonzero(~self.crossed)
        needed = {b for p in open_parts for b in self.partitions[p]}
        for stale in set(self._sums) - needed:
            del self._sums[stale]
        self._interim_counts(k, sorted({l for b in needed for l in b}))  # the agents still relabeled
        # the blocks' statistics and the bootstrap test are independent: on both cores when the
        # arrays are large (numpy releases the GIL in its loops); results do not depend on the order
        chunks = self._chunks(sorted(needed))
        if self.n_agents * self.n * self.b >= _POOL_MIN_WORK:
            pool = _thread_pool()
            reference = pool.submit(self.reference.update, scores, ~self.decided)
            found = list(pool.map(lambda chunk: self._block_stats(chunk, scores, k), chunks))
            reference.result()
        else:
            self.reference.update(scores, ~self.decided)
            found = [self._block_stats(chunk, scores, k) for chunk in chunks]
        table = np.zeros((len(self._block_row), self.b))  # rows of the blocks no open partition holds: unused
        for chunk, values in zip(chunks, found):
            table[[self._block_row[held] for held in chunk]] = values
        self.boundary[:] = math.inf
        for rows in row_chunks(open_parts, self._partition_rows.shape[1], self.b):
            alive, spent = self.alive[rows], self.spent[rows]
            self.boundary[rows], crossed = spend_interim(table[self._partition_rows[rows]].max(axis=1), alive, spent,
                                                         k=k, alpha=self.alpha, n_interims=self.k_max)
            self.alive[rows], self.spent[rows] = alive, spent
            self.crossed[rows[crossed]] = True
            self.crossed_at[rows[crossed]] = k
        self.decided = self.crossed & self.reference.crossed
        self.interim = k
        return np.array([bool(self.decided[h].all()) for h in self.holding])

    def signed_sums(self, block_sums: NDArray[np.float64]) -> NDArray[np.float64]:
        """``sum e(l1) - sum e(l2)`` of every comparison from per-agent score totals."""
        pairs = np.asarray(self.comparisons, dtype=np.intp)
        return block_sums[pairs[:, 0]] - block_sums[pairs[:, 1]]
