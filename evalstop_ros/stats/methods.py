"""What each comparison method in the statistics core guarantees, by name.

Reports and the CLI look a method up here before presenting its decision, so that a batch test
run in sequence, or Lai's calibrated test past its budget, is never presented as a valid
sequential result.
"""

from __future__ import annotations

__all__ = ["VALIDITY", "SEQUENTIAL_METHODS", "BATCH_METHODS"]

#: Method name -> the Type-I guarantee it offers.
VALIDITY: dict[str, str] = {
    # Exact, from the synthesised policy; decisions after N_max are not covered (seed 003).
    "step": "valid within pre-declared N_max",
    # Ville's inequality on a test supermartingale: any stopping time, no budget (seed 000).
    "nscore": "anytime-valid",
    "wsr": "anytime-valid",
    "savi": "anytime-valid",
    # Boundary constant calibrated by Monte Carlo at p0 = p1 = 1/2 (see stats.lai).
    "lai": "approximately valid within N_max (calibrated)",
    # One look at a fixed N; re-running after every trial violates Type-I (seed 003 §V).
    "barnard": "batch only",
    "boschloo": "batch only",
    "fisher": "batch only",
}

#: Methods whose decisions may be taken after any trial (within N_max where stated).
SEQUENTIAL_METHODS: frozenset[str] = frozenset({"step", "nscore", "wsr", "savi", "lai"})
#: Methods valid only at one pre-chosen sample size.
BATCH_METHODS: frozenset[str] = frozenset({"barnard", "boschloo", "fisher"})
