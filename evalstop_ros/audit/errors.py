"""The audit's one exception type."""

from __future__ import annotations

__all__ = ["AuditError"]


class AuditError(Exception):
    """A source (bag or journal) that cannot be read as one evalstop session.

    Raised for unreadable or foreign files, missing message definitions, a bag that holds
    several sessions or namespaces without a choice, or a session without a configuration.
    Problems *inside* a readable session are not errors: they are
    :class:`~evalstop_ros.audit.verify.Violation` entries of the audit report.
    """
