"""The exception types of the session layer (one base, one subclass per boundary)."""

from __future__ import annotations


class SessionError(Exception):
    """A request the evaluation session cannot honour; the message says why."""


class ConfigError(SessionError):
    """An invalid session configuration.

    Attributes
    ----------
    path:
        Where the configuration came from (a file path, or a description such as
        ``"<journal meta>"``).
    detail:
        What is wrong, one ``location: problem`` clause per error, separated by ``"; "``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{self.path}: {detail}")


class JournalError(SessionError):
    """The journal cannot be opened, written or replayed consistently."""
