"""The journal's head file ``<journal>.head``: the ``(seq, hash)`` of its last event, in two CRC'd slots.

Why two slots written in place, and what a torn write leaves: docs/session.md.
"""

from __future__ import annotations

import json
import os
import pathlib
import zlib

from .errors import JournalError

#: Bytes per slot: the record, padded with spaces, then a newline.
SLOT_BYTES = 128


def head_path(journal: pathlib.Path) -> pathlib.Path:
    """``<journal>.head`` beside the database."""
    return journal.with_name(journal.name + ".head")


def _crc(seq: int, digest: str) -> int:
    return zlib.crc32(f"{seq}:{digest}".encode())


def _slot(seq: int, digest: str) -> bytes:
    """The slot of ``(seq, digest)``.

    >>> slot = _slot(3, "ab")
    >>> slot[:42], len(slot), slot[-1:]
    (b'{"seq": 3, "hash": "ab", "crc": 897364615}', 128, b'\\n')
    """
    record = json.dumps({"seq": seq, "hash": digest, "crc": _crc(seq, digest)}).encode()
    if len(record) >= SLOT_BYTES:
        raise JournalError(f"head record of event {seq} does not fit a {SLOT_BYTES}-byte slot")
    return record.ljust(SLOT_BYTES - 1) + b"\n"


class HeadFile:
    """The head file of an open journal (writer)."""

    def __init__(self, journal: pathlib.Path, *, new: bool) -> None:
        """Open ``<journal>.head``; ``new``: the journal is being created (drop any stale head)."""
        self.path = head_path(journal)
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if new else 0)
        try:
            self._fd: int | None = os.open(self.path, flags, 0o600)
            if os.fstat(self._fd).st_mode & 0o777 != 0o600:
                os.fchmod(self._fd, 0o600)  # whatever the umask: the journal's owner only
        except OSError as err:
            raise JournalError(f"journal {str(journal)!r}: cannot open its head file {str(self.path)!r}: "
                               f"{err.strerror or err}") from err

    def write(self, seq: int, digest: str) -> None:
        """Record event ``seq`` with hash ``digest`` as the head."""
        if self._fd is None:
            raise JournalError(f"head file {str(self.path)!r} is closed")
        try:
            os.pwrite(self._fd, _slot(seq, digest), (seq % 2) * SLOT_BYTES)
        except OSError as err:
            raise JournalError(f"cannot write the head file {str(self.path)!r}: {err.strerror or err}") from err

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_head(journal: pathlib.Path) -> tuple[int, str] | None:
    """The recorded head ``(seq, hash)`` of ``journal``; ``None`` without a head file.

    Raises :class:`JournalError` if the file exists but holds no valid record.
    """
    path = head_path(journal)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise JournalError(f"journal {str(journal)!r}: its head file {str(path)!r} is unreadable: {err}") from err
    heads = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line.strip(b"\0 "))
            seq, digest = int(record["seq"]), str(record["hash"])
        except (ValueError, KeyError, TypeError):
            continue  # an empty slot, or one torn by a crash
        if "crc" not in record or record["crc"] == _crc(seq, digest):
            heads.append((seq, digest))
    if not heads:
        raise JournalError(f"journal {str(journal)!r}: its head file {str(path)!r} is unreadable: no valid record")
    return max(heads)
