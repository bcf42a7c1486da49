"""STEP decision tables: compact on-disk format, parameter hash, shipped tables and the user cache.

Lookup order: shipped tables, then ``$EVALSTOP_CACHE_DIR`` (else ``$XDG_CACHE_HOME/evalstop/step``
or ``~/.cache/evalstop/step``), synthesized there on a miss.  The layout: docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from .errors import StatsInputError
from .validation import check_alpha, check_positive_int

FORMAT_VERSION = 1
SHIPPED_DIR = pathlib.Path(__file__).with_name("step_tables")
#: Null-grid size at N_max <= 100 (seed 003 §IV-C: "approximately 100 points for N_max up to 500").
BASE_GRID_SIZE = 129
#: The LP spends ``BUDGET_FRACTION * alpha``.  The guarantee is exact only at the grid points;
#: between them the exact error exceeds the LP budget slightly (seed 003 IX-E1: bounded by the
#: grid's KL gaps).  With the dead time and the symmetric LP the largest excess over the 16
#: shipped designs was below 0.5 % relative, so this margin makes the exact dense-grid check
#: pass at ``alpha`` itself (``test_exact_type1_of_shipped_tables_on_dense_null_grid``).
BUDGET_FRACTION = 0.995


def dead_time(n_max: int) -> int:
    """Steps without any decision: ``floor(log2 N_max) + 4``, at most ``N_max // 4``.

    Not in seed 003, whose §IV-D allows any non-negative risk budget; the STEP authors' code waits
    ``max(4, floor(log2 N_max) + 1)`` steps.  The first steps could only reject a handful of extreme
    states; spending nothing there moves their share of α to where power is made.  We wait three
    steps longer than the authors' code (at most a quarter of the trials): with our exact-validity
    margin (:data:`BUDGET_FRACTION`) that makes the power at least theirs in every (design,
    alternative) cell of ``bench/step_power.py`` (``docs/step_power.md``).  The price is that no
    session stops in fewer than ``d + 1`` trials.

    >>> [dead_time(n) for n in (1, 3, 10, 50, 100, 200, 500)]
    [0, 0, 2, 9, 10, 11, 12]
    """
    return min(n_max.bit_length() + 3, n_max // 4)  # bit_length = floor(log2) + 1


def default_grid_size(n_max: int) -> int:
    """Null-grid size for ``n_max``: 129, growing as ``sqrt(n_max)`` beyond 100 (183 at 200, 289 at 500).

    Neighbouring grid points are a fixed Fisher-Rao distance apart, so the KL divergence between
    neighbouring nulls over ``N_max`` trials grows like ``N_max * spacing^2`` -- and with it the
    error between grid points (seed 003 IX-E1's TV/Pinsker argument).  Scaling the grid as
    ``sqrt(N_max)`` keeps that product at its N_max=100 value, which the margin above covers
    (129 points at N_max=200 exceeded alpha by 0.04 % at alpha=0.01).

    >>> [default_grid_size(n) for n in (50, 100, 200, 500, 2000)]
    [129, 129, 183, 289, 577]
    """
    return max(BASE_GRID_SIZE, math.ceil(BASE_GRID_SIZE * math.sqrt(n_max / 100)))


def table_parameters(n_max: int, alpha: float, grid_size: int | None = None) -> dict[str, object]:
    """Everything that defines a STEP test, fixed before any data (seed 003 §V-A)."""
    return {
        "format": FORMAT_VERSION,
        "method": "STEP (seed 003 Eq. 10, cumulative risk constraint, mirrored accept region)",
        "n_max": n_max,
        "alpha": alpha,
        "risk_budget": f"F(n) = {BUDGET_FRACTION} * alpha * (n - d) / (n_max - d) after a dead time d",
        "dead_time": dead_time(n_max),
        "symmetry": "w_n(a, a + g) = w_n(n - a - g, n - a)",
        "null_grid": "arcsin-sqrt spaced on [eps, 1 - eps], eps = 1 - (1 - alpha)^(1 / n_max)",
        "grid_size": default_grid_size(n_max) if grid_size is None else grid_size,
    }


def parameter_hash(parameters: dict[str, object]) -> str:
    """SHA-256 of the canonical JSON of ``parameters``."""
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def table_file_name(parameters: dict[str, object]) -> str:
    """Canonical file name of a table, e.g. ``step_n100_a0.05_<hash12>.npz``."""
    return f"step_n{parameters['n_max']}_a{parameters['alpha']:g}_{parameter_hash(parameters)[:12]}.npz"


def cache_dir() -> pathlib.Path:
    """The user cache directory for synthesized tables."""
    if "EVALSTOP_CACHE_DIR" in os.environ:
        return pathlib.Path(os.environ["EVALSTOP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "evalstop" / "step"


@dataclasses.dataclass(frozen=True, eq=False)
class StepTable:
    """Synthesized STEP regions for one ``(N_max, α)``: see the module docstring for the layout.

    Attributes
    ----------
    n_max, alpha:
        Horizon and per-direction level.
    parameters:
        The canonical parameters (hashed into ``param_hash``).
    thresholds:
        ``t_n(a)`` for all steps, concatenated: step ``n`` occupies ``offsets[n-1]:offsets[n]``.
    exc_step, exc_a, exc_gap, exc_weight:
        The exceptions, sorted by ``(step, a, gap)``.
    """

    n_max: int
    alpha: float
    parameters: dict[str, object]
    thresholds: NDArray[np.int32]
    exc_step: NDArray[np.int32]
    exc_a: NDArray[np.int32]
    exc_gap: NDArray[np.int32]
    exc_weight: NDArray[np.float64]

    @property
    def param_hash(self) -> str:
        """SHA-256 of :attr:`parameters`."""
        return parameter_hash(self.parameters)

    @property
    def file_name(self) -> str:
        """Canonical file name, e.g. ``step_n100_a0.05_<hash12>.npz``."""
        return table_file_name(self.parameters)

    def _offset(self, n: int) -> int:
        return (n * (n + 1)) // 2 - 1  # sum_{k=1}^{n-1} (k + 1): step k stores k + 1 thresholds

    def step_thresholds(self, n: int) -> NDArray[np.int32]:
        """``t_n(a)`` for ``a = 0..n``."""
        start = self._offset(n)
        return self.thresholds[start : start + n + 1]

    def step_exceptions(self, n: int) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.float64]]:
        """``(a, gap, w)`` exceptions of step ``n``."""
        lo, hi = np.searchsorted(self.exc_step, [n, n + 1])
        return self.exc_a[lo:hi], self.exc_gap[lo:hi], self.exc_weight[lo:hi]

    def dense_step(self, n: int, gaps: int) -> NDArray[np.float64]:
        """``(n + 1, gaps)`` array of ``w_n(a, a + g)`` at ``[a, g - 1]`` for ``g = 1..gaps``."""
        g = np.arange(1, gaps + 1)
        weights = (g[None, :] >= self.step_thresholds(n)[:, None]).astype(np.float64)
        a, gap, w = self.step_exceptions(n)
        inside = gap <= gaps
        weights[a[inside], gap[inside] - 1] = w[inside]
        return weights

    def reject_weight(self, n: int, a: NDArray[np.int64], gap: NDArray[np.int64]) -> NDArray[np.float64]:
        """Vectorised ``w_n(a, a + gap)`` for ``gap >= 1`` (0 where ``gap < 1``)."""
        weights = (gap >= self.step_thresholds(n)[a]).astype(np.float64)
        exc_a, exc_gap, exc_w = self.step_exceptions(n)
        if exc_a.size:
            keys = exc_a.astype(np.int64) * (n + 2) + exc_gap
            query = a * (n + 2) + gap
            pos = np.clip(np.searchsorted(keys, query), 0, keys.size - 1)
            hit = keys[pos] == query
            weights[hit] = exc_w[pos[hit]]
        weights[gap < 1] = 0.0
        return weights

    @classmethod
    def from_regions(
        cls, n_max: int, alpha: float, regions: Iterable[NDArray[np.float64]], grid_size: int
    ) -> StepTable:
        """Compress synthesized regions (``regions[n-1][a, g-1] = w_n(a, a+g)``)."""
        thresholds, steps, rows, gaps, values = [], [], [], [], []
        for n, region in enumerate(regions, start=1):
            width = region.shape[1]
            not_one = region < 1.0
            # t(a) = 1 + last gap index whose weight is < 1 (or 1 if none)
            last = np.where(not_one.any(axis=1), width - np.argmax(not_one[:, ::-1], axis=1), 0)
            thresholds.append(last + 1)
            a, g = np.nonzero((region > 0.0) & (np.arange(1, width + 1)[None, :] < (last + 1)[:, None]))
            steps.append(np.full(a.size, n))
            rows.append(a)
            gaps.append(g + 1)
            values.append(region[a, g])
        return cls(
            n_max=n_max,
            alpha=alpha,
            parameters=table_parameters(n_max, alpha, grid_size),
            thresholds=np.concatenate(thresholds).astype(np.int32),
            exc_step=np.concatenate(steps).astype(np.int32),
            exc_a=np.concatenate(rows).astype(np.int32),
            exc_gap=np.concatenate(gaps).astype(np.int32),
            exc_weight=np.concatenate(values).astype(np.float64),
        )

    def save(self, directory: pathlib.Path) -> pathlib.Path:
        """Write the table as ``directory / file_name`` (compressed npz) and return the path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / self.file_name
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(
            tmp,
            parameters=np.array(json.dumps(self.parameters, sort_keys=True)),
            thresholds=self.thresholds,
            exc_step=self.exc_step,
            exc_a=self.exc_a,
            exc_gap=self.exc_gap,
            exc_weight=self.exc_weight,
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: pathlib.Path) -> StepTable:
        """Read a table written by :meth:`save`, checking its hash against its file name."""
        with np.load(path, allow_pickle=False) as data:
            parameters = json.loads(str(data["parameters"]))
            table = cls(
                n_max=int(parameters["n_max"]),
                alpha=float(parameters["alpha"]),
                parameters=parameters,
                thresholds=data["thresholds"],
                exc_step=data["exc_step"],
                exc_a=data["exc_a"],
                exc_gap=data["exc_gap"],
                exc_weight=data["exc_weight"],
            )
        if path.name != table.file_name:
            raise StatsInputError(f"STEP table {str(path)!r} does not match its parameters (hash {table.param_hash[:12]})")
        return table


def find_table(n_max: int, alpha: float, grid_size: int | None = None) -> pathlib.Path | None:
    """Path of a shipped or cached table for these parameters, or ``None``."""
    name = table_file_name(table_parameters(n_max, alpha, grid_size))
    for directory in (SHIPPED_DIR, cache_dir()):
        if (directory / name).is_file():
            return directory / name
    return None


def load_table(
    n_max: int,
    alpha: float,
    *,
    synthesize: bool = True,
    progress: Callable[[int], None] | None = None,
) -> StepTable:
    """The STEP table for ``(n_max, alpha)``: shipped, else cached, else synthesized and cached.

    Raises :class:`StatsInputError` when ``synthesize`` is false and no table exists.
    """
    n_max = check_positive_int(n_max, "n_max")
    alpha = check_alpha(alpha)
    path = find_table(n_max, alpha)
    if path is not None:
        return StepTable.load(path)
    if not synthesize:
        raise StatsInputError(f"no STEP table for n_max={n_max}, alpha={alpha:g}; run `evalstop step synthesize`")
    table = synthesize_table(n_max, alpha, progress=progress)
    table.save(cache_dir())
    return table


def synthesize_table(
    n_max: int,
    alpha: float,
    *,
    grid_size: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> StepTable:
    """Synthesize (not cache) the table for ``(n_max, alpha)``; ``progress(n)`` after each step.

    ``grid_size`` defaults to :func:`default_grid_size`.
    """
    from .step_synthesis import synthesize_weights

    n_max = check_positive_int(n_max, "n_max")
    alpha = check_alpha(alpha)
    grid_size = default_grid_size(n_max) if grid_size is None else grid_size
    regions = synthesize_weights(
        n_max, alpha, budget=BUDGET_FRACTION * alpha, dead_time=dead_time(n_max), grid_size=grid_size,
        progress=progress,
    )
    return StepTable.from_regions(n_max, alpha, regions, grid_size)
