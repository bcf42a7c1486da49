#!/usr/bin/env python3
"""STEP's multi-task simulation, in shape: sim-eval against the fixed-N batch, with 1, 2 and 4 Ray workers.

Seed 003 §V-C3 (Table I rows 7-9) compares two policies on three simulated tasks, one easy (a gap
of 30 points) and two close (16 and 3 points), with one sequential test per task (Bonferroni over
the tasks) against the fixed batch of N_max rollouts per task and policy. This bench runs that
shape with ``evalstop sim-eval``'s engine (``--config``, default
``examples/sim_eval_step_shape.yaml``: two served scripted physics policies, ``steady`` and
``shaky``, on three robosuite Lift tasks whose horizons set their difficulty), each session until
every task is decided, once per worker count (``--workers``). Per run it prints the machine's
load, the rollouts per task and those saved against the fixed-N batch, the decisions, the wall time
to the decision (Ray's start-up measured apart) and where the rollouts' time went (CPU in the
worker, policy queries, environment builds, the rest: waiting for a core); then, on paper, a
cluster of W free cores.

``--calibrate N`` measures instead the success rate of each policy on each task (N rollouts each,
on the pool, with their SE): the competence the sessions are deciding about.

The config's tests are the paper's: STEP per task at alpha / 3 (Bonferroni), the claim "better on
every task". Sizes by default (minutes on two cores): alpha 0.1, n_max 12 pairs per task (the
fixed-N batch: 3 x 12 x 2 = 72 rollouts); the close tasks mostly end at n_max undecided at these
sizes. ``--preset-sizes``: the config's own, the paper's (alpha 0.03, n_max 500: a batch of 3,000
rollouts, hours on two cores). ::

    nice -n 10 python bench/sim_eval_scale.py --workers 1,2,4 [--preset-sizes] [--json]
    nice -n 10 python bench/sim_eval_scale.py --calibrate 30 --workers 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pathlib
import sys
import tempfile
import time
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _sized_config(args: argparse.Namespace) -> str:
    """A copy of ``--config`` with the bench's sizes (unless ``--preset-sizes``); its path."""
    import yaml

    data = yaml.safe_load(pathlib.Path(args.config).read_text(encoding="utf-8"))
    if not args.preset_sizes:
        data.update(alpha=args.alpha, n_max=args.n_max)
    sized = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8")
    with sized:
        yaml.safe_dump(data, sized)
    return sized.name


def calibrate(path: str, workers: int, rollouts: int, session_id: str) -> list[dict[str, Any]]:
    """Success rate of every policy on every task: ``rollouts`` rollouts each on ``workers`` workers
    (their scenes and draws seeded by ``session_id``: another id, other rollouts)."""
    from evalstop_ros.parallel.ray_pool import RayPool
    from evalstop_ros.parallel.rollout import RolloutRequest
    from evalstop_ros.parallel.sim_config import load_sim_eval
    from evalstop_ros.parallel.sim_eval import served_policies

    config, simulation = load_sim_eval(path)
    prompts = {task.id: task.description or task.id for task in config.tasks}
    queue = [(policy, task.id, i) for i in range(rollouts) for task in config.tasks for policy in config.policies]
    runs: dict[tuple[str, str], list[Any]] = {}
    with served_policies(simulation) as addresses, RayPool(workers) as pool:
        pool.worker_pids()
        key = 0
        while queue or pool.in_flight():
            while queue and pool.idle:
                policy, task_id, i = queue.pop(0)
                task = simulation.tasks[task_id]
                request = RolloutRequest(session_id, key, 1, task_id, f"scene_{i % 2}", prompts[task_id],
                                         addresses[policy], task.env, task.spread, task.seed, task.max_steps,
                                         simulation.rate, simulation.infer_timeout)
                pool.submit((policy, task_id, key), request)
                key += 1
            for (policy, task_id, _), outcome in pool.wait(timeout=5.0):
                runs.setdefault((policy, task_id), []).append(outcome)
                done = sum(len(v) for v in runs.values())
                print(f"[calibration] {done} of {rollouts * len(config.policies) * len(config.tasks)}: {policy} on "
                      f"{task_id} success={int(outcome.success)} ok={int(outcome.ok)} steps={outcome.steps} in "
                      f"{outcome.duration_s:.1f} s (load {_load()})", file=sys.stderr, flush=True)
    rows = []
    for task in config.tasks:
        row: dict[str, Any] = {"task": task.id, "horizon_s": simulation.tasks[task.id].max_steps / simulation.rate}
        for policy in config.policies:
            outcomes = runs[(policy, task.id)]
            ok = [o for o in outcomes if o.ok]
            rate = sum(o.success for o in ok) / max(len(ok), 1)
            row[policy] = {"successes": sum(o.success for o in ok), "rollouts": len(ok), "faults": len(outcomes) - len(ok),
                           "rate": round(rate, 3), "se": round(math.sqrt(rate * (1 - rate) / max(len(ok), 1)), 3),
                           "mean_steps": round(sum(o.steps for o in ok) / max(len(ok), 1), 1)}
        a, b = (row[p] for p in config.policies)
        row["gap"], row["gap_se"] = round(b["rate"] - a["rate"], 3), round(math.hypot(a["se"], b["se"]), 3)
        rows.append(row)
    return rows


