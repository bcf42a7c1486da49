"""The ``simulation`` section of an ``evalstop sim-eval`` configuration: tasks, served policies, horizon.

A sim-eval configuration is an ordinary session configuration (:mod:`evalstop_ros.session.config`,
journaled as for a robot session) with one more top-level key, ``simulation``, which says how each
session task runs in robosuite and where each policy is served::

    simulation:
      rate: 15.0                       # control rate (Hz) = simulated seconds per action
      tasks:                           # one entry per session task id
        lift_easy: {env: Lift, spread: 0.02, max_steps: 90}
      policies:                        # one entry per session policy id
        grasp_vla: {serve: grasp}      # a scripted physics policy served by sim-eval itself
        remote_vla: {host: gpu.lab, port: 8000, api_key_env: REMOTE_KEY}

The section is not part of the journaled configuration: it decides how rollouts are produced,
not how they are analysed.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError, model_validator

from ..runner.client import ServerAddress
from ..runner.scripted_physics import KINDS
from ..session.config import SessionConfig, parse_config
from ..session.config_input import format_validation_error, read_config_file
from ..session.config_sections import ConfigModel
from ..session.errors import ConfigError

__all__ = ["PolicySource", "SimTask", "SimulationConfig", "load_sim_eval"]


class SimTask(ConfigModel):
    """How one session task runs: the robosuite environment, the object's placement, the horizon."""

    #: robosuite environment (``Lift``, ``Stack``, ...), any single-arm task of robosuite 1.5.
    env: str = "Lift"
    #: Half-width (m) of the square the object is placed in (0: the task's own range).
    spread: float = Field(0.1, ge=0.0, le=0.3)
    #: Actions per rollout (the horizon, ``max_steps / rate`` simulated seconds).
    max_steps: int = Field(90, ge=1, le=10_000)
    #: Seed of the scenes (with session, trial, task and initial condition).
    seed: int = Field(0, ge=0, le=2**31 - 1)


class PolicySource(ConfigModel):
    """Where a policy is served: ``serve`` (a scripted physics kind sim-eval serves itself) or ``host``/``port``."""

    serve: str | None = None
    host: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    api_key_env: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PolicySource:
        if (self.serve is None) == (self.host is None):
            raise ValueError("give either `serve` (a scripted kind) or `host` and `port`")
        if self.serve is not None and self.serve not in KINDS:
            raise ValueError(f"`serve` must be one of {list(KINDS)}; found {self.serve!r}")
        if self.host is not None and self.port is None:
            raise ValueError("`port` is required with `host`")
        return self

    def address(self) -> ServerAddress:
        """The server's address (``host`` sources only); the API key read from ``api_key_env``."""
        assert self.host is not None and self.port is not None
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if self.api_key_env and not key:
            raise ValueError(f"environment variable {self.api_key_env} is not set")
        return ServerAddress(self.host, self.port, key)


class SimulationConfig(ConfigModel):
    """The ``simulation`` section (module docstring)."""

    rate: float = Field(15.0, gt=0.0, le=1000.0)
    tasks: dict[str, SimTask]
    policies: dict[str, PolicySource]
    #: Seconds one policy query may take before the rollout fails ("too slow").
    infer_timeout: float = Field(60.0, gt=0.0, le=3600.0)


def worker_names(workers: int) -> list[str]:
    """The runner names of ``workers`` Ray workers, as the session journals them.

    >>> worker_names(2)
    ['ray_worker_1', 'ray_worker_2']
    """
    return [f"ray_worker_{i}" for i in range(1, workers + 1)]


def load_sim_eval(path: str | pathlib.Path, *, workers: int | None = None) -> tuple[SessionConfig, SimulationConfig]:
    """The session configuration and the ``simulation`` section of ``path``.

    ``workers``: the Ray workers of the run; the session's ``runner.runners`` (one runner per worker,
    journaled) are filled in with :func:`worker_names` where the file names none, and must number
    ``workers`` where it does.

    Raises
    ------
    ConfigError
        If the file cannot be read, either part does not validate, or a session task or policy
        has no ``simulation`` entry (or an entry names one the session does not have).
    """
    data = read_config_file(path)
    if not isinstance(data, Mapping) or "simulation" not in data:
        raise ConfigError(str(path), "a sim-eval configuration needs a `simulation` section (tasks, policies)")
    rest: dict[str, Any] = {k: v for k, v in data.items() if k != "simulation"}
    if workers is not None:
        given = rest.get("runner") or {}
        runner = dict(given) if isinstance(given, Mapping) else {}
        named = runner.get("runners")
        if named and (not isinstance(named, list) or len(named) != workers):
            raise ConfigError(str(path), f"runner.runners names {named!r}; sim-eval runs {workers} workers "
                              "(one runner each): name as many, or none")
        if not named:
            runner["runners"] = worker_names(workers)
        rest["runner"] = runner
    session = parse_config(rest, str(path))
    try:
        simulation = SimulationConfig.model_validate(data["simulation"])
    except ValidationError as err:
        detail = format_validation_error(err, SimulationConfig)
        parts = (f"simulation{part.removeprefix('config')}" if part.startswith("config:") else f"simulation.{part}"
                 for part in detail.split("; "))
        raise ConfigError(str(path), "; ".join(parts)) from err
    for what, wanted, given in (("tasks", [t.id for t in session.tasks], simulation.tasks),
                                ("policies", list(session.policies), simulation.policies)):
        missing = [name for name in wanted if name not in given]
        extra = sorted(set(given) - set(wanted))
        if missing:
            raise ConfigError(str(path), f"simulation.{what}: no entry for {missing}")
        if extra:
            raise ConfigError(str(path), f"simulation.{what}: {extra} not in the session's {what}")
    return session, simulation
