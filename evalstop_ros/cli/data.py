"""Reading paired scores of two policies from a CSV file (wide or long layout), for ``evalstop analyze``.

The layouts are in docs/cli.md; every error names the file, the line and the value.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
from numpy.typing import NDArray

from ..stats.validation import SCORE_TOLERANCE
from ._common import CliError, read_csv_rows

WIDE_COLUMNS = ("policy_a", "policy_b")
LONG_COLUMNS = ("trial", "policy", "score")


@dataclasses.dataclass(frozen=True)
class PairedScores:
    """Paired scores read from a file, in collection order.

    Attributes
    ----------
    path:
        The file, as given.
    layout:
        ``"wide"`` or ``"long"``.
    policy_a, policy_b:
        Column names (wide) or policy labels (long) of the baseline A and candidate B.
    scores_a, scores_b:
        ``(N,)`` scores in [0, 1], pair ``n`` at index ``n - 1``.
    """

    path: str
    layout: str
    policy_a: str
    policy_b: str
    scores_a: NDArray[np.float64]
    scores_b: NDArray[np.float64]

    def describe(self) -> dict[str, object]:
        """JSON-ready summary (no scores)."""
        return {
            "path": self.path,
            "layout": self.layout,
            "policy_a": self.policy_a,
            "policy_b": self.policy_b,
            "n_pairs": int(self.scores_a.size),
            "mean_a": float(self.scores_a.mean()),
            "mean_b": float(self.scores_b.mean()),
        }


def parse_number(cell: str, where: str) -> float:
    """A non-empty CSV cell as a finite float; ``where`` starts the error message."""
    try:
        value = float(cell.strip())
    except ValueError:
        raise CliError(f"{where}: the score must be a number; found {cell!r}") from None
    if not math.isfinite(value):
        raise CliError(f"{where}: the score must be finite; found {cell!r}")
    return value


def _score(cell: str, where: str) -> float:
    """One score cell, checked as the core checks scores (validation.check_scores)."""
    if not cell.strip():
        raise CliError(f"{where}: the score is empty; every trial needs a score of both policies")
    value = parse_number(cell, where)
    if not -SCORE_TOLERANCE <= value <= 1.0 + SCORE_TOLERANCE:
        raise CliError(f"{where}: the score must lie in [0, 1]; found {cell!r}")
    return value


def load_pairs(path: str, columns: tuple[str, str] | None = None) -> PairedScores:
    """Read paired scores from the CSV file ``path`` (see the module docstring for the layouts).

    Parameters
    ----------
    path : str
        CSV file with a header row.
    columns : (str, str), optional
        Policy A and B: two column names (wide) or two policy labels (long).

    Returns
    -------
    PairedScores

    Raises
    ------
    CliError
        If the file cannot be read or any row is malformed; the message names the file, the
        line and the value.
    """
    if columns is not None and columns[0] == columns[1]:
        raise CliError(f"--columns must name two different policies; found {columns[0]!r} twice")
    fast = _numeric_wide(path, columns)
    if fast is not None:
        return fast
    rows = read_csv_rows(path)
    header_line, raw_header = rows[0]
    header = [name.strip() for name in raw_header]
    for name in header:
        if header.count(name) > 1:
            raise CliError(f"{path} line {header_line}: column {name!r} appears twice in the header")
    body = rows[1:]
    if columns is not None and all(name in header for name in columns):
        return _wide(path, header, body, columns)
    if columns is None and sorted(header) == sorted(WIDE_COLUMNS):
        return _wide(path, header, body, WIDE_COLUMNS)
    if all(name in header for name in LONG_COLUMNS):
        return _long(path, header, body, columns)
    expected = f"columns {columns[0]!r} and {columns[1]!r}" if columns else (
        f"a wide header {','.join(WIDE_COLUMNS)} or a long header {','.join(LONG_COLUMNS)}"
    )
    raise CliError(f"{path} line {header_line}: found header {','.join(header)!r}; expected {expected}"
                   + ("" if columns else " (name two columns with --columns A,B)"))


def _numeric_wide(path: str, columns: tuple[str, str] | None) -> PairedScores | None:
    """The common case at C speed: a wide file whose first line is the header and whose every
    other line holds plain numbers, all valid scores.  ``None`` for anything else -- the row-by-row
    reader then reads the file and names the exact line and value of any error.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            header = [name.strip() for name in handle.readline().rstrip("\r\n").split(",")]
        names = columns if columns is not None else WIDE_COLUMNS
        if len(set(header)) != len(header) or not all(name in header for name in names):
            return None
        if columns is None and sorted(header) != sorted(WIDE_COLUMNS):
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns (rather than fails) on an empty body
            values = np.loadtxt(path, delimiter=",", skiprows=1, comments=None, ndmin=2, dtype=np.float64)
    except (OSError, UnicodeDecodeError, ValueError, UserWarning):
        return None
    if values.shape[0] == 0 or values.shape[1] != len(header):
        return None
    scores_a, scores_b = (values[:, header.index(name)] for name in names)
    both = np.concatenate((scores_a, scores_b))
    if not np.all((both >= -SCORE_TOLERANCE) & (both <= 1.0 + SCORE_TOLERANCE)):  # NaN fails too
        return None
    return PairedScores(path, "wide", names[0], names[1], scores_a.copy(), scores_b.copy())


