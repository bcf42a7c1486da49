"""A/B rounds of a ``design: ab`` session as ranking data (seed 001, RoboArena, Sec. 3.1).

Only complete rounds (both scores and a preference, or a preference derived under ``scoring: auto``)
count; the rules are in docs/session.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..stats.ranking import Comparisons, comparisons
from .config import SessionConfig
from .errors import SessionError
from .journal import Event
from .trials import TrialBook, TrialRecord

__all__ = ["ABRounds", "ab_rounds", "ab_rounds_of"]


@dataclasses.dataclass(frozen=True)
class ABRounds:
    """The complete, valid A/B rounds of a session, in round order.

    ``data`` has one comparison per such round (``tasks`` = the round's instruction: the one the
    operator stated with a score, else the config task's description, else its id);
    ``explanations`` the operator's notes of each (both trials', joined by `` | ``);
    ``rounds`` the round numbers; ``n_incomplete`` the rounds set aside for a missing score or
    preference, ``n_invalid`` those the operator judged not valid (``pair_invalid``);
    ``n_derived`` the rounds whose preference follows the scores (``scoring: auto``).
    """

    data: Comparisons
    explanations: tuple[str, ...]
    rounds: tuple[int, ...]
    n_incomplete: int
    n_invalid: int = 0
    n_derived: int = 0


def ab_rounds(config: SessionConfig, events: Iterable[Event]) -> ABRounds:
    """Fold the journal ``events`` of a ``design: ab`` session into A/B comparisons."""
    if config.design != "ab":
        raise SessionError(f"A/B comparisons need a session with design 'ab'; found design {config.design!r}")
    return ab_rounds_of(config, TrialBook().fold(events).trials.values())


def ab_rounds_of(config: SessionConfig, records: Iterable[TrialRecord]) -> ABRounds:
    """The A/B comparisons of the folded trial ``records`` of a ``design: ab`` session."""
    by_round: dict[int, list[TrialRecord]] = {}
    for record in records:
        by_round.setdefault(record.round, []).append(record)
    columns: dict[str, list[str]] = {"a": [], "b": [], "pref": [], "task": [], "notes": []}
    progress: dict[str, list[float]] = {"a": [], "b": []}
    rounds: list[int] = []
    incomplete = invalid = derived = 0
    described = {t.id: t.description or t.id for t in config.tasks}
    for number in sorted(by_round):
        trials = by_round[number]
        order = sorted({r.policy for r in trials}, key=lambda p: min(r.trial_id for r in trials if r.policy == p))
        scored = {r.policy: r for r in trials if r.score is not None}
        if any(r.pair_invalid for r in scored.values()):
            invalid += 1
            continue
        preference = _preference(trials, order)
        if preference is None and config.scoring == "auto" and len(order) == 2 and set(scored) == set(order):
            preference = _by_scores(scored[order[0]], scored[order[1]])
            derived += 1
        if len(order) != 2 or set(scored) != set(order) or preference is None:
            incomplete += 1
            continue
        first, second = scored[order[0]], scored[order[1]]
        assert first.score is not None and second.score is not None
        columns["a"].append(first.policy)
        columns["b"].append(second.policy)
        columns["pref"].append(preference)
        columns["task"].append(_stated(trials, "instruction") or described[first.task])
        columns["notes"].append(" | ".join(n for n in (first.score.notes, second.score.notes) if n))
        progress["a"].append(first.score.progress)
        progress["b"].append(second.score.progress)
        rounds.append(number)
    data = comparisons(columns["a"], columns["b"], columns["pref"], progress_a=progress["a"], progress_b=progress["b"],
                       tasks=columns["task"], policies=config.policies)
    return ABRounds(data, tuple(columns["notes"]), tuple(rounds), incomplete, invalid, derived)


def _by_scores(first: TrialRecord, second: TrialRecord) -> str:
    """``A``/``B``/``tie``: the trial with the higher progress, then success (``scoring: auto``)."""
    assert first.score is not None and second.score is not None
    a = (first.score.progress, first.score.success)
    b = (second.score.progress, second.score.success)
    return "A" if a > b else "B" if b > a else "tie"


def _stated(trials: list[TrialRecord], field: str) -> str:
    """The round's latest non-empty ``field`` of a score submission (``""``: none stated)."""
    stated = [r for r in trials if r.score is not None and r.submission and r.submission.get(field)]
    return str(max(stated, key=lambda r: r.scored_seq).submission[field]) if stated else ""  # type: ignore[index]


def _preference(trials: list[TrialRecord], order: list[str]) -> str | None:
    """``A``/``B``/``tie`` from the round's latest stated preference (``None``: none stated)."""
    choice = _stated(trials, "preference")
    if not choice or len(order) != 2:
        return None
    if choice == "=":
        return "tie"
    labels = {r.label: r.policy for r in trials}
    policy = labels.get(choice)
    if policy is None:
        return None
    return "A" if policy == order[0] else "B"
