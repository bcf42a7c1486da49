"""The sessions whose reports the report tests render: real sessions driven through a simulated lab.

Each builder runs an :class:`~evalstop_ros.session.EvaluationSession` with
:func:`~evalstop_ros.audit.synthetic.simulate_recording` (the messages evaluation_manager
publishes), writes them as a bag and audits it, as ``evalstop report`` does:

* ``demo``: ``config/eval.yaml`` with ``evalstop_demo``'s default rates (0.5 vs 0.8);
* ``policy_demo``: ``config/sim_policy.yaml``, where ``good_vla`` completes every rollout (its
  progress is a point mass at 1.0) and ``bad_vla`` rarely does;
* ``ab``: RoboArena's A/B design (seed 001 Alg. 1) over three policies;
* ``adastop``: ``design: adastop`` (seed 002) over three agents;
* ``multitask``: two tasks with per-task claims.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import yaml

from evalstop_ros.audit import AuditReport, audit
from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.session import SessionConfig, parse_config

CONFIG_DIR = pathlib.Path(__file__).resolve().parents[2] / "config"
TWO_TASKS = [{"id": task, "description": f"Do {task}.",
              "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Spot {i}."} for i in range(2)]}
             for task in ("push", "stack")]


def _preset(name: str, **overrides: Any) -> SessionConfig:
    data = yaml.safe_load((CONFIG_DIR / name).read_text(encoding="utf-8"))
    return parse_config({**data, **overrides})


SESSIONS: dict[str, Callable[[], tuple[SessionConfig, SimulatedLab]]] = {
    "demo": lambda: (_preset("eval.yaml"), SimulatedLab({"policy_a": 0.5, "policy_b": 0.8})),
    "policy_demo": lambda: (_preset("sim_policy.yaml"),
                            SimulatedLab({"bad_vla": 0.15, "good_vla": 1.0}, {"bad_vla": 0.3})),
    "ab": lambda: (parse_config({
        "policies": ["a", "b", "c"], "seed": 5, "design": "ab", "blinding": "per-round", "n_max": 30,
        "tasks": [{"id": "cup", "description": "put the cup in the bowl",
                   "initial_conditions": [{"id": "left", "reset_instructions": "cup left"},
                                          {"id": "right", "reset_instructions": "cup right"}]}]}),
        SimulatedLab({"a": 0.85, "b": 0.5, "c": 0.15}, seed=2)),
    "adastop": lambda: (parse_config({
        "policies": ["a1", "a2", "a3"], "design": "adastop", "seed": 4, "tasks": TWO_TASKS[:1],
        "adastop": {"n_per_interim": 3, "n_interims": 4, "n_permutations": 200, "permutation": "relabel"},
        "metrics": [{"name": "progress"}], "n_max": 50}), SimulatedLab({"a1": 0.05, "a2": 0.5, "a3": 0.95})),
    "multitask": lambda: (parse_config({
        "policies": ["policy_a", "policy_b"], "tasks": TWO_TASKS, "claim": "per-task", "n_max": 30, "seed": 4,
        "metrics": [{"name": "success", "method": "step", "alpha": 0.02, "alternative": "greater"},
                    {"name": "progress", "method": "nscore", "alpha": 0.03, "bins": 21, "alternative": "greater"}],
        "alpha": 0.05}),
        SimulatedLab({"policy_a": 0.2, "policy_b": 0.9})),
}


def session_report(name: str, workdir: pathlib.Path) -> AuditReport:
    """Run session ``name`` (:data:`SESSIONS`), record it as a bag under ``workdir`` and audit it."""
    config, lab = SESSIONS[name]()
    path = write_bag(workdir / f"{name}-bag", simulate_recording(config, lab, session_id=name))
    return audit(path)
