"""Helpers shared by the verbs: the CLI's one exception type, JSON output, option parsing."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..limits import BINS_LIMIT, COUNT_LIMIT, N_MAX_LIMIT, SEED_LIMIT, STEP_N_MAX_LIMIT

if TYPE_CHECKING:
    from tqdm import tqdm


class CliError(ValueError):
    """Bad command-line input (a file, a row, an option combination): reported in one line, exit 2."""


def read_csv_rows(path: str) -> list[tuple[int, list[str]]]:
    """The non-blank rows of CSV file ``path`` with their line numbers; the first is the header.

    Raises :class:`CliError` naming the file when it cannot be read or parsed, or is empty.
    """
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except OSError as err:
        raise CliError(f"cannot read {path}: {err.strerror or err}") from err
    except (UnicodeDecodeError, csv.Error) as err:
        raise CliError(f"cannot parse {path}: {err}") from err
    if not rows:
        raise CliError(f"{path}: the file is empty; expected a header row")
    return rows


def print_json(payload: dict[str, Any]) -> None:
    """Print ``payload`` as the verb's single JSON object, keys sorted.

    orjson writes floats ~20x faster than :mod:`json` (``analyze --json`` prints two per trial);
    numpy scalars and arrays are written as numbers and lists, and a NaN as ``null`` (the
    ``to_dict`` methods map NaN to ``None`` themselves).
    """
    import orjson

    print(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode())


def float_list(text: str) -> list[float]:
    """Parse ``"0,0.5,1"`` into floats (an argparse ``type``)."""
    try:
        return [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers; found {text!r}") from None


def bounded_int(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]``, else a one-line usage error (exit 2).

    >>> bounded_int(2, 10)("7"), bounded_int(2, 10).__name__
    (7, 'integer in [2, 10]')
    >>> bounded_int(2, 10)("1000000000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must lie in [2, 10]; found 1000000000
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}; found {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must lie in [{low}, {high}]; found {value}")
        return value

    parse.__name__ = f"integer in [{low}, {high}]"  # argparse names the type in its message
    return parse


#: ``--n-max``: an integer in ``[1, N_MAX_LIMIT]``.
n_max_type = bounded_int(1, N_MAX_LIMIT, "a whole number of trials")
#: ``--bins``: N-SCORE's ``K`` in ``[2, BINS_LIMIT]``.
bins_type = bounded_int(2, BINS_LIMIT, "a whole number of bins")
#: ``--seed``: a non-negative integer of at most 64 bits.
seed_type = bounded_int(0, SEED_LIMIT, "a non-negative whole number")
#: Counts of the CLI (bootstrap resamples, buckets, grid points, trials).
count_type = bounded_int(1, COUNT_LIMIT, "a whole number")


def check_step_n_max(method: str, n_max: int | None) -> None:
    """Refuse a STEP horizon whose table could not be built in memory (:data:`STEP_N_MAX_LIMIT`)."""
    if method == "step" and n_max is not None and n_max > STEP_N_MAX_LIMIT:
        raise CliError(f"--n-max {n_max} is too large for STEP: its table needs O(n_max^2) memory; use at most "
                       f"{STEP_N_MAX_LIMIT} (or an anytime-valid method: nscore, wsr, savi)")


def add_alpha_alternative(parser: argparse.ArgumentParser) -> None:
    """The level options every verb shares (``--alpha`` is required: a design choice, declared)."""
    from ..stats.validation import ALTERNATIVES  # here: numpy is not for `evalstop --help`

    parser.add_argument(
        "--alpha", type=float, required=True, help="level in (0, 1); two-sided: total error of both directions",
    )
    parser.add_argument(
        "--alternative", choices=ALTERNATIVES, default="two-sided",
        help="'greater': policy B better, 'less': policy A better (default %(default)s)",
    )


class LineProgress:
    """Progress for a log (stderr not a terminal): one line at most every ``interval`` seconds.

    The same ``update``/``n``/context-manager surface as the tqdm bar it stands in for, e.g.
    ``evalstop: 120/500 steps (24%), 7 s`` -- so a synthesis started from a script or a launch
    file does not sit silent for minutes.
    """

    def __init__(self, total: int, unit: str, interval: float = 10.0) -> None:
        self.total, self.unit, self.interval = total, unit, interval
        self.n = 0
        self._start = self._last = time.monotonic()

    def update(self, done: int) -> None:
        """Advance by ``done`` units; print a line when ``interval`` passed or the work is done."""
        self.n += done
        now = time.monotonic()
        if now - self._last >= self.interval or (self.n >= self.total and now - self._start >= self.interval):
            self._last = now
            print(f"evalstop: {self.n}/{self.total} {self.unit}s ({100 * self.n // max(self.total, 1)}%), "
                  f"{now - self._start:.0f} s", file=sys.stderr, flush=True)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(enabled: bool, total: int, unit: str) -> tqdm | LineProgress:
    """Progress on stderr when ``enabled``: a tqdm bar on a terminal, else :class:`LineProgress`."""
    from tqdm import tqdm  # here: only verbs that show progress need it

    if enabled and not sys.stderr.isatty():
        return LineProgress(total, unit)
    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False, disable=not enabled)


def step_callback(bar: tqdm | LineProgress) -> Callable[[int], None]:
    """Adapt a bar to the core's ``progress(n)`` callbacks (``n`` = units done so far)."""

    def update(done: int) -> None:
        bar.update(done - bar.n)

    return update
