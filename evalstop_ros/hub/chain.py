"""The hub journal's hash chain: each entry's link covers the previous link and the entry.

The session journal chains its events the same way (``session.journal_format.chain_hash``);
the hub's entries have their own columns (``at`` in seconds, ``kind``, the body as stored), so
their link is computed here. The sequence number is not hashed: the chain itself fixes the
order, so a deleted, inserted, reordered or edited entry breaks the link of that entry and
:func:`check_chain` names the first one (seed 001 Sec. 3.1: every result of a distributed
evaluation must be accounted for; the chain makes an export tamper-evident).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["GENESIS", "body_text", "check_chain", "link"]

#: The link before the first entry.
GENESIS = "0" * 64


def body_text(body: Mapping[str, Any]) -> str:
    """The body as the store writes it (and as an exported body is written again)."""
    return json.dumps(body, sort_keys=True)


def link(previous: str, at: float, kind: str, body: str) -> str:
    """SHA-256 over the previous link, the time (``repr`` of the float), the kind and the body text."""
    return hashlib.sha256("\0".join((previous, repr(float(at)), kind, body)).encode()).hexdigest()


def check_chain(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """``None`` when every exported entry's ``hash`` is the link of the entries before it, in
    increasing ``seq``; otherwise the first entry that breaks the chain, and how."""
    previous, last_seq = GENESIS, 0
    for entry in entries:
        seq = entry.get("seq")
        if not isinstance(seq, int) or seq <= last_seq:
            return f"entry seq {seq}: sequence numbers must increase (after {last_seq})"
        if "hash" not in entry:
            return f"entry seq {seq} has no hash (exported by a hub before schema version 3?)"
        expected = link(previous, entry["at"], entry["kind"], body_text(entry["body"]))
        if entry["hash"] != expected:
            return (f"entry seq {seq} ({entry['kind']}) does not match the hash chain: edited, or an entry "
                    "before it was removed or changed")
        previous, last_seq = expected, seq
    return None
