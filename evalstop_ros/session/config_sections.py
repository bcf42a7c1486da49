"""The sections of a session configuration: tasks and conditions, metrics, AdaStop, the active
schedule and the runner, each validating its own fields (:class:`~.config.SessionConfig` checks across them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from ..limits import (
    BINS_LIMIT,
    CONDITIONS_LIMIT,
    INTERIM_SIZE_LIMIT,
    INTERIMS_LIMIT,
    PERMUTATIONS_LIMIT,
    TEXT_LIMIT,
    TIMEOUT_LIMIT_S,
)
from ..stats.methods import BINARY_METHODS, FACTS
from ..stats.registry import METHODS

__all__ = [
    "ADASTOP", "DEFAULT_METHOD", "DEFAULT_METRICS", "MAX_POLICIES", "METRIC_METHODS", "ROUND_DESIGNS",
    "ActiveScheduleConfig", "AdaStopConfig", "ConfigModel", "check_unique", "check_unit_interval", "Identifier", "InitialCondition", "MetricConfig", "RunnerConfig", "Task",
]

#: Identifiers (policies, tasks, initial conditions): ROS-name-friendly, no whitespace.
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$", max_length=64)]
#: Designs whose rounds share one condition and pair the trials within the round.
ROUND_DESIGNS = frozenset({"paired", "ab"})
#: Most policies a session can blind (one neutral label each, see :mod:`.plan`).
MAX_POLICIES = 26
#: The method name of every metric under ``design: adastop`` (not a paired test: stats.adastop).
ADASTOP = "adastop"
#: Every method a metric may name: the registered paired tests, and AdaStop.
METRIC_METHODS = (*METHODS, ADASTOP)
DEFAULT_METHOD = {"success": "step", "progress": "nscore"}
DEFAULT_METRICS = ({"name": "success"}, {"name": "progress"})


def check_unit_interval(value: float) -> float:
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(f"must lie in (0, 1); found {value!r}")
    return value


def check_unique(ids: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise ValueError(f"{what} must be unique; found {item!r} twice")
        seen.add(item)


class ConfigModel(BaseModel):
    """A frozen part of a configuration that refuses unknown keys (a misspelt key is an error, never ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class InitialCondition(ConfigModel):
    """One reproducible starting configuration of a task."""

    #: Identifier, unique within its task (journaled with every trial).
    id: Identifier
    #: What the operator does to reset the scene, shown before the trial (never the policy).
    reset_instructions: Annotated[str, StringConstraints(min_length=1, max_length=TEXT_LIMIT, strip_whitespace=True)]


class Task(ConfigModel):
    """A task and the initial conditions it is evaluated from."""

    #: Identifier, unique within the session.
    id: Identifier
    #: Free text for the operator prompt.
    description: str = Field("", max_length=TEXT_LIMIT)
    #: At least one initial condition; the schedule cycles through them (see ``condition_schedule``).
    initial_conditions: tuple[InitialCondition, ...] = Field(min_length=1, max_length=CONDITIONS_LIMIT)

    @field_validator("initial_conditions")
    @classmethod
    def _unique_conditions(cls, value: tuple[InitialCondition, ...]) -> tuple[InitialCondition, ...]:
        check_unique([c.id for c in value], "initial condition ids")
        return value


class MetricConfig(ConfigModel):
    """One scored quantity and the sequential test run on it for every comparison."""

    #: ``"success"`` (binary, the operator's yes/no) or ``"progress"`` (a score in [0, 1]).
    name: Literal["success", "progress"]
    #: Test from :data:`evalstop_ros.stats.registry.METHODS`; default ``step`` for success,
    #: ``nscore`` for progress.  ``step``, ``savi`` and ``lai`` need binary data (success only).
    method: str
    #: Family-wise level of this metric's comparisons; each comparison gets ``alpha / m``
    #: (Bonferroni over the ``m`` comparisons).  Default: the session ``alpha`` left by the
    #: other metrics, split evenly.  The metric levels must sum to at most the session ``alpha``.
    alpha: float | None = None
    #: ``"two-sided"`` (either policy may be better; each direction at ``alpha / 2``),
    #: ``"greater"`` (only "policy_b better" can be claimed) or ``"less"``.
    alternative: Literal["two-sided", "greater", "less"] = "two-sided"
    #: N-SCORE bet bins ``K`` (only for ``nscore``; default 2 for success, 21 for progress).
    bins: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve_defaults(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("name") in DEFAULT_METHOD:
            data = dict(data)
            data.setdefault("method", DEFAULT_METHOD[data["name"]])
            if data["method"] == "nscore":
                binary_bins, continuous_bins = FACTS["nscore"].bins or (2, 21)
                data.setdefault("bins", binary_bins if data["name"] == "success" else continuous_bins)
        return data

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        if value not in METRIC_METHODS:
            raise ValueError(f"should be one of {METRIC_METHODS}; found {value!r}")
        return value

    @field_validator("alpha")
    @classmethod
    def _alpha_range(cls, value: float | None) -> float | None:
        return None if value is None else check_unit_interval(value)

    @model_validator(mode="after")
    def _method_fits_metric(self) -> MetricConfig:
        if self.name == "progress" and self.method in BINARY_METHODS:
            raise ValueError(
                f"metric 'progress' cannot use method {self.method!r}, which needs binary "
                "success data; use 'nscore' or 'wsr'"
            )
        if self.method == "nscore":
            if self.bins is None or isinstance(self.bins, bool) or not 2 <= self.bins <= BINS_LIMIT:
                raise ValueError(f"`bins` must be an integer in [2, {BINS_LIMIT}] for method 'nscore'; "
                                 f"found {self.bins!r}")
        elif self.bins is not None:
            raise ValueError(f"`bins` applies only to method 'nscore'; found bins={self.bins!r} with {self.method!r}")
        return self


class AdaStopConfig(ConfigModel):
    """The interim design of ``design: adastop`` (:class:`~evalstop_ros.stats.adastop.AdaStop`)."""

    #: Trials ``N`` of every agent still in the rotation per interim.
    n_per_interim: int = Field(ge=1, le=INTERIM_SIZE_LIMIT)
    #: Most interims ``K``; the budget is ``N K`` trials per agent (seed 002 §2.5 advises ``N K >= 30``).
    n_interims: int = Field(ge=1, le=INTERIMS_LIMIT)
    #: Permutation paths ``B`` per interim (``10**4`` in seed 002).
    n_permutations: int = Field(default=10_000, ge=1, le=PERMUTATIONS_LIMIT)
    #: ``"closed"`` (default; strong family-wise control under every partial null, unequal spreads
    #: included), ``"relabel"`` (exact under the global null only) or ``"split"`` (seed 002 Eq. 8
    #: literally); see the Notes of :class:`~evalstop_ros.stats.adastop.AdaStop` and docs/adastop.md.
    #: Journals of sessions run before ``"closed"`` became the default resume with
    #: ``permutation: relabel`` written out (the configuration hash holds the scheme).
    permutation: Literal["closed", "relabel", "split"] = "closed"


class ActiveScheduleConfig(ConfigModel):
    """How ``schedule: active`` picks the next round's task (seed 004; :mod:`evalstop_ros.active`).

    Every round runs one task with every policy that still has an open test on it (the paper's
    task-level query, App. F); the task comes from the acquisition over a surrogate fitted to
    the scores so far.  The statistics stay valid because each test sees only its own task's
    pairs and the choice uses past data only (docs/active.md; :meth:`SessionConfig._check_active`).
    """

    #: Task-level strategy (seed 004 App. F): ``random-task`` (default: a uniform open task),
    #: ``cost-task-eig`` (Eq. 2 summed over policies) or ``task-eig`` (Eq. 1 summed).  The default
    #: follows the study of docs/active.md (``bench/active_surrogates.py``): random-task
    #: reached the lowest L1 per cost in every setting, cost-aware task EIG beat it in none.
    strategy: Literal["random-task", "cost-task-eig", "task-eig"] = "random-task"
    #: Surrogate of the EIG strategies: ``shrinkage`` (default; the closed-form hierarchical
    #: Gaussian-process model of :mod:`evalstop_ros.active.shrinkage`, posterior samples for
    #: Eq. 1) or ``mlp`` (seed 004's network, :mod:`evalstop_ros.active.surrogate`, MC dropout).
    #: The study of docs/active.md found the shrinkage surrogate's L1 lower in 7 of 9
    #: cells and never worse beyond 1 SE.  ``random-task`` fits no surrogate.
    surrogate: Literal["shrinkage", "mlp"] = "shrinkage"
    #: How the ``shrinkage`` surrogate draws its posterior samples
    #: (:class:`~evalstop_ros.active.shrinkage.ShrinkageSurrogate`): ``symmetric-root`` (default: the
    #: same draws, hence the same choices, on any LAPACK build) or ``eigenvectors`` (through the
    #: eigenvectors LAPACK returns, which replay their choices only on a machine with the same LAPACK).
    draws: Literal["symmetric-root", "eigenvectors"] = "symmetric-root"
    #: The metric the surrogate models (default: the first metric); ``success`` uses the
    #: Bernoulli head, ``progress`` the binned head.
    metric: Literal["success", "progress"] | None = None
    #: Task embedding (seed 004 App. E): ``verb`` (the paper's), ``language`` or ``random``.
    embedding: Literal["verb", "language", "random"] = "verb"
    #: Cost sensitivity ``lambda`` of Eq. 2 (not given in the paper).
    cost_sensitivity: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    #: Probability of a uniform task instead of the argmax (Alg. 1 line 7).
    epsilon: float = Field(default=0.1, ge=0, le=1)
    #: MC-dropout samples (``mlp``) or posterior samples (``shrinkage``) per choice (App. C).
    mc_samples: int = Field(default=10, ge=1, le=1000)
    #: Full-batch training epochs per choice of the ``mlp`` (re-initialised each time).
    epochs: int = Field(default=100, ge=1, le=10_000)
    #: ``c_switch`` between task groups, and within one (App. D; 1 and 0 for MetaWorld).
    switch_cost: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    within_group_cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    #: Task id -> group (e.g. the object or embodiment); tasks not listed are their own group.
    task_groups: dict[Identifier, Annotated[str, StringConstraints(min_length=1)]] = Field(default_factory=dict)


class RunnerConfig(ConfigModel):
    """The robot-side action server that executes one trial."""

    #: ROS action name of the runner, e.g. ``/droid/run_trial``.
    action_name: Annotated[str, StringConstraints(min_length=1)] = "run_trial"
    #: Seconds the manager waits for one trial's result before counting it as a failed run.
    timeout_s: float = Field(default=300.0, gt=0, le=TIMEOUT_LIMIT_S, allow_inf_nan=False)
    #: Runner faults in a row on one trial before the session pauses (a session rule,
    #: :class:`~.driver.TrialDriver`); the evaluation manager's ``max_attempts`` parameter fills it
    #: in when the file does not set it, so the journaled configuration always holds the limit.
    max_attempts: int = Field(default=3, ge=1, le=1000)
    #: Several runner actions serving one session at once (docs/parallel.md), e.g.
    #: ``[arm_1/run_trial, arm_2/run_trial]``; empty: the one ``action_name``.
    runners: list[Annotated[str, StringConstraints(min_length=1)]] = Field(default_factory=list, max_length=64)
    #: With several runners: the most open trials (issued, not yet scored; the earliest first) before no new
    #: round is issued, so a fast arm cannot run far past a slow one (waste at the stop, not validity:
    #: docs/parallel.md); ``None``: twice the runners.  A round is issued whole, so it may pass the bound by
    #: its size minus one.  Ignored with one runner.
    max_ahead: int | None = Field(default=None, ge=1, le=128)  # the trial_request history holds them (qos.py)

    @field_validator("runners")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"`runners` must name distinct actions; found {value}")
        return value

    @property
    def actions(self) -> tuple[str, ...]:
        """The runner actions of the session: ``runners``, or the one ``action_name``."""
        return tuple(self.runners) or (self.action_name,)

    def one_action(self, override: str = "") -> str:
        """The action of a session with one runner: a one-entry ``runners``, else ``override`` (the manager's
        ``runner_action`` parameter), else ``action_name``; ``ValueError`` when ``runners`` names one action
        and ``override`` another (which one the operator meant is unknown)."""
        if len(self.runners) > 1:
            raise ValueError(f"`runners` names {len(self.runners)} actions, not one")
        if self.runners and override and override != self.runners[0]:
            raise ValueError(f"runner.runners names {self.runners[0]!r} and the runner_action parameter "
                             f"{override!r}: name one runner")
        return (self.runners[0] if self.runners else "") or override or self.action_name

