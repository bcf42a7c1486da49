"""The report's figure style: print size and resolution, Okabe and Ito's colour-blind-safe palette, text that fits.
"""

from __future__ import annotations

import pathlib
import textwrap
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: the report is rendered on machines without a display

from matplotlib.figure import Figure

__all__ = ["ALPHA_COLOR", "CURVE_COLOR", "FORMATS", "FRAME_COLOR", "OKABE_ITO", "PRINT_DPI", "RC", "policy_colors",
           "save", "wrap"]

#: Okabe-Ito, without black (kept for curves that are not a policy) and with yellow last (weak on white).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
CURVE_COLOR = "#000000"
ALPHA_COLOR = "#D55E00"  # vermilion: the level alpha and the decisions
FRAME_COLOR = "#999999"
#: Resolution of the PNGs (print quality); vector formats ignore it.
PRINT_DPI = 300
#: Formats ``write_report`` can save, the page's image format first.
FORMATS = ("png", "svg", "pdf")
RC: Any = {"font.family": "DejaVu Sans", "font.size": 9.0, "axes.titlesize": 9.5, "axes.labelsize": 9.0,
      "legend.fontsize": 8.0, "xtick.labelsize": 8.0, "ytick.labelsize": 8.0, "svg.fonttype": "none",
      "pdf.fonttype": 42}


def policy_colors(policies: Sequence[str]) -> dict[str, str]:
    """One colour per policy, in configuration order, the same in every figure."""
    return {policy: OKABE_ITO[i % len(OKABE_ITO)] for i, policy in enumerate(policies)}


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points.

    A DejaVu Sans character is at most about 0.62 em wide on average over words, so a line holds
    ``width_in * 72 / (0.62 * fontsize)`` characters; existing line breaks are kept.
    """
    chars = max(12, int(width_in * 72 / (0.62 * fontsize)))
    return "\n".join(textwrap.fill(line, chars, break_long_words=True) for line in text.split("\n"))


def save(fig: Figure, stem: pathlib.Path, formats: Sequence[str]) -> list[pathlib.Path]:
    """Save ``fig`` as ``stem.<format>`` for each of ``formats`` (white background); the paths."""
    out = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt)  # reproducible files
        fig.savefig(path, dpi=PRINT_DPI, facecolor="white", metadata=metadata)
        out.append(path)
    return out
