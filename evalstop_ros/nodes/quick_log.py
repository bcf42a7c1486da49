"""A node logger without rclpy's per-message search for the caller's source line, and the handler
that forwards the session layer's log records to a node's logger (docs/nodes.md).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from rclpy.impl import rcutils_logger
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.logging import LoggingSeverity
from rclpy.node import Node

#: Modules whose frames are the logger's own, not the caller's.
_OWN = frozenset({__name__, RcutilsLogger.__module__})
# ... for rclpy's own caller search too (filtered messages), through the list it keeps of them
# ("to preserve any filenames that may have been added by third parties").
rcutils_logger._internal_callers.append(os.path.realpath(__file__))


class QuickLogger(RcutilsLogger):
    """:class:`RcutilsLogger` with a cheap caller lookup (module docstring)."""

    def log(self, message: str, severity: int | LoggingSeverity, name: str | None = None, **kwargs: Any) -> bool:
        """Log ``message`` at ``severity``; with filters, as rclpy does.  False if not logged."""
        if kwargs or name not in (None, self.name):
            # name only when given: Jazzy's RcutilsLogger.log takes it from **kwargs and logs name=None as ""
            named = {"name": name} if name is not None else {}
            return super().log(message, severity, **named, **kwargs)  # type: ignore[arg-type]
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__") in _OWN:
            frame = frame.f_back
        if frame is None:
            return super().log(message, severity)
        return self.log_from(severity, message, frame.f_code.co_name, frame.f_code.co_filename, frame.f_lineno)

    def log_from(self, severity: int | LoggingSeverity, message: str, function: str, file: str, line: int) -> bool:
        """Log ``message`` as coming from ``function`` at ``file:line`` (e.g. a Python log record's)."""
        severity = LoggingSeverity(severity)
        if not self.is_enabled_for(severity):
            return False
        _rclpy.rclpy_logging_rcutils_log(severity, self.name, message, function, file, line)
        return True


class QuickNode(Node):
    """A :class:`~rclpy.node.Node` whose :meth:`get_logger` is a :class:`QuickLogger`."""

    _quick_logger: QuickLogger | None = None

    def get_logger(self) -> QuickLogger:
        """The node's logger (same name, level and output as rclpy's)."""
        if self._quick_logger is None:
            self._quick_logger = QuickLogger(super().get_logger().name)
        return self._quick_logger


class SessionLogHandler(logging.Handler):
    """Forwards the session layer's Python log records to the node's ROS logger."""

    def __init__(self, node: QuickNode, public: Callable[[str], str]) -> None:
        super().__init__(logging.INFO)
        self._logger = node.get_logger()
        self._public = public  # policy ids -> stand-ins while the session runs (session/public_view.py)

    #: Session records the node logs itself, with more context (the ROS trial id and scorer).
    SKIP = frozenset({"score for trial %s rejected: %s"})

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg in self.SKIP:
            return
        severity = (LoggingSeverity.ERROR if record.levelno >= logging.ERROR else
                    LoggingSeverity.WARN if record.levelno >= logging.WARNING else LoggingSeverity.INFO)
        self._logger.log_from(severity, self._public(record.getMessage()), record.funcName, record.pathname, record.lineno)
