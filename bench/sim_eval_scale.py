#!/usr/bin/env python3
"""STEP's multi-task simulation, in shape: sim-eval against the fixed-N batch, with 1, 2 and 4 Ray workers.

Seed 003 §V-C3 compares two policies on three simulated tasks of different difficulty with one
sequential test per task (Bonferroni over the tasks), against the fixed batch of N_max rollouts
per task and policy. This bench runs the same shape with ``evalstop sim-eval``'s engine: two
served scripted physics policies on three robosuite Lift tasks that differ in the cube's
placement and the horizon (``--config``, default ``examples/sim_eval.yaml``), each session until
every task is decided, once per worker count (``--workers``). Per run it prints the rollouts per
task, the fixed-N batch's count, the wall time to the decision (Ray's start-up excluded, measured
apart), the summed rollout time, and the speed-up against one worker in the same run; and, on
paper for a cluster of W workers, wall ~= rollouts x mean rollout time / W (each worker one rollout
at a time, rounds of a pair kept on one worker).

Sizes by default (what ``make bench`` runs, minutes on two cores): alpha 0.3 (0.1 per task under
Holm), n_max 5 per task (the fixed-N batch: 3 x 5 x 2 = 30 rollouts), horizons of 80 actions at
15 Hz (5.3 s simulated), workers 1 and 2; the preset's own sizes (alpha 0.05, n_max 20: a batch of
120 rollouts, horizons of 90 to 120 actions) with ``--preset-sizes``. ::

    nice -n 10 python bench/sim_eval_scale.py --workers 1,2,4 [--preset-sizes] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default %(default)s)")
    parser.add_argument("--config", default=str(REPO / "examples" / "sim_eval.yaml"))
    parser.add_argument("--alpha", type=float, default=0.3, help="the session's alpha (default %(default)s)")
    parser.add_argument("--n-max", type=int, default=5, help="n_max per task (default %(default)s)")
    parser.add_argument("--max-steps", type=int, default=80, help="every task's horizon, actions (default %(default)s)")
    parser.add_argument("--preset-sizes", action="store_true", help="the preset's alpha, n_max and horizons")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("robosuite") is None or importlib.util.find_spec("ray") is None:
        print("sim_eval_scale: robosuite or ray is not installed (tools/install_physics.sh, evalstop[ray]); skipped")
        return 0
    sys.path.insert(0, str(REPO))
    import yaml

    from evalstop_ros.parallel.ray_pool import RayPool
    from evalstop_ros.parallel.sim_config import load_sim_eval
    from evalstop_ros.parallel.sim_eval import run_sim_eval, served_policies
    from evalstop_ros.runner.errors import ErrorLog

    data = yaml.safe_load(pathlib.Path(args.config).read_text())
    if not args.preset_sizes:
        data.update(alpha=args.alpha, n_max=args.n_max)
        for task in data["simulation"]["tasks"].values():
            task.update(max_steps=args.max_steps)
    sized = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    with sized:
        yaml.safe_dump(data, sized)
    config, simulation = load_sim_eval(sized.name)
    print(f"sizes: alpha {config.alpha}, n_max {config.n_max}, horizons "
          f"{[t.max_steps for t in simulation.tasks.values()]} actions at {simulation.rate:g} Hz", file=sys.stderr)
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        config, simulation = load_sim_eval(sized.name, workers=workers)
        with tempfile.TemporaryDirectory(prefix="sim-eval-bench-") as tmp, served_policies(simulation) as addresses:
            started = time.perf_counter()
            with RayPool(workers) as pool:
                pool.worker_pids()  # every worker up: Ray's start-up measured apart
                ray_s = time.perf_counter() - started
                result = run_sim_eval(config, simulation, pool, journal_path=pathlib.Path(tmp) / "bench.db",
                                      session_id=f"bench-{workers}", addresses=addresses,
                                      error_log=ErrorLog(pathlib.Path(tmp) / "errors"),
                                      progress=lambda line: print(line, file=sys.stderr, flush=True))
        rows.append({"workers": workers, "ray_start_s": round(ray_s, 1), "wall_s": round(result.wall_s, 1),
                     "rollout_s": round(result.rollout_s, 1), "rollouts": result.rollouts,
                     "per_task": result.per_task, "fixed_n": result.fixed_n, "state": result.state.value,
                     "decisions": {c.task: c.decision.name for c in result.comparisons},
                     "claims": [c.established for c in result.claims], "after_stop": result.after_stop,
                     "cancelled": result.cancelled})
    pathlib.Path(sized.name).unlink()
    base = rows[0]["wall_s"]
    for row in rows:
        row["speedup"] = round(base / row["wall_s"], 2) if row["wall_s"] else None
        mean = row["rollout_s"] / max(row["rollouts"], 1)
        row["mean_rollout_s"] = round(mean, 2)
        row["fixed_n_wall_s_est"] = round(row["fixed_n"] * mean / row["workers"], 1)
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
        return 0
    for row in rows:
        saved = row["fixed_n"] - sum(row["per_task"].values())
        print(f"{row['workers']} worker(s): {row['state']} after {row['rollouts']} rollouts {row['per_task']} "
              f"(fixed-N batch {row['fixed_n']}, saved {saved}) in {row['wall_s']} s "
              f"(Ray start {row['ray_start_s']} s; speed-up x{row['speedup']} against {rows[0]['workers']}); "
              f"mean rollout {row['mean_rollout_s']} s, the fixed-N batch would take about "
              f"{row['fixed_n_wall_s_est']} s; decisions {row['decisions']}, claims {row['claims']}")
    mean = rows[0]["rollout_s"] / max(rows[0]["rollouts"], 1)
    for workers in (16, 64):
        print(f"on paper, {workers} workers: sim-eval about {rows[0]['rollouts'] * mean / workers:.0f} s "
              f"(at most one round per worker at a time), the fixed-N batch about {rows[0]['fixed_n'] * mean / workers:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
