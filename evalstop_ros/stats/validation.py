"""Input checks shared by every test in the statistics core.

Each check raises :class:`~evalstop_ros.stats.errors.StatsInputError` whose message names the
argument and repeats the offending value (and, for sequences, its 1-based trial index).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import StatsInputError

ALTERNATIVES = ("two-sided", "greater", "less")
#: Scores may exceed [0, 1] by this much (float round-off in upstream normalisation) and are
#: then clipped; anything further out is an error (seed 000 App. A-A: a score > 1 can make a
#: betting factor negative).
SCORE_TOLERANCE = 1e-9


def check_open_unit(value: float, name: str) -> float:
    """Return ``value`` as a float after checking ``0 < value < 1``."""
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise StatsInputError(f"`{name}` must be a number in (0, 1); found {value!r}") from err
    if not 0.0 < number < 1.0:
        raise StatsInputError(f"`{name}` must lie in (0, 1); found {value!r}")
    return number


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Return ``alpha`` as a float after checking ``0 < alpha < 1``."""
    return check_open_unit(alpha, name)


def check_alternative(alternative: str) -> str:
    """Return ``alternative`` after checking it is one of :data:`ALTERNATIVES`."""
    if alternative not in ALTERNATIVES:
        raise StatsInputError(
            f"`alternative` should be one of {ALTERNATIVES}; found {alternative!r}"
        )
    return alternative


def check_positive(value: float, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number ``> 0``."""
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise StatsInputError(f"`{name}` must be a positive number; found {value!r}") from err
    if not (math.isfinite(number) and number > 0.0):
        raise StatsInputError(f"`{name}` must be a positive number; found {value!r}")
    return number


def check_positive_int(value: int, name: str) -> int:
    """Return ``value`` as an int after checking it is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise StatsInputError(f"`{name}` must be a positive integer; found {value!r}")
    return int(value)


def check_scores(scores: ArrayLike, name: str, *, trial: int | None = None) -> NDArray[np.float64]:
    """Return ``scores`` as a float array with every value in [0, 1].

    Raises for NaN/inf or values outside [0, 1] (beyond :data:`SCORE_TOLERANCE`).  With
    ``trial=None`` the message names the 1-based trial of the first bad value (along the last
    axis); with ``trial`` given, ``scores`` holds that trial for several sequences and the message
    names the sequence.
    """
    array = np.asarray(scores, dtype=np.float64)
    if ((array >= 0.0) & (array <= 1.0)).all():  # fast path; NaN fails both comparisons
        return array
    bad = ~np.isfinite(array) | (array < -SCORE_TOLERANCE) | (array > 1.0 + SCORE_TOLERANCE)
    if bad.any():
        index = np.unravel_index(int(np.argmax(bad)), array.shape)
        value = float(array[index])
        if trial is None:
            where = f"at trial {int(index[-1]) + 1 if array.ndim else 1}"
        else:
            where = f"at trial {trial}" + (f" (sequence {int(index[-1])})" if array.size > 1 else "")
        what = "be finite" if not math.isfinite(value) else "lie in [0, 1]"
        raise StatsInputError(f"`{name}` must {what}; found {value!r} {where}")
    return np.clip(array, 0.0, 1.0)


def check_pairs(
    scores_a: ArrayLike, scores_b: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Check paired score sequences: same shape, each value in [0, 1]."""
    a = check_scores(scores_a, "scores_a")
    b = check_scores(scores_b, "scores_b")
    if a.shape != b.shape:
        raise StatsInputError(
            f"`scores_a` and `scores_b` must be paired trial by trial; found {a.shape[-1] if a.ndim else 1} "
            f"and {b.shape[-1] if b.ndim else 1} trials"
        )
    return a, b


def check_binary(values: ArrayLike, name: str, *, method: str, trial: int | None = None) -> None:
    """Raise unless every value is exactly 0 or 1 (a success/failure outcome).

    With ``trial=None`` ``values`` is one sequence and the message names the 1-based trial of the
    first bad value; with ``trial`` given, ``values`` holds that trial for several sequences and
    the message names the sequence.
    """
    array = np.asarray(values, dtype=np.float64).ravel()
    bad = (array != 0.0) & (array != 1.0)
    if bad.any():
        index = int(np.argmax(bad))
        if trial is None:
            where = f"at trial {index + 1}"
        else:
            where = f"at trial {trial}" + (f" (sequence {index})" if array.size > 1 else "")
        raise StatsInputError(
            f"`{name}` must be 0 or 1 (success/failure) for {method}; found {float(array[index])!r} {where}"
        )


def check_policies(policies: Sequence[str]) -> tuple[str, ...]:
    """At least two distinct non-empty policy names, as a tuple."""
    names = tuple(policies)
    if len(names) < 2:
        raise StatsInputError(f"`policies` must name at least two policies; found {names!r}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise StatsInputError(f"`policies` must be non-empty strings; found {name!r}")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise StatsInputError(f"`policies` must be distinct; found {name!r} twice")
        seen.add(name)
    return names
