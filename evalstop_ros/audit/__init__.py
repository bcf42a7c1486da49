"""Offline audit of evalstop sessions from a rosbag or a session journal.

:func:`read_source` reads a bag (sqlite3 or mcap, from ``ros2 bag record`` or ``evalstop
record``) or a journal into a :class:`SessionRecord`; :func:`verify` rebuilds the session,
re-runs the statistics core on the scores in collection order and checks every published
decision and p-value and the protocol, returning an :class:`AuditReport`.  :func:`audit` does
both.  The recorder (:mod:`.recorder`) needs ROS and is imported only by ``evalstop record``.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping

from ..session.config import SessionConfig
from .bag import is_bag, read_bag
from .errors import AuditError
from .journal import read_journal_record
from .model import SessionRecord
from .verify import CODES, AuditReport, ComparisonAudit, StepReplay, TrialAudit, Violation, verify

__all__ = [
    "CODES",
    "AuditError",
    "AuditReport",
    "SessionRecord",
    "StepReplay",
    "ComparisonAudit",
    "TrialAudit",
    "Violation",
    "audit",
    "read_source",
    "verify",
]


def read_source(path: str | os.PathLike[str], *, namespace: str | None = None,
                session_id: str | None = None) -> SessionRecord:
    """Read a bag directory or a journal file (told apart by their content).

    :param path: A rosbag2 directory, a file inside one (``*.mcap``, ``*.db3``), or a journal.
    :param namespace: For a bag with the topics of several managers.
    :param session_id: For a bag holding several sessions.
    :raises AuditError: If the path is neither, or cannot be read.
    """
    source = pathlib.Path(path)
    if not source.exists():
        raise AuditError(f"{source}: no such file or directory")
    if source.is_file() and is_bag(source.parent) and source.suffix in (".mcap", ".db3"):
        source = source.parent
    if is_bag(source):
        return read_bag(source, namespace=namespace, session_id=session_id)
    if source.is_dir():
        raise AuditError(f"{source}: a directory without metadata.yaml is not a rosbag2 bag")
    return read_journal_record(source)


def audit(path: str | os.PathLike[str], *, config: SessionConfig | None = None, namespace: str | None = None,
          session_id: str | None = None, key: bytes | None = None,
          operator_keys: Mapping[str, bytes] | None = None) -> AuditReport:
    """:func:`read_source` then :func:`verify` (``key``: for a bag without ``session_event``;
    ``operator_keys``: check the signed scores' MACs)."""
    return verify(read_source(path, namespace=namespace, session_id=session_id), config=config, key=key,
                  operator_keys=operator_keys)
