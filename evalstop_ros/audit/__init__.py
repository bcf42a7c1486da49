"""Offline audit of evalstop sessions from a rosbag or a session journal: :func:`read_source`, :func:`verify`, :func:`audit`.

The recorder (:mod:`.recorder`) needs ROS and is imported only by ``evalstop record``.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

from ..session.config import SessionConfig
from .bag import is_bag, read_bag
from .errors import AuditError
from .journal import read_journal_record
from .model import SessionRecord
from .stream import compare_streams
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
          operator_keys: Mapping[str, bytes] | None = None,
          against: str | os.PathLike[str] | None = None) -> AuditReport:
    """:func:`read_source` then :func:`verify` (``key``: for a bag without ``session_event``;
    ``operator_keys``: check the signed scores' MACs).

    ``against``: the other record of the same session -- a bag when ``path`` is a journal, or the
    journal when ``path`` is a bag: the journal is compared with the recorded ``session_event``
    stream event by event (:func:`~.stream.compare_streams`), its findings added to the report.
    """
    record = read_source(path, namespace=namespace, session_id=session_id)
    report = verify(record, config=config, key=key, operator_keys=operator_keys)
    if against is None:
        return report
    other = read_source(against, namespace=namespace, session_id=session_id or record.session_id)
    kinds = {record.kind, other.kind}
    if kinds != {"journal", "bag"}:
        raise AuditError(f"{against}: compare a journal with a bag of the same session; found {record.kind} and "
                         f"{other.kind}")
    journal, recording = (record, other) if record.kind == "journal" else (other, record)
    violations, notes = compare_streams(journal, recording)
    return dataclasses.replace(report, violations=(*report.violations, *violations), notes=(*report.notes, *notes))
