#!/usr/bin/env python3
"""Audit speed: ``evalstop audit`` of a 10 000-trial session bag (goal < 10 s, end to end).

The bag is what evaluation_manager publishes for a 10 000-trial session (two equal policies,
paired design, success by theta-SAVI and progress by N-SCORE with n_max 5000, so neither test
stops and every trial is played): about 90 000 messages on seven topics, journal stream
included, written with the rosbags writer (mcap, then sqlite3).  Simulating the session runs
the real EvaluationSession, whose per-score work grows with the trial count (the whole 10 000-trial
session takes about 15 minutes on 2 shared cores), so the bags are built once and cached in
``build/bench/`` under a hash of the config (``--rebuild`` builds them again).

What is timed is the console script, as a user runs it (interpreter start, imports, reading
and deserializing every message, the re-run of both tests and every check):

    evalstop audit BAG --json

Run: ``.venv/bin/python bench/audit_speed.py`` (``--trials N`` for another size).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import time

from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.session import parse_config

REPO = pathlib.Path(__file__).resolve().parents[1]
GOAL_S = 10.0
#: Bump when evalstop_ros/audit/synthetic.py changes what it publishes (or use --rebuild): the
#: cached bags are keyed by the config and this number only, since building them takes minutes.
BAG_FORMAT = 1


def config(trials: int) -> dict[str, object]:
    """Two equal policies, anytime-valid tests only (no STEP table for n_max 5000 ships)."""
    return {
        "policies": ["policy_a", "policy_b"], "seed": 4, "alpha": 0.05, "n_max": trials // 2,
        "tasks": [{"id": "push", "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"spot {i}"}
                                                        for i in range(3)]}],
        "metrics": [{"name": "success", "method": "savi", "alpha": 0.02},
                    {"name": "progress", "method": "nscore", "alpha": 0.03, "bins": 21}],
        "scoring": "operator",
    }


def bags(trials: int, *, rebuild: bool = False) -> dict[str, pathlib.Path]:
    """The cached mcap and sqlite3 bags of a ``trials``-trial session (built on first use)."""
    cfg = config(trials)
    key = hashlib.sha256(json.dumps([cfg, BAG_FORMAT], sort_keys=True).encode()).hexdigest()[:12]
    paths = {s: REPO / "build" / "bench" / f"audit-{trials}-{key}-{s}" for s in ("mcap", "sqlite3")}
    if not rebuild and all((p / "metadata.yaml").is_file() for p in paths.values()):
        return paths
    started = time.perf_counter()
    print(f"building the {trials}-trial bags (once; cached in {paths['mcap'].parent}) ...", flush=True)
    messages = simulate_recording(parse_config(cfg), SimulatedLab({"policy_a": 0.5, "policy_b": 0.5}, seed=1))
    for storage, path in paths.items():
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bag(path, messages, storage=storage)
    print(f"  {len(messages)} messages, built in {time.perf_counter() - started:.0f} s", flush=True)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000, help="session size (default %(default)s)")
    parser.add_argument("--rebuild", action="store_true", help="simulate the session again (minutes)")
    args = parser.parse_args()
    script = pathlib.Path(sys.executable).with_name("evalstop")
    failed = False
    for storage, path in bags(args.trials, rebuild=args.rebuild).items():
        started = time.perf_counter()
        done = subprocess.run([str(script), "audit", str(path), "--json"], capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        report = json.loads(done.stdout) if done.stdout else {}
        counts = report.get("counts", {})
        ok = done.returncode == 0 and report.get("verified") and seconds < GOAL_S
        failed |= not ok
        print(f"{storage:>7}: evalstop audit of {counts.get('trials_requested')} trials, "
              f"{sum(counts.get('messages', {}).values())} messages, {counts.get('statuses_checked')} published "
              f"states: {seconds:.2f} s (goal < {GOAL_S:g} s), exit {done.returncode}, "
              f"verified={report.get('verified')} -> {'OK' if ok else 'FAIL'}")
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
