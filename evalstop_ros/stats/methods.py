"""What each comparison method is and guarantees: the one table every layer looks methods up in."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["BATCH_METHODS", "BINARY_METHODS", "FACTS", "SEQUENTIAL_METHODS", "VALIDITY", "MethodFacts"]


@dataclasses.dataclass(frozen=True)
class MethodFacts:
    """The facts of one method.

    Attributes
    ----------
    validity:
        The Type-I guarantee it offers, in words.
    sequential:
        Decisions may be taken after any trial (within ``n_max`` where stated).
    binary:
        Needs success/failure (0/1) scores.
    pvalue:
        Defines an anytime-valid p-value (what Holm's procedure needs).
    needs_n_max:
        Valid only within a horizon declared before the data, so ``n_max`` has no default.
    bins:
        Default score bins ``K`` of N-SCORE for binary and continuous metrics, else ``None``.
    """

    validity: str
    sequential: bool
    binary: bool
    pvalue: bool
    needs_n_max: bool = False
    bins: tuple[int, int] | None = None


#: Method name -> its facts.
FACTS: Mapping[str, MethodFacts] = MappingProxyType({
    # Exact, from the synthesised policy; decisions after N_max are not covered (seed 003 §IV).
    "step": MethodFacts("valid within pre-declared N_max", True, True, False, needs_n_max=True),
    # Ville's inequality on a test supermartingale: any stopping time, no budget (seed 000 §IV-V).
    # Bins: 2 for success, 21 for progress (seed 000 App. A-C, the nonparametric N-SCORE_inf).
    "nscore": MethodFacts("anytime-valid", True, False, True, bins=(2, 21)),
    "wsr": MethodFacts("anytime-valid", True, False, True),
    "savi": MethodFacts("anytime-valid", True, True, True),
    # A prior-weighted mixture of constant-bet e-processes (the hub's pairs): Ville, any time.
    "mixture": MethodFacts("anytime-valid", True, False, True),
    # Boundary constant calibrated by Monte Carlo at p0 = p1 = 1/2 (see stats.lai).
    "lai": MethodFacts("approximately valid within N_max (calibrated)", True, True, False, needs_n_max=True),
    # Group-sequential permutation test of L agents: family-wise error <= alpha over its interims
    # (seed 002 Theorem 1); decisions only at the pre-declared interims, no p-value.
    "adastop": MethodFacts("valid at its pre-declared interims (family-wise)", True, False, False),
    # One look at a fixed N; re-running after every trial violates Type-I (seed 003 §V).
    "barnard": MethodFacts("batch only", False, True, False),
    "boschloo": MethodFacts("batch only", False, True, False),
    "fisher": MethodFacts("batch only", False, True, False),
})

#: Method name -> the Type-I guarantee it offers.
VALIDITY: Mapping[str, str] = MappingProxyType({name: facts.validity for name, facts in FACTS.items()})
#: Methods whose decisions may be taken after any trial (within N_max where stated).
SEQUENTIAL_METHODS: frozenset[str] = frozenset(name for name, facts in FACTS.items() if facts.sequential)
#: Methods valid only at one pre-chosen sample size.
BATCH_METHODS: frozenset[str] = frozenset(name for name, facts in FACTS.items() if not facts.sequential)
#: Methods that need success/failure (0/1) data.
BINARY_METHODS: frozenset[str] = frozenset(name for name, facts in FACTS.items() if facts.binary)
