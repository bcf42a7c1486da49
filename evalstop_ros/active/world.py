"""Synthetic multi-task worlds shaped like seed 004's settings (§V, App. D), for the study and tests (docs/active.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray

from .costs import CostModel
from .errors import ActiveError

__all__ = ["WORLDS", "World", "make_world"]

WORLDS = ("metaworld", "openvla")
_VERBS = ("pick up", "push", "open", "close", "press", "turn on", "slide", "lift", "rotate", "pull")
_OBJECTS = ("drawer", "window", "button", "red cube", "door")


@dataclasses.dataclass(frozen=True)
class World:
    """Ground truth of a synthetic setting.

    Attributes
    ----------
    descriptions:
        One instruction per task.
    success:
        ``(M, N)`` success probabilities ``p_ij``.
    outcome:
        ``"binary"`` or ``"binned"`` (continuous progress in [0, 1]).
    costs:
        The setting's cost model.
    """

    descriptions: tuple[str, ...]
    success: NDArray[np.float64]
    outcome: str
    costs: CostModel

    @property
    def shape(self) -> tuple[int, int]:
        """``(M, N)``."""
        return int(self.success.shape[0]), int(self.success.shape[1])

    def true_mean(self) -> NDArray[np.float64]:
        """``E_P[X]`` of every pair."""
        if self.outcome == "binary":
            return self.success
        return self.success * 0.9 + (1 - self.success) * 0.05

    def sample(self, policy: NDArray[np.int64], task: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.float64]:
        """One outcome per ``(policy[k], task[k])``."""
        won = rng.random(policy.shape) < self.success[policy, task]
        if self.outcome == "binary":
            return won.astype(np.float64)
        good = np.clip(rng.normal(0.9, 0.08, policy.shape), 0, 1)
        bad = np.clip(np.abs(rng.normal(0.0, 0.08, policy.shape)), 0, 1)
        return np.where(won, good, bad)


def make_world(kind: str = "metaworld", *, outcome: str = "binary", seed: int = 0) -> World:
    """A random world of ``kind`` (module docstring), reproducible from ``seed``."""
    if kind not in WORLDS:
        raise ActiveError(f"`kind` should be one of {WORLDS}; found {kind!r}")
    rng = np.random.default_rng([seed, 13])
    if kind == "metaworld":
        m, pairs = 10, [(v, o) for v in range(10) for o in range(5)]
        groups = tuple(_OBJECTS[o] for _, o in pairs)
        costs = CostModel(groups=groups, evaluation=0.5, switch=1.0, within_group=0.0)
    else:
        m, pairs = 4, [(v, o) for v in range(6) for o in range(5)][:29]
        groups = tuple("widowx" if j < 17 else "google_robot" for j in range(29))
        costs = CostModel(groups=groups, evaluation=0.5, switch=3.0, within_group=1.0)
    descriptions = tuple(f"{_VERBS[v]} the {_OBJECTS[o]}" for v, o in pairs)
    skill = rng.normal(0.0, 1.0, m)
    style = rng.normal(0.0, 1.0, (m, 3))
    verb = rng.normal(0.0, 1.2, (10, 3))
    difficulty = rng.normal(-0.3, 0.8, 5)
    logits = np.array([[skill[i] + style[i] @ verb[v] + difficulty[o] for v, o in pairs] for i in range(m)])
    return World(descriptions, 1 / (1 + np.exp(-logits)), outcome, costs)
