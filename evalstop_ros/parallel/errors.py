"""The one exception type of the parallel package."""

from __future__ import annotations

__all__ = ["ParallelError"]


class ParallelError(RuntimeError):
    """A simulated evaluation cannot start or go on: a bad ``simulation`` section, no Ray, no workers left."""
