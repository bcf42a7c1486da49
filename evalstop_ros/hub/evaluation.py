"""A hub's evaluation: what it tests and how, journaled once, like a session's configuration.

A later start must name the same evaluation or is refused with the differences (docs/hub_server.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .designs import FAMILIES
from .errors import HubError
from .leaderboard import Leaderboard
from .rankings import MODELS
from .schedule import SCHEDULES

__all__ = ["KIND", "Evaluation", "journaled", "resumed"]

#: The journal entry's kind.
KIND = "evaluation"


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The journaled evaluation of a hub (the module docstring); the defaults are ``evalstop hub serve``'s."""

    method: str = "mixture"
    alpha: float = 0.05
    ranker: str = "bt"
    models: tuple[str, ...] = MODELS
    budget: int = 0
    schedule: str = "uncertain"
    tasks: tuple[str, ...] = ("default",)
    family: str = FAMILIES[0]

    def __post_init__(self) -> None:
        """:class:`HubError` for a value the hub cannot evaluate with (checked before anything is journaled)."""
        if self.schedule not in SCHEDULES:
            raise HubError(f"unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if not self.tasks or not all(self.tasks):
            raise HubError(f"the hub needs one task at least, each with a name; found {list(self.tasks)}")
        self.leaderboard(())  # the leaderboard's own checks of method, alpha, ranker, models and budget

    def leaderboard(self, policies: Iterable[str]) -> Leaderboard:
        """An empty live leaderboard of ``policies`` under this evaluation."""
        return Leaderboard(list(policies), method=self.method, alpha=self.alpha, ranker=self.ranker,
                           models=self.models, budget=self.budget, family=self.family)

    def analyse(self, policies: Iterable[str], entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """The leaderboard of hub journal ``entries`` under this evaluation, in one go."""
        board = self.leaderboard(policies)
        board.add(list(entries))
        return board.snapshot()

    def body(self) -> dict[str, Any]:
        """The journal entry's body (JSON-ready)."""
        return {**dataclasses.asdict(self), "models": list(self.models), "tasks": list(self.tasks)}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Evaluation:
        """The evaluation of a journal entry's body; :class:`HubError` if it is not one.  An entry
        without ``family`` (journaled before the ``declared`` family) was evaluated with ``all-pairs``."""
        fields = {f.name for f in dataclasses.fields(cls)}
        if isinstance(body, Mapping) and "family" not in body:
            body = {**body, "family": "all-pairs"}
        if not isinstance(body, Mapping) or set(body) != fields:
            raise HubError(f"an evaluation entry has the fields {sorted(fields)}; found {body!r}")
        try:
            return cls(method=str(body["method"]), alpha=float(body["alpha"]), ranker=str(body["ranker"]),
                       models=tuple(str(m) for m in body["models"]), budget=int(body["budget"]),
                       schedule=str(body["schedule"]), tasks=tuple(str(t) for t in body["tasks"]),
                       family=str(body["family"]))
        except (TypeError, ValueError) as err:
            raise HubError(f"an evaluation entry holds a value of the wrong type: {err}") from err

    def differences(self, given: Evaluation) -> list[str]:
        """What ``given`` changes of this (journaled) evaluation, one ``name: journaled X, given Y`` each."""
        return [f"{f.name}: journaled {getattr(self, f.name)!r}, given {getattr(given, f.name)!r}"
                for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(given, f.name)]

    def settled(self, journaled: Evaluation) -> Evaluation:
        """``journaled`` if this evaluation equals it; :class:`HubError` naming the differences otherwise."""
        changed = journaled.differences(self)
        if changed:
            raise HubError("the hub's journal holds another evaluation (" + "; ".join(changed) + "); a hub "
                           "evaluates as it was started (no level or method chosen after the data): start it with "
                           "the journaled settings, or a new database for a new evaluation")
        return journaled


def journaled(entries: Iterable[Mapping[str, Any]]) -> Evaluation | None:
    """The evaluation journaled in hub journal ``entries`` (the first ``evaluation`` entry), or ``None``."""
    for entry in entries:
        if entry.get("kind") == KIND:
            return Evaluation.from_body(entry["body"])
    return None


def resumed(journaled: Evaluation | None, given: Mapping[str, Any]) -> Evaluation:
    """The evaluation a start or an analysis asks for: the ``journaled`` one (the defaults when
    there is none) with the options ``given`` (the fields of :class:`Evaluation`; ``None``: not given)
    in its place; :class:`HubError` for an unknown option."""
    fields = {f.name for f in dataclasses.fields(Evaluation)}
    unknown = sorted(set(given) - fields)
    if unknown:
        raise HubError(f"unknown evaluation option(s) {unknown}; known: {sorted(fields)}")
    return dataclasses.replace(journaled or Evaluation(), **{k: v for k, v in given.items() if v is not None})
