"""The hub journal's hash chain: the standard journal's chain (schema version 4), and the reader of the old one.

An export is tamper-evident (seed 001 Sec. 3.1: every result must be accounted for); docs/hub_server.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..session.journal_format import chain_hash, check_rows

__all__ = ["GENESIS", "HUB_GENESIS", "OLD_CHAIN", "STANDARD_CHAIN", "body_text", "check_chain", "entry_hash",
           "export_chain", "link", "stamp_ns"]

#: The link before the first entry of the hub's journal (the standard chain, schema version 4).
HUB_GENESIS = hashlib.sha256(b"evalstop-hub-journal").hexdigest()
#: The link before the first entry of the old chain (a version-3 hub).
GENESIS = "0" * 64
#: The names :func:`export_chain` gives the two chains.
STANDARD_CHAIN, OLD_CHAIN = "standard", "v3"


def body_text(body: Mapping[str, Any]) -> str:
    """The body as the store writes it (and as an exported body is written again)."""
    return json.dumps(body, sort_keys=True)


def stamp_ns(at: float) -> int:
    """An entry's stored time ``at`` (seconds) as the integer nanoseconds its link hashes."""
    return round(float(at) * 1_000_000_000)


def entry_hash(previous: str, seq: int, at: float, kind: str, body: str) -> str:
    """The standard link of the hub entry ``seq`` after ``previous`` (body as stored)."""
    return chain_hash(previous, seq, stamp_ns(at), kind, None, body)


def _break(seq: Any, kind: Any) -> str:
    return (f"entry seq {seq} ({kind}) does not match the hash chain: edited, or an entry before it was removed "
            "or changed")


def _shape(entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The first entry without an integer ``seq`` or a ``hash``, as a problem; else ``None``."""
    for entry in entries:
        seq = entry.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return f"entry seq {seq!r}: sequence numbers must be integers"
        if "hash" not in entry:
            return f"entry seq {seq} has no hash (exported by a hub before schema version 3?)"
        if not isinstance(entry.get("at"), (int, float)) or isinstance(entry.get("at"), bool):
            return f"entry seq {seq}: its time `at` is not a number"
    return None


def export_chain(entries: Sequence[Mapping[str, Any]]) -> str:
    """Which chain an export's links are: :data:`STANDARD_CHAIN` (a hub of schema version 4 on)
    or :data:`OLD_CHAIN` (version 3), told by the first entry whose stored link (after the stored
    link before it) is one chain's and not the other's; :data:`STANDARD_CHAIN` if none tells."""
    before_new, before_old = HUB_GENESIS, GENESIS
    for entry in entries:
        body = body_text(entry["body"])
        new = entry["hash"] == entry_hash(before_new, int(entry["seq"]), entry["at"], entry["kind"], body)
        old = entry["hash"] == link(before_old, entry["at"], entry["kind"], body)
        if new != old:
            return STANDARD_CHAIN if new else OLD_CHAIN
        before_new = before_old = str(entry["hash"])
    return STANDARD_CHAIN


def check_chain(entries: Sequence[Mapping[str, Any]]) -> tuple[str | None, str]:
    """``(problem, chain)`` of an export: ``problem`` is ``None`` when every entry's ``hash`` is its
    link by the export's chain (:func:`export_chain`), else the first entry that breaks it, and how;
    ``chain`` is the chain it was checked by."""
    problem = _shape(entries)
    if problem is not None:
        return problem, STANDARD_CHAIN
    if export_chain(entries) == OLD_CHAIN:
        return _check_old_chain(entries), OLD_CHAIN
    rows = ((int(e["seq"]), stamp_ns(e["at"]), str(e["kind"]), None, body_text(e["body"]), str(e["hash"]))
            for e in entries)
    _, _, broken = check_rows(rows, HUB_GENESIS)
    return (None if broken is None else _break(broken.seq, broken.kind)), STANDARD_CHAIN


def link(previous: str, at: float, kind: str, body: str) -> str:
    """The old link (schema version 3): SHA-256 over the previous link, the time (``repr`` of the
    float), the kind and the body text."""
    return hashlib.sha256("\0".join((previous, repr(float(at)), kind, body)).encode()).hexdigest()


def _check_old_chain(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """``None`` when every exported entry's ``hash`` is the old link (:func:`link`) of the entries
    before it, in increasing ``seq``; otherwise the first entry that breaks the chain, and how
    (the entries' fields checked by :func:`_shape` first)."""
    previous, last_seq = GENESIS, 0
    for entry in entries:
        seq = entry["seq"]
        if seq <= last_seq:
            return f"entry seq {seq}: sequence numbers must increase (after {last_seq})"
        expected = link(previous, entry["at"], entry["kind"], body_text(entry["body"]))
        if entry["hash"] != expected:
            return _break(seq, entry["kind"])
        previous, last_seq = expected, seq
    return None
