#!/usr/bin/env python3
"""Simulation study of seed 004's strategies: L1 error and log-likelihood against cumulative cost.

Settings (evalstop_ros.active.world; the paper's datasets are not public): MetaWorld-like (10
policies x 50 tasks, switch cost 1 when the object changes) with binary success and with
continuous progress, and OpenVLA-like (4 x 29, binary, switch 1 within / 3 across embodiments).
Every strategy of App. F runs Algorithm 1 (evalstop_ros.active.loop) to the same cost budget
over several seeds (one world per seed); the curves are seed means on a common cost grid.  A
second experiment compares task embeddings (verb / language / random) under random-task
sampling (the paper's E1).  Writes docs/active/*.png and docs/active/study.json.

Run: ``.venv/bin/python bench/active_study.py --seeds 3 --budget 200`` (the committed plots;
about 15 min on 2 cores).  ``--quick`` runs a 1-seed, small-budget check.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

import matplotlib
import numpy as np
import torch

from evalstop_ros.active.acquisition import STRATEGIES
from evalstop_ros.active.loop import Trace, run_selection
from evalstop_ros.active.world import make_world

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SETTINGS = {"metaworld-binary": ("metaworld", "binary"), "metaworld-progress": ("metaworld", "binned"),
            "openvla-binary": ("openvla", "binary")}
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "active"


def _on_grid(trace: Trace, grid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Step function: the metric after the last query whose cost is <= each grid point."""
    index = np.searchsorted(trace.cost, grid, side="right") - 1
    return np.where(index >= 0, values[np.maximum(index, 0)], np.nan)


def _study(setting: str, strategies: list[str], seeds: int, budget: float, embedding: str,
           log: list[str]) -> dict[str, dict[str, list[float]]]:
    kind, outcome = SETTINGS[setting]
    grid = np.linspace(0, budget, 61)
    result: dict[str, dict[str, list[float]]] = {"grid": {"cost": grid.tolist()}}
    for strategy in strategies:
        l1, ll, visited = [], [], []
        for seed in range(seeds):
            start = time.perf_counter()
            world = make_world(kind, outcome=outcome, seed=seed)
            trace = run_selection(world, strategy, budget=budget, seed=seed, embedding=embedding)
            l1.append(_on_grid(trace, grid, trace.l1))  # NaN before the first query's cost
            ll.append(_on_grid(trace, grid, trace.log_likelihood))
            visited.append(trace.tasks_visited[-1])
            line = (f"{setting:19s} {strategy:14s} {embedding:8s} seed {seed}: {len(trace.cost):4d} queries, "
                    f"L1 {trace.l1[-1]:.3f}, LL {trace.log_likelihood[-1]:+.3f}, {trace.tasks_visited[-1]} tasks "
                    f"visited ({time.perf_counter() - start:.0f} s)")
            print(line, flush=True)
            log.append(line)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN grid points before the first query
            curves = {"l1": np.nanmean(l1, axis=0), "ll": np.nanmean(ll, axis=0),
                      "l1_se": np.nanstd(l1, axis=0) / np.sqrt(seeds)}
        result[strategy] = {**{k: v.tolist() for k, v in curves.items()},
                            "tasks_visited": float(np.mean(visited))}
    return result


def _plot(name: str, title: str, data: dict[str, dict[str, list[float]]]) -> None:
    grid = np.asarray(data["grid"]["cost"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, curves in data.items():
        if label == "grid":
            continue
        line, = axes[0].plot(grid, curves["l1"], label=label)
        se = np.asarray(curves["l1_se"])
        axes[0].fill_between(grid, np.asarray(curves["l1"]) - se, np.asarray(curves["l1"]) + se,
                             color=line.get_color(), alpha=0.15)
        axes[1].plot(grid, curves["ll"], label=label)
    axes[0].set(xlabel="cumulative cost", ylabel="L1 error of the mean (lower is better)", title=title)
    axes[1].set(xlabel="cumulative cost", ylabel="average log-likelihood (higher is better)", title=title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / f"{name}.png", dpi=90)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per strategy (default %(default)s)")
    parser.add_argument("--budget", type=float, default=200.0, help="cost budget per run (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="1 seed, budget 40, one setting: a smoke run")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny networks: one thread is as fast and leaves the other core free
    OUT.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    if args.quick:
        data = _study("metaworld-binary", list(STRATEGIES), 1, 40.0, "random", log)
        return 0 if all(np.isfinite(v["l1"][-1]) for k, v in data.items() if k != "grid") else 1
    summary: dict[str, object] = {"seeds": args.seeds, "budget": args.budget}
    for setting in SETTINGS:
        data = _study(setting, list(STRATEGIES), args.seeds, args.budget, "verb", log)
        _plot(f"strategies_{setting}", setting, data)
        summary[setting] = data
    embeddings: dict[str, dict[str, list[float]]] = {}
    for embedding in ("verb", "language", "random"):
        data = _study("metaworld-binary", ["random-task"], args.seeds, args.budget, embedding, log)
        embeddings.setdefault("grid", data["grid"])
        embeddings[embedding] = data["random-task"]
    _plot("embeddings_metaworld-binary", "task embeddings (random-task sampling)", embeddings)
    summary["embeddings"] = embeddings
    summary["log"] = log
    (OUT / "study.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