def _fields(path: str, line: int, row: list[str], header: list[str]) -> dict[str, str]:
    if len(row) != len(header):
        raise CliError(f"{path} line {line}: expected {len(header)} fields like the header; found {len(row)}")
    return dict(zip(header, row))


def _wide(path: str, header: list[str], body: list[tuple[int, list[str]]], columns: tuple[str, str]) -> PairedScores:
    name_a, name_b = columns
    scores_a, scores_b = [], []
    for line, row in body:
        fields = _fields(path, line, row, header)
        scores_a.append(_score(fields[name_a], f"{path} line {line}, column {name_a!r}"))
        scores_b.append(_score(fields[name_b], f"{path} line {line}, column {name_b!r}"))
    if not scores_a:
        raise CliError(f"{path}: no trials after the header")
    return PairedScores(path, "wide", name_a, name_b, np.array(scores_a), np.array(scores_b))


def _long(path: str, header: list[str], body: list[tuple[int, list[str]]], columns: tuple[str, str] | None) -> PairedScores:
    # trial id -> {policy: (score, line)}, in order of first appearance of the trial id
    trials: dict[str, dict[str, tuple[float, int]]] = {}
    seen: list[str] = []  # policies in order of first appearance
    for line, row in body:
        fields = _fields(path, line, row, header)
        trial, policy = fields["trial"].strip(), fields["policy"].strip()
        if not trial or not policy:
            raise CliError(f"{path} line {line}: the trial id and the policy must not be empty; found {row!r}")
        if columns is not None and policy not in columns:
            continue
        if policy not in seen:
            if len(seen) == 2:
                raise CliError(
                    f"{path} line {line}: found a third policy {policy!r} after {seen[0]!r} and "
                    f"{seen[1]!r}; pick two with --columns A,B"
                )
            seen.append(policy)
        entry = trials.setdefault(trial, {})
        if policy in entry:
            raise CliError(
                f"{path} line {line}: a second score for trial {trial!r}, policy {policy!r} "
                f"(the first is on line {entry[policy][1]})"
            )
        entry[policy] = (_score(fields["score"], f"{path} line {line}, trial {trial!r}, policy {policy!r}"), line)
    policies = list(columns) if columns is not None else seen
    missing = [policy for policy in policies if policy not in seen]
    if len(policies) < 2 or missing:
        found = ", ".join(repr(p) for p in seen) or "none"
        wanted = f"policies {', '.join(repr(p) for p in missing)}" if missing else "scores of two policies"
        raise CliError(f"{path}: expected {wanted}; found policies {found}")
    name_a, name_b = policies
    for trial, entry in trials.items():
        if len(entry) < 2:
            (policy, (_, line)), = entry.items()
            raise CliError(
                f"{path} line {line}: trial {trial!r} has a score for {policy!r} only; every trial "
                "needs a score of both policies"
            )
    scores_a = np.array([entry[name_a][0] for entry in trials.values()])
    scores_b = np.array([entry[name_b][0] for entry in trials.values()])
    return PairedScores(path, "long", name_a, name_b, scores_a, scores_b)
