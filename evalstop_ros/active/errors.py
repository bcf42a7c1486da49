"""The one exception type of :mod:`evalstop_ros.active`."""

from __future__ import annotations

__all__ = ["ActiveError"]


class ActiveError(ValueError):
    """Bad input to the surrogate, the acquisition or the scheduler (the message names the value)."""
