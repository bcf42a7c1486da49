"""Helpers shared by the verbs: the CLI's one exception type, JSON output, option parsing."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm


class CliError(ValueError):
    """Bad command-line input (a file, a row, an option combination): reported in one line, exit 2."""


def print_json(payload: dict[str, Any]) -> None:
    """Print ``payload`` as the verb's single JSON object (sorted keys; NaN is an error)."""
    print(json.dumps(payload, sort_keys=True, allow_nan=False))


def float_list(text: str) -> list[float]:
    """Parse ``"0,0.5,1"`` into floats (an argparse ``type``)."""
    try:
        return [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers; found {text!r}") from None


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


def progress_bar(enabled: bool, total: int, unit: str) -> tqdm:
    """A tqdm bar on stderr, shown only when ``enabled`` and stderr is a terminal."""
    from tqdm import tqdm  # here: only verbs that show progress need it

    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False, disable=not (enabled and sys.stderr.isatty()))


def step_callback(bar: tqdm) -> Callable[[int], None]:
    """Adapt a bar to the core's ``progress(n)`` callbacks (``n`` = units done so far)."""

    def update(done: int) -> None:
        bar.update(done - bar.n)

    return update
