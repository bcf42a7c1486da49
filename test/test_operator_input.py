"""Operator input as text every output can carry (evalstop_ros/operator_input.py): random bytes, and the
lone surrogates Python makes of them, always give text that UTF-8 (a ROS string, the journal's JSON)
encodes, with no control character; valid text passes unchanged; every stream encoding can print it."""

from __future__ import annotations

import random
import unicodedata

import pytest

from evalstop_ros.operator_input import decode_input, printable


def _clean(text: str, keep: str) -> bool:
    return all(c in keep or unicodedata.category(c) not in ("Cc", "Cs") for c in text)


def test_random_bytes_become_valid_text_without_controls() -> None:
    rng = random.Random(35)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        for given in (raw, raw.decode("utf-8", "surrogateescape"), raw.decode("latin-1")):
            text = decode_input(given)
            text.encode("utf-8")  # strict: raises on a lone surrogate
            assert _clean(text, "\t"), repr(text)


@pytest.mark.parametrize("text", ["slipped at the end", "café, 70 %", "Greifer offen \u2192 rutscht", "\u5931\u8d25"])
def test_valid_text_passes_unchanged(text: str) -> None:
    assert decode_input(text) == text == decode_input(text.encode())


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1", "cp1252"])
def test_any_text_prints_in_any_encoding(encoding: str) -> None:
    rng = random.Random(encoding)
    for _ in range(500):
        text = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(32)))
        shown = printable(f"{text}\nnext line", encoding)
        shown.encode(encoding)  # strict
        assert shown.endswith("\nnext line") and _clean(shown, "\n\t"), repr(shown)
