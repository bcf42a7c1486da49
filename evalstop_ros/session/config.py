"""The session configuration: the pre-registered design of one evaluation (seed 003 §V-A, seed 000 §V).

Loaded from YAML (:func:`load_config`), validated once, stored in the journal as its canonical JSON;
defaults resolved at validation, the designs and an example: docs/session.md and ``config/eval.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..limits import (
    N_MAX_LIMIT,
    SEED_LIMIT,
    STEP_N_MAX_LIMIT,
    TASKS_LIMIT,
)
from ..stats.adastop_closed import MAX_PARTITIONS
from ..stats.families import Comparison, comparison_pairs
from ..stats.levels import split_alpha
from ..stats.methods import FACTS
from ..stats.multitask import TASK_CORRECTIONS, task_alpha
from .config_input import apply_overrides, format_validation_error, read_config_file
from .config_sections import (
    ADASTOP,
    DEFAULT_METRICS,
    MAX_POLICIES,
    ActiveScheduleConfig,
    AdaStopConfig,
    ConfigModel,
    Identifier,
    MetricConfig,
    RunnerConfig,
    Task,
    check_unique,
    check_unit_interval,
)
from .errors import ConfigError

__all__ = ["ConfigError", "SessionConfig", "load_config", "parse_config"]


class SessionConfig(ConfigModel):
    """The pre-registered design of one evaluation session (see the module docstring).

    Examples
    --------
    >>> config = parse_config({
    ...     "policies": ["pi0", "pi1"], "seed": 7,
    ...     "tasks": [{"id": "t", "initial_conditions": [{"id": "c", "reset_instructions": "reset"}]}],
    ... })
    >>> [(m.name, m.method, m.alpha, m.bins) for m in config.metrics]
    [('success', 'step', 0.025, None), ('progress', 'nscore', 0.025, 21)]
    >>> len(config.config_hash)
    64
    """

    #: Policy ids, 2 to 26, unique.  Ids go to the runner only; the operator sees labels.
    policies: tuple[Identifier, ...]
    #: Reference policy of ``comparisons: vs-baseline`` (required there, refused otherwise).
    baseline: Identifier | None = None
    #: ``"all-pairs"``: every pair, the earlier-listed policy as ``policy_a``;
    #: ``"vs-baseline"``: ``(baseline, other)`` for every other policy.
    comparisons: Literal["all-pairs", "vs-baseline"] = "all-pairs"
    #: Multiplicity correction over the comparisons of a metric.  ``"bonferroni"``: every
    #: comparison runs at ``metric alpha / m`` and stops at its own decision.  ``"holm"``:
    #: sequential Holm (:class:`~evalstop_ros.stats.families.FamilyProcess`): each comparison's
    #: directional hypotheses run as one-sided e-processes and the decisions come from Holm's
    #: step-down over their running-minimum p-values, once every open comparison has its next
    #: pair.  It needs anytime-valid p-values, so it is refused with ``step`` and ``lai``, and it
    #: applies to ``claim: pooled`` only.
    correction: Literal["bonferroni", "holm"] = "bonferroni"
    #: What a comparison may conclude across the tasks (seed 003 Eq. 11, :mod:`evalstop_ros.stats.multitask`).
    #: ``"pooled"`` (default): one test over the trials of every task.  ``"every"``: B better on
    #: every task (intersection-union); ``"any"``: B better on at least one task; ``"per-task"``:
    #: one claim per task.  The last three run one test per task and need a one-sided metric
    #: ``alternative`` (``"greater"``: ``policy_b`` better).
    claim: Literal["pooled", "every", "any", "per-task"] = "pooled"
    #: How a non-pooled claim shares the comparison's level among the tasks: ``"iut"`` (every
    #: task at the comparison's level; ``every`` only), ``"bonferroni"`` (``level / T``) or
    #: ``"holm"`` (``level / T`` live, Holm's step-down over the tasks' final anytime-valid
    #: p-values in the claim; ``any``/``per-task`` only).  Default: ``iut`` for ``every``,
    #: ``bonferroni`` otherwise; refused with ``claim: pooled``.
    task_correction: Literal["iut", "bonferroni", "holm"] | None = None
    #: Tasks with their initial conditions (at least one task).
    tasks: tuple[Task, ...] = Field(min_length=1, max_length=TASKS_LIMIT)
    #: ``"paired"``: each round runs every active policy once, in random order, from the same
    #: task and initial condition; a round's scores pair up within the round.
    #: ``"independent"``: a balanced random schedule (each round a random permutation of the
    #: active policies), a fresh condition per trial, pairs formed by per-policy trial index.
    #: ``"adastop"``: interims of ``adastop.n_per_interim`` trials of every agent still in the
    #: rotation, in random order, analysed by AdaStop (seed 002) at the end of each interim.
    #: ``"ab"``: one randomly drawn undecided pair per round, in random order, from one shared
    #: condition (RoboArena's A/B sessions, seed 001 Alg. 1).
    design: Literal["paired", "independent", "adastop", "ab"] = "paired"
    #: ``design: ab``: how a round draws its pair among the undecided ones: ``"uniform"`` (seed
    #: 001 Alg. 1, "C samples two policies"), ``"fewest"`` (uniform among the pairs run in the
    #: fewest rounds so far: by need, so the pairs stay balanced) or ``"ucb"`` (the released
    #: RoboArena server's weighting: the first policy with weight ``(U / (n + 1)) ** 0.8`` while
    #: it has been in ``n < U`` rounds, else 1, ``U = ab_ucb_threshold``; its partner uniformly
    #: among the policies it has an undecided pair with).  Every draw is seeded.
    ab_pairing: Literal["uniform", "fewest", "ucb"] = "uniform"
    #: ``ab_pairing: ucb``: ``U``, the round count from which a policy is no longer favoured.
    ab_ucb_threshold: int = Field(500, ge=1, le=1_000_000)
    #: The interim design of ``design: adastop`` (required there, refused otherwise).
    adastop: AdaStopConfig | None = None
    #: How conditions are drawn: ``"shuffled-cycle"`` (each task's conditions in a fresh random
    #: order per cycle, exactly balanced; tasks likewise) or ``"iid"`` (independent uniform
    #: draws; exactly the i.i.d. sampling the anytime guarantees assume for a null that holds
    #: only on average over conditions, see seed 000 App. C).
    condition_schedule: Literal["shuffled-cycle", "iid"] = "shuffled-cycle"
    #: Blinded labels: ``"per-session"`` (each policy keeps one random label, ``X``, ``Y``...)
    #: or ``"per-round"`` (labels re-drawn every round, so the operator cannot build up a
    #: belief about a label over the session; stronger blinding).
    blinding: Literal["per-session", "per-round"] = "per-session"
    #: Metrics and their tests (default: success -> STEP, progress -> N-SCORE).
    metrics: tuple[MetricConfig, ...] = Field(min_length=1)
    #: Family-wise error level of the whole session, shared among the metrics.
    alpha: float = 0.05
    #: Most pairs one comparison (per task, with a non-pooled claim) may consume (STEP/Lai's
    #: horizon; the analysis budget of the anytime-valid tests).  Reaching it undecided is
    #: ``BUDGET_EXHAUSTED``.  Unused by ``design: adastop``, whose budget is ``N K`` per agent.
    n_max: int = Field(default=100, ge=1, le=N_MAX_LIMIT)
    #: Seed of every random choice (trial order, conditions, labels, STEP draws); fix it, and
    #: use a fresh one per session, before the data (seed 003 §IV-B: the randomization is part of the test).
    seed: int = Field(ge=0, le=SEED_LIMIT)
    #: The runner action.
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    #: ``"operator"``: a person scores each trial; ``"auto"``: the runner's result carries the
    #: score (simulation).  The session accepts scores the same way in both cases.
    scoring: Literal["operator", "auto"] = "operator"
    #: The operator confirms that the scene is reset before each run of a trial (``SessionControl``
    #: ``COMMAND_CONFIRM_RESET``, journaled as ``reset_confirmed``): the pending trial waits for
    #: the reset, then for its run, then for its score; the runner gets the trial only after the
    #: confirmation.  ``false``: the runner gets it at once (simulated robots).
    confirm_reset: bool = False
    #: A policy leaves the rotation once every one of its comparisons is decided.
    drop_decided: bool = True
    #: ``"rounds"``: the randomized rounds above.  ``"active"``: each round's task is chosen
    #: by active, cost-aware experiment selection (seed 004) from the scores so far; needs
    #: ``design: paired`` and a per-task ``claim`` (see :meth:`_check_active`).
    schedule: Literal["rounds", "active"] = "rounds"
    #: Settings of ``schedule: active`` (defaults when omitted there; refused otherwise).
    active: ActiveScheduleConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve_metric_alphas(cls, data: Any) -> Any:
        # Fill missing metric levels with an even split of what the others leave; anything
        # malformed is left alone for the field validators to report.
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if data.get("schedule") == "active" and data.get("active") is None:
            data["active"] = {}  # resolved, so the hash holds the defaults (module docstring)
        claim = data.get("claim", "pooled")
        if data.get("task_correction") is None and isinstance(claim, str) and claim in TASK_CORRECTIONS:
            data["task_correction"] = TASK_CORRECTIONS[claim][0]
        adastop = data.get("design") == "adastop"
        metrics = data.setdefault("metrics", [{"name": "progress"}] if adastop else [dict(m) for m in DEFAULT_METRICS])
        if not isinstance(metrics, Sequence) or not all(isinstance(m, Mapping) for m in metrics):
            return data
        metrics = [dict(m) for m in metrics]
        if adastop:
            for metric in metrics:
                metric.setdefault("method", ADASTOP)
        data["metrics"] = metrics
        try:
            total = float(data.get("alpha", 0.05))
            given = sum(float(m["alpha"]) for m in metrics if m.get("alpha") is not None)
        except (TypeError, ValueError):
            return data
        missing = [m for m in metrics if m.get("alpha") is None]
        left = total - given
        if missing and left > 0:
            for metric in missing:
                metric["alpha"] = left / len(missing)
        return data

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not 2 <= len(value) <= MAX_POLICIES:
            raise ValueError(f"must name 2 to {MAX_POLICIES} policies; found {len(value)}")
        check_unique(value, "policy ids")
        return value

    @field_validator("tasks")
    @classmethod
    def _unique_tasks(cls, value: tuple[Task, ...]) -> tuple[Task, ...]:
        check_unique([t.id for t in value], "task ids")
        return value

    @field_validator("metrics")
    @classmethod
    def _unique_metrics(cls, value: tuple[MetricConfig, ...]) -> tuple[MetricConfig, ...]:
        check_unique([m.name for m in value], "metric names")
        return value

    @field_validator("alpha")
    @classmethod
    def _alpha_range(cls, value: float) -> float:
        return check_unit_interval(value)

    @model_validator(mode="after")
    def _consistent(self) -> SessionConfig:
        if self.comparisons == "vs-baseline":
            if self.baseline is None:
                raise ValueError("`baseline` is required with comparisons 'vs-baseline'")
            if self.baseline not in self.policies:
                raise ValueError(f"`baseline` must be one of `policies` {list(self.policies)}; found {self.baseline!r}")
        elif self.baseline is not None:
            raise ValueError(f"`baseline` applies only to comparisons 'vs-baseline'; found {self.baseline!r}")
        unset = [m.name for m in self.metrics if m.alpha is None]
        if unset:
            raise ValueError(f"no alpha left for metric(s) {unset} after the explicit metric alphas; set each one")
        used = sum(m.alpha or 0.0 for m in self.metrics)
        if used > self.alpha * (1 + 1e-9):
            shares = ", ".join(f"{m.name}={m.alpha:g}" for m in self.metrics)
            raise ValueError(f"metric alphas ({shares}) sum to {used:g}, more than `alpha` {self.alpha:g}")
        step = [m.name for m in self.metrics if m.method == "step"]
        if step and self.n_max > STEP_N_MAX_LIMIT:
            raise ValueError(f"`n_max` {self.n_max} is too large for STEP (metric(s) {step}): its table needs "
                             f"O(n_max^2) memory; use at most {STEP_N_MAX_LIMIT}, or an anytime-valid method "
                             "(nscore, wsr, savi)")
        self._check_adastop()
        if self.correction == "holm":
            for metric in self.metrics:
                if not FACTS[metric.method].pvalue:
                    raise ValueError(
                        f"correction 'holm' needs anytime-valid p-values; metric {metric.name!r} uses method "
                        f"{metric.method!r}, which defines none (use correction 'bonferroni')"
                    )
        self._check_claim()
        if self.design != "ab" and self.ab_pairing != "uniform":
            raise ValueError(f"`ab_pairing` applies only to design 'ab'; found design {self.design!r}")
        if self.ab_pairing != "ucb" and self.ab_ucb_threshold != 500:
            raise ValueError(f"`ab_ucb_threshold` applies only to `ab_pairing: ucb`; found {self.ab_pairing!r}")
        if self.design == "ab" and self.claim != "pooled":
            raise ValueError(f"design 'ab' pools the tasks (the evaluator picks them); `claim` must be 'pooled'; "
                             f"found {self.claim!r}")
        self._check_active()
        if len(self.runner.actions) > 1 and (self.schedule == "active" or self.design == "adastop"):
            raise ValueError(f"{len(self.runner.actions)} `runner.runners` need a plan fixed before the outcomes it "
                             "waits for; schedule 'active' and design 'adastop' choose the next trials from the "
                             "scores (docs/parallel.md): name one runner")
        return self

    def _check_active(self) -> None:
        """Refuse ``schedule: active`` where adaptive task choice would void the guarantee.

        With a per-task ``claim`` every test is fed the pairs of one task only, and a round's
        policies share its condition; the scheduler decides only *when* a task's stream gets
        its next pair, from data already seen (a predictable choice).  The ``k``-th pair of a
        task is then still an independent draw from that task, whatever came before (optional
        skipping), so STEP within ``n_max`` and the anytime-valid e-processes keep their level.
        A pooled test would mix tasks in proportions the scheduler picks from the data, so its
        null ("B no better on average over the tasks") is no longer what the pairs estimate;
        AdaStop's permutations and the independent design's cross-task pairs likewise
        assume a design fixed in advance.  docs/active.md gives the argument and the Monte Carlo.
        """
        if self.schedule != "active":
            if self.active is not None:
                raise ValueError("`active` applies only to schedule 'active'")
            return
        if self.design != "paired":
            raise ValueError(f"schedule 'active' needs design 'paired' (a round runs every policy on the chosen "
                             f"task and condition); found design {self.design!r}")
        if self.claim == "pooled":
            raise ValueError("schedule 'active' chooses tasks from the data, so a test pooled over tasks would "
                             "test a task mix the scheduler picked; use claim 'per-task', 'any' or 'every' "
                             "(each test sees one task's pairs)")
        if len(self.tasks) < 2:
            raise ValueError("schedule 'active' chooses among tasks; found a single task")
        settings = self.active_settings()
        if settings.metric is not None and settings.metric not in [m.name for m in self.metrics]:
            raise ValueError(f"`active.metric` {settings.metric!r} is not one of the session's metrics "
                             f"{[m.name for m in self.metrics]}")
        unknown = sorted(set(settings.task_groups) - {t.id for t in self.tasks})
        if unknown:
            raise ValueError(f"`active.task_groups` names unknown task(s) {unknown}")

    def active_settings(self) -> ActiveScheduleConfig:
        """The ``active`` settings, defaults where omitted."""
        return self.active if self.active is not None else ActiveScheduleConfig()

    def _check_adastop(self) -> None:
        adastop = self.design == "adastop"
        if not adastop:
            if self.adastop is not None:
                raise ValueError("`adastop` applies only to design 'adastop'")
            for metric in self.metrics:
                if metric.method == ADASTOP:
                    raise ValueError(f"method 'adastop' of metric {metric.name!r} needs design 'adastop'; "
                                     f"found design {self.design!r}")
            return
        if self.adastop is None:
            raise ValueError("`adastop` (n_per_interim, n_interims) is required with design 'adastop'")
        budget = self.adastop.n_per_interim * self.adastop.n_interims
        if budget > N_MAX_LIMIT:
            raise ValueError(f"`adastop`: n_per_interim x n_interims = {budget} trials per agent; at most {N_MAX_LIMIT}")
        if len(self.metrics) != 1:
            raise ValueError(f"design 'adastop' compares one metric; found {len(self.metrics)} metrics")
        (metric,) = self.metrics
        if metric.method != ADASTOP:
            raise ValueError(f"design 'adastop' runs method 'adastop'; metric {metric.name!r} names "
                             f"method {metric.method!r}")
        if metric.alternative != "two-sided":
            raise ValueError(f"design 'adastop' is two-sided; metric {metric.name!r} has alternative "
                             f"{metric.alternative!r}")
        if self.correction != "bonferroni":
            raise ValueError("design 'adastop' shares alpha by its own step-down permutation boundaries; "
                             f"`correction` must stay 'bonferroni'; found {self.correction!r}")
        if self.claim != "pooled":
            raise ValueError(f"design 'adastop' pools the tasks; `claim` must be 'pooled'; found {self.claim!r}")
        if not self.drop_decided:
            raise ValueError("design 'adastop' drops decided agents itself (seed 002 §3.7); "
                             "`drop_decided` must be true")
        agents = len(self.policies)
        partitions = 2 ** (agents - 1) - 1 if self.comparisons == "vs-baseline" else _bell(agents) - 1
        if self.adastop.permutation == "closed" and partitions > MAX_PARTITIONS:
            raise ValueError(f"adastop.permutation 'closed' tests every partition of the agents ({partitions} for "
                             f"{agents} policies, at most {MAX_PARTITIONS}); use comparisons 'vs-baseline', fewer "
                             "policies, or permutation 'relabel' (not strongly controlled, docs/adastop.md)")

    def _check_claim(self) -> None:
        if self.claim == "pooled":
            if self.task_correction is not None:
                raise ValueError(f"`task_correction` applies only to a non-pooled claim; found "
                                 f"{self.task_correction!r} with claim 'pooled'")
            return
        allowed = TASK_CORRECTIONS[self.claim]
        if self.task_correction not in allowed:
            raise ValueError(f"`task_correction` for claim {self.claim!r} should be one of {allowed}; "
                             f"found {self.task_correction!r}")
        if self.correction != "bonferroni":
            raise ValueError(f"claim {self.claim!r} runs one test per task with Bonferroni over the comparisons; "
                             f"`correction` must be 'bonferroni' (use `task_correction` for the tasks); "
                             f"found {self.correction!r}")
        for metric in self.metrics:
            if metric.alternative == "two-sided":
                raise ValueError(f"claim {self.claim!r} is directional: metric {metric.name!r} needs alternative "
                                 "'greater' (policy_b better) or 'less'; found 'two-sided'")
            if self.task_correction == "holm" and not FACTS[metric.method].pvalue:
                raise ValueError(f"task_correction 'holm' needs anytime-valid p-values; metric {metric.name!r} uses "
                                 f"method {metric.method!r}, which defines none (use 'bonferroni')")

    # -- derived ---------------------------------------------------------------------------
    def comparison_list(self) -> tuple[Comparison, ...]:
        """The comparisons of the family, in their fixed order (:func:`~evalstop_ros.stats.families.comparison_pairs`)."""
        return comparison_pairs(self.policies, design=self.comparisons, baseline=self.baseline)

    def comparison_alpha(self, metric: MetricConfig) -> float:
        """Level of each of ``metric``'s comparisons: its alpha over the number of comparisons.

        Under ``design: adastop`` the metric's whole alpha: AdaStop controls the family-wise
        error of all its comparisons with its own boundaries (seed 002 Theorem 1).  Under
        ``correction: holm`` it is Holm's first threshold (per direction: half of it, two-sided).
        """
        assert metric.alpha is not None  # resolved by validation
        if self.design == "adastop":
            return metric.alpha
        return split_alpha(metric.alpha, len(self.comparison_list()))

    def test_alpha(self, metric: MetricConfig) -> float:
        """Level of each of ``metric``'s tests: :meth:`comparison_alpha`, shared among the tasks
        by :func:`~evalstop_ros.stats.multitask.task_alpha` with a non-pooled ``claim``."""
        level = self.comparison_alpha(metric)
        if self.claim == "pooled":
            return level
        return task_alpha(level, len(self.tasks), claim=self.claim, correction=self.task_correction)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, defaults resolved."""
        return self.model_dump(mode="json")

    def canonical_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): what the journal stores and hashes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def config_hash(self) -> str:
        """SHA-256 (hex) of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def _bell(n: int) -> int:
    """Number of partitions of ``n`` items (Bell triangle)."""
    row = [1]
    for _ in range(n - 1):
        nxt = [row[-1]]
        for value in row:
            nxt.append(nxt[-1] + value)
        row = nxt
    return row[-1]


def parse_config(data: object, source: str = "<config>") -> SessionConfig:
    """Validate an already-parsed mapping into a :class:`SessionConfig`.

    Parameters
    ----------
    data:
        The mapping (e.g. from YAML or from the journal's canonical JSON).
    source:
        Where it came from, for the error message.

    Raises
    ------
    ConfigError
        With every problem found, each naming its location and the bad value.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(source, f"the configuration must be a mapping; found {type(data).__name__}")
    try:
        return SessionConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(source, format_validation_error(err, SessionConfig)) from err




def load_config(path: str | pathlib.Path, *, alpha: float | None = None, n_max: int | None = None,
                method: str | None = None, confirm_reset: bool | None = None,
                max_attempts: int | None = None, runners: Sequence[str] | None = None) -> SessionConfig:
    """Load and validate a session configuration from a YAML file, with optional overrides.

    ``alpha``, ``n_max``, ``method``, ``confirm_reset`` and ``runners`` override the file, ``max_attempts``
    fills in ``runner.max_attempts`` where it has none (:func:`~.config_input.apply_overrides`);
    the evaluation manager passes its parameters of the same names.

    Raises
    ------
    ConfigError
        If the file cannot be read, is not YAML, or does not validate.
    """
    data = apply_overrides(read_config_file(path), alpha=alpha, n_max=n_max, method=method,
                           confirm_reset=confirm_reset, max_attempts=max_attempts, runners=runners)
    return parse_config(data, str(path))


