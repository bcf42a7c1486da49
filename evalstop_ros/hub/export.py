"""A hub export (``evalstop hub export``): JSON lines ``{seq, at, kind, body, hash}``, one journal
entry each, in journal order -- read here for ``evalstop hub analyze``, ``evalstop rank`` and
``evalstop audit`` alike."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from .errors import HubError

__all__ = ["FIELDS", "is_hub_export", "read_export"]

#: The fields every exported entry has (``hash`` since schema version 3).
FIELDS = frozenset({"seq", "at", "kind", "body"})


def read_export(path: str | pathlib.Path) -> list[dict[str, Any]]:
    """The entries of an export; :class:`HubError` names the first line that is not one."""
    try:
        lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise HubError(f"cannot read {path}: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise HubError(f"{path}: not a hub export (not UTF-8 text: byte {err.start})") from err
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not _is_entry(entry):
            raise HubError(f"{path}:{number}: not a JSON line of a hub export (an object with {', '.join(sorted(FIELDS))})")
        entries.append(entry)
    return entries


def is_hub_export(path: str | pathlib.Path) -> bool:
    """Whether ``path`` is a file whose first line is an entry of a hub export."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return _is_entry(first)


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and FIELDS <= value.keys() and isinstance(value["body"], dict)
