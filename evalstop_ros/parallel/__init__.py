"""Parallel evaluation: rollouts of one session on Ray workers (``evalstop sim-eval``).

Ray is imported only when a pool starts (:mod:`.ray_pool`); robosuite only inside the workers.
"""

from .errors import ParallelError

__all__ = ["ParallelError"]
