"""Which policy pair the hub hands out next: ``uncertain`` (default), ``need``, or ``uniform`` (RoboArena's pairing, seed 001 §3).

The schedules and their study: docs/hub_server.md, docs/hub_study.md.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence

from .errors import HubError

__all__ = ["SCHEDULES", "Focus", "Schedule", "choose_pair"]

#: Schedule names; the first is the default.
SCHEDULES = ("uncertain", "need", "uniform")

Pair = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class Focus:
    """What the leaderboard says about the pairs now (pairs ``(x, y)`` with ``x < y``).

    Attributes
    ----------
    open:
        Pairs sequential Holm has not decided.
    uncertain:
        The open pairs the ranking still needs: adjacent in the current order (or every open pair
        during the warm-up and once the adjacent ones are decided).
    """

    open: frozenset[Pair]
    uncertain: frozenset[Pair]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A schedule by name, with the leaderboard's :class:`Focus` for ``uncertain`` (``None``: by need)."""

    name: str
    focus: Focus | None = None

    def __post_init__(self) -> None:
        if self.name not in SCHEDULES:
            raise HubError(f"schedule must be one of {SCHEDULES}; found {self.name!r}")

    @classmethod
    def of(cls, schedule: str | Schedule) -> Schedule:
        """``schedule`` itself, or the schedule of that name."""
        return schedule if isinstance(schedule, Schedule) else cls(schedule)


def choose_pair(schedule: Schedule, pairs: Sequence[Pair], load: Mapping[Pair, int], rng: random.Random) -> Pair:
    """The next pair ``(x, y)`` from ``pairs`` (``load``: results and open leases per pair).

    >>> choose_pair(Schedule("uncertain", Focus(frozenset({("a", "b"), ("b", "c")}), frozenset({("b", "c")}))),
    ...             [("a", "b"), ("a", "c"), ("b", "c")], {("a", "b"): 0, ("a", "c"): 0, ("b", "c"): 9},
    ...             random.Random(0))
    ('b', 'c')
    """
    candidates = list(pairs)
    if schedule.name == "uniform":
        return rng.choice(candidates)
    if schedule.name == "uncertain" and schedule.focus is not None:
        for wanted in (schedule.focus.uncertain, schedule.focus.open):
            chosen = [pair for pair in candidates if pair in wanted]
            if chosen:
                candidates = chosen
                break
    least = min(load.get(pair, 0) for pair in candidates)
    return rng.choice([pair for pair in candidates if load.get(pair, 0) == least])
