"""The one exception type of the runner package, its fixed categories, and the runner's private error log.

The operator sees ``<category> (error <id>)``, never a server's words; the full text goes to
:class:`ErrorLog` (docs/policy_runner.md).
"""

from __future__ import annotations

import datetime
import enum
import json
import os
import pathlib
import re
import secrets
import stat
import threading
from typing import Any

__all__ = ["CATEGORIES", "MESSAGE_RE", "Category", "ErrorLog", "RunnerError", "default_error_dir", "new_error_id",
           "operator_message", "parse_message"]


class Category(enum.StrEnum):
    """Why a rollout failed, as the operator may see it (the values are the words shown)."""

    UNREACHABLE = "unreachable"                   # no connection, handshake or metadata frame
    TOO_SLOW = "too slow"                         # no reply within infer_timeout / connect_timeout
    PROTOCOL = "protocol error"                   # a frame the runner cannot use (size, shape, format)
    SERVER = "server error"                       # the server reported an error or dropped the connection
    GUARD = "refused by the command guard"        # an action outside the robot's limits
    ROBOT = "robot fault"                         # the robot adapter failed (no joint state, ...)
    EMERGENCY_STOP = "emergency stop"             # the operator's emergency stop
    CANCELED = "canceled"                         # the goal was canceled
    SHUTDOWN = "runner shut down"                 # the runner stopped mid-rollout
    SEALED = "sealed goal"                        # a sealed goal this runner cannot open (no or another key)


#: The category words, in :class:`Category` order.
CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)

#: A failed rollout's operator message (anchored at the start; the rest may follow).
MESSAGE_RE = re.compile(r"(?P<category>" + "|".join(map(re.escape, CATEGORIES)) +
                        r") \(error (?P<error_id>[0-9a-f]{8})\)(?:: (?P<detail>[^;]*))?")


class RunnerError(RuntimeError):
    """A rollout cannot go on: policy server unreachable, slow, disconnected, wrong reply, robot fault.

    ``str(err)`` is the full text (it may quote the policy server: it goes to the :class:`ErrorLog`
    only); ``category`` and ``detail`` are what the operator sees. ``detail`` is set only by the
    runner's own checks (the command guard) and never holds text from a policy server.
    """

    def __init__(self, text: str, *, category: Category = Category.ROBOT, detail: str = "") -> None:
        super().__init__(text)
        self.category = category
        self.detail = detail


def new_error_id() -> str:
    """An opaque error id: 8 random hex digits."""
    return secrets.token_hex(4)


def operator_message(category: Category, error_id: str, detail: str = "") -> str:
    """The operator's message of a failure (see the module docstring).

    >>> operator_message(Category.GUARD, "0123abcd", "panda_joint4 above its position limit -0.0698 rad")
    'refused by the command guard (error 0123abcd): panda_joint4 above its position limit -0.0698 rad'
    >>> parse_message(operator_message(Category.SERVER, "0123abcd"))
    ('server error', '0123abcd', '')
    """
    return f"{category.value} (error {error_id})" + (f": {detail}" if detail else "")


def parse_message(message: str) -> tuple[str, str, str] | None:
    """(category, error id, detail) of an operator message, or None if it is not one."""
    match = MESSAGE_RE.match(message)
    return None if match is None else (match["category"], match["error_id"], match["detail"] or "")


def default_error_dir() -> pathlib.Path:
    """``$ROS_HOME/evalstop/runner`` (``~/.ros/evalstop/runner`` without ROS_HOME)."""
    home = os.environ.get("ROS_HOME") or str(pathlib.Path.home() / ".ros")
    return pathlib.Path(home) / "evalstop" / "runner"


class ErrorLog:
    """The runner's private error log: one JSON line per failure, keyed by its error id.

    The directory is made (or tightened to) 0700 and the file ``errors.jsonl`` 0600 whatever the
    umask; a directory owned by another user is refused (``ValueError``).
    """

    FILE = "errors.jsonl"

    def __init__(self, directory: str | pathlib.Path) -> None:
        self.directory = pathlib.Path(directory).expanduser()
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.directory.stat()
            if info.st_uid != os.getuid():
                raise ValueError(f"error log directory {self.directory} belongs to another user")
            if stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(self.directory, 0o700)
        except OSError as err:
            raise ValueError(f"cannot use error log directory {self.directory}: {err}") from err
        self.path = self.directory / self.FILE
        self._lock = threading.Lock()

    def record(self, error: BaseException | str, category: Category, **context: Any) -> str:
        """Write the full text of ``error`` (and its causes) with ``context``; return the new error id."""
        error_id = new_error_id()
        text = str(error)
        cause = error.__cause__ if isinstance(error, BaseException) else None
        while cause is not None:
            text += f" <- {type(cause).__name__}: {cause}"
            cause = cause.__cause__
        entry = {"error_id": error_id, "time": datetime.datetime.now(datetime.UTC).isoformat(),
                 "category": category.value, "text": text, **{k: str(v) for k, v in context.items()}}
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, (json.dumps(entry) + "\n").encode())
            finally:
                os.close(fd)
        return error_id

    def find(self, error_id: str) -> dict[str, Any] | None:
        """The entry of ``error_id`` (for the lab's own debugging and the tests)."""
        if not self.path.exists():
            return None
        for line in self.path.read_text().splitlines():
            entry: dict[str, Any] = json.loads(line)
            if entry.get("error_id") == error_id:
                return entry
        return None
