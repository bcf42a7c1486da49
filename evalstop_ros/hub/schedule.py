"""Which policy pair the hub hands out next: spend robot time where the ranking is still uncertain.

Three schedules (``evalstop hub serve --schedule``):

* ``uncertain`` (default): decided pairs leave the schedule; the next result goes to a pair whose
  order is still open -- two policies *adjacent* in the current ranking that sequential Holm has
  not decided (:class:`Focus`, computed by :meth:`~.leaderboard.Leaderboard.focus`), the least
  loaded of them first.  Before every pair has a few results (``warm-up``), and once every
  adjacent pair is decided, the open non-adjacent pairs are served the same way; once every pair
  is decided, all pairs by need (the hub keeps serving; it reports the ranking settled).
* ``need``: among all pairs with the fewest results and open leases (ties at random).
* ``uniform``: any pair, uniformly -- RoboArena's pairing (seed ``001_*`` §3: random pairs of
  policies per evaluation).

``docs/hub_study.md`` (``bench/hub_study.py``) compares the results needed to settle a planted
ranking under ``uncertain`` and ``uniform``.  Which policy is arm A is drawn per trial in all three.
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
