"""The hub journal's hash chain: each entry's link covers the previous link and the entry.

The session journal chains its events the same way (``session.journal_format.chain_hash``);
the hub's entries have their own columns (``at`` in seconds, ``kind``, the body as stored), so
their link is computed here. The sequence number is not hashed: the chain itself fixes the
order, so a deleted, inserted, reordered or edited entry breaks the link of that entry and
:func:`check_chain` names the first one (seed 001 Sec. 3.1: every result of a distributed
evaluation must be accounted for; the chain makes an export tamper-evident).

An older station's local journal (``station.jsonl``, before stations kept the standard journal
of :mod:`.station_journal`, which migrates it) was chained by the same :func:`link`: a record's
``at``, ``kind`` and the rest of its fields (without ``hash``, as :func:`body_text`) are its
time, kind and body (:func:`record_link`). A journal written before stations chained their
records starts with records without ``hash``; those are *unchained* (old data, reported, not an
error), and the chain starts from :data:`GENESIS` at the first hashed record, after which every
record must carry its link (:func:`check_records`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["GENESIS", "body_text", "check_chain", "check_records", "link", "record_link"]

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


def record_link(previous: str, record: Mapping[str, Any]) -> str:
    """The link of a station journal record (its fields but ``hash``) after ``previous``."""
    body = {k: v for k, v in record.items() if k not in ("at", "kind", "hash")}
    return link(previous, record.get("at", 0.0), str(record.get("kind")), body_text(body))


def check_records(records: Iterable[Mapping[str, Any]]) -> tuple[int, str | None]:
    """``(unchained, problem)`` of a station journal: how many leading records carry no ``hash``
    (written before stations chained their journals), and ``None`` when every record from the
    first hashed one on links to the one before it (the first to :data:`GENESIS`), else the first
    record (line number, kind and upload id) that breaks the chain."""
    previous: str | None = None
    unchained = 0
    for line, record in enumerate(records, start=1):
        if previous is None and "hash" not in record:
            unchained += 1
            continue
        previous = previous or GENESIS
        expected = record_link(previous, record) if isinstance(record.get("at"), (int, float)) else None
        if record.get("hash") != expected:
            upload = f", upload {record['upload_id']}" if "upload_id" in record else ""
            how = "has no hash" if "hash" not in record else "does not match the hash chain"
            return unchained, (f"line {line} ({record.get('kind')}{upload}) {how}: edited, or a record before it "
                               "was removed or changed")
        previous = expected
    return unchained, None
