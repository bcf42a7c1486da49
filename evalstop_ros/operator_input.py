"""Operator input as text every output can carry: any bytes, any locale.

What an operator types (teleop notes, operator names) or passes (command-line values, key and
config files) reaches ROS messages (UTF-8 by definition), the journal (JSON) and terminals whose
locale may not be UTF-8.  Python hands undecodable input on as lone surrogates (``surrogateescape``
under a C locale, a bad ``argv``), which no UTF-8 encoder accepts: a note with one such byte
crashed the operator's terminal.  :func:`decode_input` turns any input into valid text (every byte
that is not UTF-8 becomes U+FFFD, control characters but tab are dropped, so no escape sequence
reaches a terminal), and :func:`printable` fits text to a stream's encoding.
"""

from __future__ import annotations

import unicodedata

__all__ = ["decode_input", "printable"]


def _raw(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")  # the bytes Python could not decode, back
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")  # other lone surrogates: replaced below


def decode_input(raw: bytes | str) -> str:
    """``raw`` as valid text: undecodable bytes (or lone surrogates) become U+FFFD, control characters
    other than tab are dropped (a line's newline too).

    >>> decode_input(b"note \\xff f 0.5\\n"), decode_input("a\\udcffb"), decode_input("x\\x1b[31my")
    ('note \\ufffd f 0.5', 'a\\ufffdb', 'x[31my')
    """
    data = raw if isinstance(raw, bytes) else _raw(raw)
    text = data.decode("utf-8", "replace")
    return "".join(c for c in text if c == "\t" or unicodedata.category(c) not in ("Cc", "Cs"))


def printable(text: str, encoding: str | None) -> str:
    """``text`` as a stream of ``encoding`` can write it (what it cannot encode becomes ``?``).

    >>> printable("caf\\u00e9 \\ufffd", "ascii"), printable("caf\\u00e9", "utf-8")
    ('caf? ?', 'café')
    """
    codec = encoding or "utf-8"
    return decode_input(text).encode(codec, "replace").decode(codec, "replace")
