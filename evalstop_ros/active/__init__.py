"""Active, cost-aware experiment selection (seed 004): what to evaluate next.

A surrogate MLP over (policy, task) embeddings with MC-dropout uncertainty (:mod:`.surrogate`,
:mod:`.embeddings`) or a closed-form shrinkage Gaussian process over the same pairs
(:mod:`.shrinkage`), BALD/EIG acquisition with the paper's cost model (:mod:`.acquisition`,
:mod:`.costs`), Algorithm 1 on simulated worlds (:mod:`.loop`, :mod:`.world`) (the session's
scheduler behind ``schedule: active`` is :mod:`evalstop_ros.session.active_schedule`).  Needs the ``active`` extra
(``torch==2.13.0`` CPU and the bundled sentence model); nothing here imports ROS.
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
