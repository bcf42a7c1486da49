"""The hub's pair families by name, and the declared family's warm-up: what the CLI offers without loading the tests.

The families themselves: :mod:`.family`; their design and validity: docs/hub.md ("The family").
"""

from __future__ import annotations

__all__ = ["DECLARE_AFTER", "FAMILIES"]

#: The hub's families (``--family``); the first is the default.
FAMILIES = ("declared", "all-pairs")
#: Results of every pair in the ``declared`` family's warm-up (its results order the policies, never a test).
DECLARE_AFTER = 6
