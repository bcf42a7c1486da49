"""Active, cost-aware experiment selection (seed 004): what to evaluate next (the ``active`` extra; docs/active.md).
"""

from __future__ import annotations

from .acquisition import STRATEGIES, Selection, expected_information_gain, select
from .costs import CostModel
from .embeddings import EMBEDDINGS, leading_verb, policy_embeddings, task_embeddings
from .errors import ActiveError
from .shrinkage import ShrinkageSurrogate
from .surrogate import Surrogate

__all__ = [
    "EMBEDDINGS",
    "STRATEGIES",
    "ActiveError",
    "CostModel",
    "Selection",
    "ShrinkageSurrogate",
    "Surrogate",
    "expected_information_gain",
    "leading_verb",
    "policy_embeddings",
    "select",
    "task_embeddings",
]
