"""The counted A/B results of a hub journal, as the leaderboard and the rankings read them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Trial", "trials_of"]


@dataclasses.dataclass(frozen=True)
class Trial:
    """One counted A/B trial: the policies on arms A and B, the task and both scores in [0, 1]."""

    policy_a: str
    policy_b: str
    task: str
    score_a: float
    score_b: float


def trials_of(entries: Iterable[Mapping[str, Any]]) -> list[Trial]:
    """The ``result`` entries of a journal (dicts with ``kind`` and ``body``), in order."""
    return [Trial(e["body"]["policy_a"], e["body"]["policy_b"], e["body"]["task"],
                  float(e["body"]["score_a"]), float(e["body"]["score_b"]))
            for e in entries if e["kind"] == "result"]
