"""The compact letter display of a session: the one rule the live session, the offline re-analysis
and the audit share (which pairs count as different: seed 000 §VI-B; the display itself:
:func:`evalstop_ros.stats.letters.compact_letter_display`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..stats.letters import compact_letter_display
from ..stats.sequential import Decision
from .config import SessionConfig
from .errors import SessionError
from .trials import TrialBook

__all__ = ["ClaimRow", "DecisionRow", "check_letters_request", "display_letters", "letters"]


def check_letters_request(config: SessionConfig, metric: str | None, task: str | None) -> str:
    """The metric a letter display is asked for (default: the first); refuses unknown names."""
    names = [m.name for m in config.metrics]
    if metric is not None and metric not in names:
        raise SessionError(f"`metric` should be one of {names}; found {metric!r}")
    if task is not None:
        tasks = [t.id for t in config.tasks]
        if config.claim == "pooled":
            raise SessionError(f"per-task letters need a non-pooled claim; found task {task!r} with claim 'pooled'")
        if task not in tasks:
            raise SessionError(f"`task` should be one of {tasks}; found {task!r}")
    return metric or names[0]


#: One test's decision as the letter display reads it: (the pair, metric name, decision).
DecisionRow = tuple[frozenset[str], str, Decision]
#: One multi-task claim as the letter display reads it: (the pair, metric name, established, task claims).
ClaimRow = tuple[frozenset[str], str, bool, Sequence[Decision]]


def letters(config: SessionConfig, book: TrialBook, metric: str | None, task: str | None,
            decisions: Sequence[DecisionRow], claims: Sequence[ClaimRow]) -> dict[str, str]:
    """The compact letter display of one metric (default: the first): the one rule the session,
    the offline re-analysis and the audit share.

    "Different" means a directional decision of the pair's test (``decisions``: Holm's with
    ``correction: holm``, AdaStop's under that design); with a non-pooled claim, an established
    claim (``claims``), or with ``task`` a claim on that task, whose scores alone give the means.
    Means are over every effective score of each policy (:func:`display_letters`).

    Raises
    ------
    SessionError
        For an unknown metric or task, or a task with ``claim: pooled``.
    """
    name = check_letters_request(config, metric, task)
    directional = (Decision.A_BETTER, Decision.B_BETTER)
    if config.claim == "pooled":
        differs = {pair for pair, m, decision in decisions if m == name and decision in directional}
    else:
        index = [t.id for t in config.tasks].index(task) if task is not None else None
        differs = {pair for pair, m, established, task_claims in claims if m == name and (
            established if index is None else task_claims[index] in directional)}
    return display_letters(config, book, name, task, differs)


def display_letters(config: SessionConfig, book: TrialBook, metric: str, task: str | None,
                    differs: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display of ``metric`` with the pairs ``differs`` separated.

    Means are over every effective score of each policy (on ``task`` only, if given); empty
    while some policy has no such score.
    """
    means = [book.mean(policy, metric, task) for policy in config.policies]
    if any(mean is None for mean in means):
        return {}
    return compact_letter_display(config.policies, [float(m) for m in means if m is not None], differs)
