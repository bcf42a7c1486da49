"""The fixed-N plan of a session's design, the baseline of "trials saved" (docs/report.md).

The trials each design runs when nothing stops early; per design in docs/session.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .config import SessionConfig
from .trials import TrialRecord

__all__ = ["PlanUnit", "describe_plan", "fixed_plan", "trials_per_test", "trials_used"]


@dataclasses.dataclass(frozen=True)
class PlanUnit:
    """One unit of the fixed-N plan: the whole session, a task, an A/B pair or an agent.

    Attributes
    ----------
    kind:
        ``session``, ``task``, ``pair`` (an A/B pair) or ``agent``.
    label:
        ``whole session``, ``@push`` (a task), ``a vs b`` (an A/B pair) or ``agent a1``.
    fixed:
        Trials the fixed-N plan runs in the unit.
    task:
        The unit's task, if it is one.
    policies:
        The unit's policies (every one for the session and a task).
    """

    kind: str
    label: str
    fixed: int
    task: str | None = None
    policies: tuple[str, ...] = ()

    def holds(self, trial: TrialRecord, pair_of_round: dict[int, frozenset[str]]) -> bool:
        """Whether ``trial`` belongs to the unit (an A/B pair: its round ran exactly that pair)."""
        if self.kind == "task":
            return trial.task == self.task
        if self.kind == "agent":
            return trial.policy in self.policies
        if self.kind == "pair":
            return pair_of_round.get(trial.round) == frozenset(self.policies)
        return True


def trials_per_test(config: SessionConfig) -> int:
    """Trials one test's fixed-N plan runs: ``2 n_max`` (its pairs), ``2 N K`` under AdaStop."""
    if config.design == "adastop" and config.adastop is not None:
        return 2 * config.adastop.n_per_interim * config.adastop.n_interims
    return 2 * config.n_max


def fixed_plan(config: SessionConfig) -> tuple[PlanUnit, ...]:
    """The units of ``config``'s fixed-N plan (module docstring), the whole session first.

    >>> from evalstop_ros.session import parse_config
    >>> tasks = [{"id": t, "initial_conditions": [{"id": "c", "reset_instructions": "r"}]} for t in ("push", "cup")]
    >>> c = parse_config({"policies": ["a", "b"], "seed": 1, "n_max": 30, "tasks": tasks, "claim": "per-task",
    ...     "metrics": [{"name": "success", "alternative": "greater"}]})
    >>> [(u.label, u.fixed) for u in fixed_plan(c)]
    [('whole session', 120), ('task @push', 60), ('task @cup', 60)]
    """
    policies = tuple(config.policies)
    if config.design == "adastop" and config.adastop is not None:
        per_agent = config.adastop.n_per_interim * config.adastop.n_interims
        agents = [PlanUnit("agent", f"agent {p}", per_agent, None, (p,)) for p in policies]
        return (PlanUnit("session", "whole session", per_agent * len(policies), None, policies), *agents)
    if config.design == "ab":
        pairs = [(c.policy_a, c.policy_b) for c in config.comparison_list()]
        units = [PlanUnit("pair", f"A/B pair {a} vs {b}", 2 * config.n_max, None, (a, b)) for a, b in pairs]
        return (PlanUnit("session", "whole session", sum(u.fixed for u in units), None, policies), *units)
    per_round_set = len(policies) * config.n_max
    if config.claim == "pooled":
        return (PlanUnit("session", "whole session", per_round_set, None, policies),)
    tasks = [PlanUnit("task", f"task @{t.id}", per_round_set, t.id, policies) for t in config.tasks]
    return (PlanUnit("session", "whole session", per_round_set * len(tasks), None, policies), *tasks)


def describe_plan(config: SessionConfig) -> str:
    """:func:`fixed_plan` in words, e.g. ``30 rounds of each of the 2 tasks, every policy once per round``."""
    if config.design == "adastop" and config.adastop is not None:
        design = config.adastop
        return (f"{design.n_per_interim} trials per agent in each of {design.n_interims} interims, "
                f"{design.n_per_interim * design.n_interims} per agent, for {len(config.policies)} agents")
    if config.design == "ab":
        return f"{config.n_max} rounds of each of the {len(config.comparison_list())} A/B pairs, two trials a round"
    if config.claim == "pooled":
        return f"{config.n_max} rounds, every policy once per round"
    return f"{config.n_max} rounds of each of the {len(config.tasks)} tasks, every policy once per round"


def trials_used(config: SessionConfig, trials: Iterable[TrialRecord]) -> list[tuple[PlanUnit, int]]:
    """Each unit of :func:`fixed_plan` with the scored trials it used."""
    every = list(trials)
    members: dict[int, set[str]] = {}
    for trial in every:
        members.setdefault(trial.round, set()).add(trial.policy)
    pair_of_round = {r: frozenset(m) for r, m in members.items()}
    scored = [t for t in every if t.score is not None]
    return [(unit, sum(unit.holds(t, pair_of_round) for t in scored)) for unit in fixed_plan(config)]
