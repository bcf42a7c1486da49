"""The frozen result of an AdaStop comparison (:mod:`.adastop`, seed 002)."""

from __future__ import annotations

import dataclasses
import math

from .letters import compact_letter_display

__all__ = ["AdaStopResult"]


@dataclasses.dataclass(frozen=True)
class AdaStopResult:
    """State of an AdaStop comparison after its latest interim (frozen).

    Attributes
    ----------
    agents:
        Agent names, in column order.
    comparisons:
        The comparisons ``(l1, l2)`` as agent indices; ``"larger"`` means agent ``l1`` larger.
    decisions:
        Per comparison, one of :data:`DECISIONS`.
    decided_at:
        Per comparison, the 1-based interim of the decision (``None`` while ``"continue"``).
    mean_differences:
        Per comparison, ``mean(l1) - mean(l2)`` over the ``k N`` scores of the interim that decided
        it (the latest interim while undecided).
    means, n_scores:
        Per agent, the mean and number of scores used by the test.
    last_interim:
        Per agent, the last interim at which it was run (0: never needed).
    interim:
        Interims analysed so far.
    is_finished:
        True when every comparison is decided (at the latest after interim ``n_interims``).
    boundaries:
        Per interim, the boundary ``b_k`` of the last step-down iteration, on the scale of
        Eq. (8) (sum of score differences over ``k N`` pairs); ``inf`` when no level was left to
        spend (no rejection possible at that interim).  With ``permutation="closed"`` and three
        or more agents: the boundary of the permutation test of all comparisons together, on
        the normal scale of Welch's statistic (:mod:`.adastop_welch`), ``inf`` once that test
        has crossed; with two agents the paper's boundaries, ``inf`` after the permutation test
        crossed while the pair's normal-theory test had not.
    level_spent:
        Per interim, the cumulative level ``q_1 + ... + q_k`` actually spent (``<= k alpha / K``;
        ``"closed"``: by the test of all comparisons together).
    n_permutations:
        Per interim, the number ``m_k`` of permutation paths (``min(B, C(2N, N)^k / 2)`` for two
        agents; ``B`` for relabelings and the closed scheme with three or more).
    alpha, n_per_interim, n_interims, seed:
        The design.
    """

    agents: tuple[str, ...]
    comparisons: tuple[tuple[int, int], ...]
    decisions: tuple[str, ...]
    decided_at: tuple[int | None, ...]
    mean_differences: tuple[float, ...]
    means: tuple[float, ...]
    n_scores: tuple[int, ...]
    last_interim: tuple[int, ...]
    interim: int
    is_finished: bool
    boundaries: tuple[float, ...]
    level_spent: tuple[float, ...]
    n_permutations: tuple[int, ...]
    alpha: float
    n_per_interim: int
    n_interims: int
    seed: int

    @property
    def stopped_early(self) -> tuple[str, ...]:
        """Agents that left the rotation before the test's last interim (their comparisons decided)."""
        return tuple(
            name for name, last in zip(self.agents, self.last_interim) if 0 < last < self.interim
        )

    @property
    def active_agents(self) -> tuple[str, ...]:
        """Agents the next interim needs (empty once finished)."""
        if self.is_finished:
            return ()
        needed = {l for (l1, l2), d in zip(self.comparisons, self.decisions) if d == "continue" for l in (l1, l2)}
        return tuple(name for i, name in enumerate(self.agents) if i in needed)

    def decision_table(self) -> dict[str, dict[str, str]]:
        """``table[a][b]`` = decision of "a vs b" from a's side (``"smaller"`` mirrored to ``"larger"``)."""
        mirror = {"larger": "smaller", "smaller": "larger", "equal": "equal", "continue": "continue"}
        table: dict[str, dict[str, str]] = {name: {} for name in self.agents}
        for (l1, l2), decision in zip(self.comparisons, self.decisions):
            table[self.agents[l1]][self.agents[l2]] = decision
            table[self.agents[l2]][self.agents[l1]] = mirror[decision]
        return table

    def letters(self) -> dict[str, str]:
        """Compact letter display of the decisions (agents sharing a letter were not separated).

        Only meaningful once finished; agents that are in no comparison are left out.
        """
        involved = sorted({l for pair in self.comparisons for l in pair})
        names = [self.agents[l] for l in involved]
        differs = [
            {self.agents[l1], self.agents[l2]}
            for (l1, l2), d in zip(self.comparisons, self.decisions)
            if d in ("larger", "smaller")
        ]
        return compact_letter_display(names, [self.means[l] for l in involved], differs)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation (``inf`` boundaries become ``None``, NaN means too)."""

        def number(value: float) -> float | None:
            return None if not math.isfinite(value) else float(value)

        return {
            "agents": list(self.agents),
            "alpha": self.alpha,
            "n_per_interim": self.n_per_interim,
            "n_interims": self.n_interims,
            "seed": self.seed,
            "interim": self.interim,
            "is_finished": self.is_finished,
            "comparisons": [
                {
                    "agent_1": self.agents[l1],
                    "agent_2": self.agents[l2],
                    "decision": decision,
                    "decided_at_interim": at,
                    "mean_difference": number(diff),
                }
                for (l1, l2), decision, at, diff in zip(
                    self.comparisons, self.decisions, self.decided_at, self.mean_differences
                )
            ],
            "agents_detail": {
                name: {"mean": number(mean), "n_scores": n, "last_interim": last}
                for name, mean, n, last in zip(self.agents, self.means, self.n_scores, self.last_interim)
            },
            "stopped_early": list(self.stopped_early),
            "active_agents": list(self.active_agents),
            "boundaries": [number(b) for b in self.boundaries],
            "level_spent": list(self.level_spent),
            "n_permutations": list(self.n_permutations),
        }