def run(path: str, workers: int, session_id: str) -> dict[str, Any]:
    """One sim-eval session of ``path`` on ``workers`` local Ray workers, timed (module docstring)."""
    from evalstop_ros.parallel.ray_pool import RayPool
    from evalstop_ros.parallel.sim_config import load_sim_eval
    from evalstop_ros.parallel.sim_eval import run_sim_eval, served_policies
    from evalstop_ros.runner.errors import ErrorLog

    config, simulation = load_sim_eval(path, workers=workers)
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="sim-eval-bench-") as tmp, served_policies(simulation) as addresses:
        started = time.perf_counter()
        with RayPool(workers) as pool:
            pool.worker_pids()  # every worker up: Ray's start-up measured apart
            ray_s = time.perf_counter() - started
            result = run_sim_eval(config, simulation, pool, journal_path=pathlib.Path(tmp) / "bench.db",
                                  session_id=session_id, addresses=addresses,
                                  error_log=ErrorLog(pathlib.Path(tmp) / "errors"),
                                  progress=lambda line: print(line, file=sys.stderr, flush=True))
    per_task_fixed = result.fixed_n // len(config.tasks)
    n = max(result.rollouts, 1)
    return {"workers": workers, "load": f"{load_before} -> {_load()}", "ray_start_s": round(ray_s, 1),
            "wall_s": round(result.wall_s, 1), "rollouts": result.rollouts, "per_task": result.per_task,
            "saved": {t.id: per_task_fixed - result.per_task.get(t.id, 0) for t in config.tasks},
            "fixed_n": result.fixed_n, "state": result.state.value,
            "decisions": {c.task: c.decision.name for c in result.comparisons},
            "claims": [c.established for c in result.claims], "after_stop": result.after_stop,
            "cancelled": result.cancelled, "rollout_s": round(result.rollout_s, 1),
            "mean_rollout_s": round(result.rollout_s / n, 2), "cpu_per_rollout_s": round(result.cpu_s / n, 2),
            "policy_per_rollout_s": round(result.policy_s / n, 2), "setup_s": round(result.setup_s, 1),
            "in_flight": round(result.rollout_s / result.wall_s, 2) if result.wall_s else 0.0}


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the runs (docs/sim_eval.md shows one)."""
    base = rows[0]["wall_s"]
    lines = ["| workers | load before -> after | rollouts (per task) | saved vs fixed-N (per task) | decisions |"
             " wall to the decision | speed-up | Ray start | mean rollout: wall / CPU / policy | env builds |"
             " in flight | cancelled at the stop |", "|" + "---|" * 12]
    for r in rows:
        per_task = " / ".join(str(r["per_task"].get(t, 0)) for t in r["saved"])
        saved = " / ".join(str(s) for s in r["saved"].values())
        decisions = ", ".join(d for d in r["decisions"].values()) + (", claim established" if all(r["claims"])
                                                                     else ", claim not established")
        lines.append(f"| {r['workers']} | {r['load']} | {r['rollouts']} ({per_task}) | {sum(r['saved'].values())} "
                     f"({saved}) of {r['fixed_n']} | {decisions} | {r['wall_s']} s | x{base / r['wall_s']:.2f} | "
                     f"{r['ray_start_s']} s | {r['mean_rollout_s']} / {r['cpu_per_rollout_s']} / "
                     f"{r['policy_per_rollout_s']} s | {r['setup_s']} s | {r['in_flight']} | {r['cancelled']} |")
    return "\n".join(lines)


def on_paper(rows: list[dict[str, Any]]) -> list[str]:
    """A cluster of W workers with a free core each: a rollout takes its CPU and policy time, nothing waits."""
    first = rows[0]
    free = first["cpu_per_rollout_s"] + first["policy_per_rollout_s"]
    out = [f"on paper, one free core per worker (a rollout {free:.2f} s: its CPU and policy time in the "
           f"{first['workers']}-worker run; Ray start and environment builds apart):"]
    for workers in (1, 2, 4, 16, 64):
        rounds = first["rollouts"] / workers
        out.append(f"  {workers:>2} workers: sim-eval about {rounds * free:.0f} s ({first['rollouts']} rollouts; "
                   f"plus up to {workers - 1} rounds run ahead), the fixed-N batch about "
                   f"{first['fixed_n'] / workers * free:.0f} s ({first['fixed_n']} rollouts)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts (default %(default)s)")
    parser.add_argument("--config", default=str(REPO / "examples" / "sim_eval_step_shape.yaml"))
    parser.add_argument("--alpha", type=float, default=0.1, help="the session's alpha (default %(default)s)")
    parser.add_argument("--n-max", type=int, default=12, help="n_max per task (default %(default)s)")
    parser.add_argument("--preset-sizes", action="store_true", help="the config's alpha and n_max (the paper's)")
    parser.add_argument("--calibrate", type=int, default=0, metavar="N",
                        help="measure each policy's success rate per task in N rollouts instead (on the "
                             "largest --workers)")
    parser.add_argument("--calibration-id", default="calibration",
                        help="session id of the calibration's rollouts (default %(default)s; another id draws "
                             "other scenes and errors, to add to a calibration)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("robosuite") is None or importlib.util.find_spec("ray") is None:
        print("sim_eval_scale: robosuite or ray is not installed (tools/install_physics.sh, evalstop[ray]); skipped")
        return 0
    sys.path.insert(0, str(REPO))
    workers = [int(w) for w in args.workers.split(",")]
    path = _sized_config(args)
    try:
        print(f"machine: {os.cpu_count()} cores, load {_load()} (1/5/15 min)", file=sys.stderr)
        if args.calibrate:
            rows = calibrate(path, max(workers), args.calibrate, args.calibration_id)
            if args.json:
                print(json.dumps(rows, indent=1, sort_keys=True))
                return 0
            print("| task | horizon | " + " | ".join(k for k in rows[0] if isinstance(rows[0][k], dict)) + " | gap (SE) |")
            for row in rows:
                cells = [f"{c['successes']}/{c['rollouts']} = {c['rate']:.2f} ({c['se']:.2f}), {c['mean_steps']} steps"
                         for c in row.values() if isinstance(c, dict)]
                print(f"| {row['task']} | {row['horizon_s']:.1f} s | " + " | ".join(cells)
                      + f" | {row['gap']:+.2f} ({row['gap_se']:.2f}) |")
            return 0
        from evalstop_ros.parallel.sim_config import load_sim_eval

        config, _ = load_sim_eval(path)
        print(f"sizes: alpha {config.alpha} ({config.task_correction} over {len(config.tasks)} tasks), n_max "
              f"{config.n_max} pairs per task", file=sys.stderr)
        rows = [run(path, w, f"bench-{w}") for w in workers]
    finally:
        pathlib.Path(path).unlink()
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
        return 0
    print(f"alpha {config.alpha}, n_max {config.n_max}; tasks {' / '.join(rows[0]['saved'])}")
    print(table(rows))
    print("\n".join(on_paper(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
