"""Operator input as text every output can carry: any bytes, any locale (:func:`decode_input`, :func:`printable`; docs/nodes.md).
"""

from __future__ import annotations

import unicodedata

__all__ = ["decode_input", "printable"]


def _raw(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")  # the bytes Python could not decode, back
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")  # other lone surrogates: replaced below


def _visible(text: str, keep: str) -> str:
    """``text`` without control characters (and lone surrogates), those in ``keep`` aside."""
    return "".join(c for c in text if c in keep or unicodedata.category(c) not in ("Cc", "Cs"))


def decode_input(raw: bytes | str) -> str:
    """``raw`` as valid text: undecodable bytes (or lone surrogates) become U+FFFD, control characters
    other than tab are dropped (a line's newline too).

    >>> decode_input(b"note \\xff f 0.5\\n"), decode_input("a\\udcffb"), decode_input("x\\x1b[31my")
    ('note \\ufffd f 0.5', 'a\\ufffdb', 'x[31my')
    """
    data = raw if isinstance(raw, bytes) else _raw(raw)
    return _visible(data.decode("utf-8", "replace"), "\t")


def printable(text: str, encoding: str | None) -> str:
    """``text`` as a stream of ``encoding`` can write it: lone surrogates become U+FFFD, what the encoding
    cannot hold ``?``, control characters (a terminal's escape sequences, from a config's reset
    instructions, say) are dropped; line breaks and tabs stay.

    >>> printable("caf\\u00e9 \\ufffd\\n", "ascii"), printable("caf\\u00e9\\udcff\\x1b[2J", "utf-8")
    ('caf? ?\\n', 'café\\ufffd[2J')
    """
    codec = encoding or "utf-8"
    text = _visible(_raw(text).decode("utf-8", "replace"), "\n\t")
    return text.encode(codec, "replace").decode(codec, "replace")
