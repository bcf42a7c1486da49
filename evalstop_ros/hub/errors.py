"""The one exception type of the hub area."""

from __future__ import annotations


class HubError(Exception):
    """A refused hub request or an unusable hub store.

    ``status`` is the HTTP status the service answers with (400 bad input, 401 bad key,
    404 unknown or foreign assignment, 409 conflict, 410 lease gone, 413 body too large).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
