#!/usr/bin/env python3
"""The hub's family-wise error and how fast its schedule settles a ranking (issue 23) -> docs/hub_study.md.

Every simulated hub run of (b) goes through the hub's own code: an in-process store on SQLite
(``hub.store``), the live leaderboard of the app (``hub.app._Board``: the journal fed to
``hub.leaderboard.Leaderboard``, pairs under sequential Holm over all ``P (P - 1) / 2`` pairs),
and the schedule (``hub.schedule``) choosing each lease.  One station leases, runs both arms
(Bernoulli successes with the policy's planted rate; score 1 or 0) and reports, one result at a time.

(a) **Null.** Six equal policies (rate 0.5 each), ``--null-results`` results per run (1200, as
    in the issue's measurement of the per-pair hub: 0.160 of 200 exported journals made a claim),
    default ``uncertain`` schedule, through the leaderboard and the schedule without the database
    (:func:`board_run`: the store only records; 200 x 1200 results through SQLite take an hour
    on this machine): the fraction of runs with any "better" claim, against
    alpha + 2 SE (SE of a rate equal to alpha).
(b) **Planted ranking.** Six policies with rates ``--planted`` (best first); results until the hub
    reports the ranking settled (every adjacent pair of the current order decided by Holm) under
    the ``uncertain`` schedule and under RoboArena's uniform pairing (seed ``001_*``, Algorithm 1
    line 5, Sec. 3.1: "C randomly samples two policies"), with the same seeds; runs that reach
    ``--budget`` results unsettled are counted as censored.  Also: whether the settled order
    is the planted one.

    python bench/hub_study.py [--null-runs 200] [--planted-runs 40] [--out docs/hub_study.md]
    # or in two processes: --part null --part-to a.json; --part planted --part-to b.json;
    # then --part-from a.json b.json
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from evalstop_ros.hub.app import HubSettings, _Board
from evalstop_ros.hub.leaderboard import WARM_UP, Leaderboard
from evalstop_ros.hub.schedule import Schedule, choose_pair
from evalstop_ros.hub.store import open_store

ALPHA = 0.05
#: The hub's pairs' test (``evalstop hub serve --method``), and the one it replaced.
METHOD, BEFORE = "mixture", "nscore"
PLANTED = (0.85, 0.7, 0.55, 0.4, 0.25, 0.1)
DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "hub_study.md"


class Clock:
    """The store's clock: one second per lease (no lease ever expires in the study)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def hub_run(rates: Sequence[float], schedule: str, max_results: int, seed: int, *,
            stop_when_settled: bool, method: str = METHOD) -> dict[str, Any]:
    """One simulated hub: policies ``p0..`` with ``rates``; returns results, settled, claims, order."""
    store = open_store(":memory:", Clock())
    try:
        names = [f"p{k}" for k in range(len(rates))]
        rate = dict(zip(names, rates, strict=True))
        for name in names:
            store.add_policy(name, f"sim://success={rate[name]}")
        store.add_station("s1")
        board = _Board(store, HubSettings(schedule=schedule, method=method, alpha=ALPHA, models=(), seed=seed))
        rng = random.Random(seed)  # the pair draws (as the app's --seed)
        outcomes = random.Random(seed + 10**6)  # the robot
        settled_at = None
        for n in range(1, max_results + 1):
            work, _ = store.lease("s1", 60.0, ("default",), board.schedule(schedule), rng)
            scores = [float(outcomes.random() < rate[p]) for p in (work.policy_a, work.policy_b)]
            store.submit("s1", work.assignment_id, f"upload-{n:07d}", *scores)
            if stop_when_settled:
                progress = board.progress()
                if progress["settled"]:
                    settled_at = n
                    break
        snapshot = board.get()
        claims = [(p["policy_a"], p["policy_b"], p["better"]) for p in snapshot["pairs"] if p["better"]]
        return {"results": snapshot["n_results"], "settled_at": settled_at, "claims": claims,
                "order": snapshot["progress"]["order"], "planted": names}
    finally:
        store.close()


def board_run(rates: Sequence[float], schedule: str, results: int, seed: int, method: str = METHOD) -> dict[str, Any]:
    """One simulated hub without the database: the leaderboard (``hub.leaderboard.Leaderboard``)
    and the schedule (``hub.schedule.choose_pair`` with the board's focus, the pair loads counted
    here as the store counts them) -- the same decisions as :func:`hub_run`, several times faster."""
    names = [f"p{k}" for k in range(len(rates))]
    rate = dict(zip(names, rates, strict=True))
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    load = dict.fromkeys(pairs, 0)
    board = Leaderboard(names, method=method, alpha=ALPHA, models=())
    rng, outcomes = random.Random(seed), random.Random(seed + 10**6)
    for _ in range(results):
        x, y = choose_pair(Schedule(schedule, board.focus() if schedule == "uncertain" else None), pairs, load, rng)
        load[(x, y)] += 1
        a, b = (x, y) if rng.random() < 0.5 else (y, x)
        scores = [float(outcomes.random() < rate[p]) for p in (a, b)]
        board.add([{"kind": "result", "body": {"policy_a": a, "policy_b": b, "task": "default",
                                                "score_a": scores[0], "score_b": scores[1]}}])
    claims = board.family.decided() if board.family is not None else set()
    return {"results": results, "claims": sorted(claims)}


def _se(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return float("nan")
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def null_study(null_runs: int, null_results: int, seed: int, say: Any = print) -> dict[str, Any]:
    """(a): six equal policies, ``null_runs`` hubs of ``null_results`` results each."""
    started = time.monotonic()
    false_claims = 0
    for r in range(null_runs):
        run = board_run([0.5] * 6, "uncertain", null_results, seed + r)
        false_claims += bool(run["claims"])
        if (r + 1) % max(1, null_runs // 10) == 0:
            say(f"null: {r + 1}/{null_runs} runs, {false_claims} with a claim ({time.monotonic() - started:.0f} s)")
    rate = false_claims / null_runs
    se_alpha = math.sqrt(ALPHA * (1 - ALPHA) / null_runs)
    return {"runs": null_runs, "results_per_run": null_results, "schedule": "uncertain", "runs_with_claim": false_claims,
            "fwe": rate, "fwe_se": math.sqrt(max(rate * (1 - rate), 1e-12) / null_runs), "bound": ALPHA + 2 * se_alpha,
            "passes": rate <= ALPHA + 2 * se_alpha, "seconds": time.monotonic() - started}


def planted_study(planted_runs: int, budget: int, seed: int, say: Any = print) -> dict[str, Any]:
    """(b): the planted ranking, uncertain vs uniform pairing on the same seeds."""
    started = time.monotonic()
    planted: dict[str, Any] = {}
    for schedule in ("uncertain", "uniform"):
        needed, censored, correct = [], 0, 0
        for r in range(planted_runs):
            run = hub_run(PLANTED, schedule, budget, seed + 10_000 + r, stop_when_settled=True)
            if run["settled_at"] is None:
                censored += 1
                needed.append(float(budget))
            else:
                needed.append(float(run["settled_at"]))
                correct += run["order"] == run["planted"]
            say(f"planted, {schedule}: run {r + 1}/{planted_runs}: "
                f"{'settled after ' + str(run['settled_at']) if run['settled_at'] else 'unsettled at the budget'} "
                f"({time.monotonic() - started:.0f} s)")
        planted[schedule] = {"runs": planted_runs, "mean_results": sum(needed) / len(needed), "se": _se(needed),
                             "median_results": sorted(needed)[len(needed) // 2], "censored": censored,
                             "correct_order": correct, "results": needed}
    paired = [u - v for u, v in zip(planted["uniform"]["results"], planted["uncertain"]["results"], strict=True)]
    return {"planted_rates": PLANTED, "budget": budget, "planted": planted,
            "saving": {"mean": sum(paired) / len(paired), "se": _se(paired),
                       "ratio": planted["uncertain"]["mean_results"] / planted["uniform"]["mean_results"]},
            "seconds": time.monotonic() - started}


def markdown(out: dict[str, Any], command: str) -> str:
    null, planted, saving = out["null"], out["planted"], out["saving"]
    rows = []
    for schedule, label in (("uncertain", "`uncertain` (the hub's default)"), ("uniform", "uniform (RoboArena, seed 001 Alg. 1)")):
        p = planted[schedule]
        rows.append(f"| {label} | {p['runs']} | {p['mean_results']:.0f} ({p['se']:.0f}) | {p['median_results']:.0f} | "
                    f"{p['censored']} | {p['correct_order']} of {p['runs'] - p['censored']} |")
    rates = ", ".join(f"{r:g}" for r in out["planted_rates"])
    return f"""<!-- generated by bench/hub_study.py; do not edit by hand -->
# Hub study: family-wise error and results to settle a ranking (issue 23)

`{command}` ({out["seconds"]:.0f} s of runs). Every run of (b) is a simulated hub through the hub's own code: an
in-process store on SQLite, the app's live leaderboard (pairs under sequential Holm over all
P(P-1)/2 pairs at family-wise alpha = {out['alpha']:g}, `hub/family.py`) and the schedule
(`hub/schedule.py`) choosing every lease; one station runs both arms (Bernoulli successes,
score 1 or 0) and reports each result. The PostgreSQL path of the same code is tested in
`test/hub/test_hub_family.py` (a planted ranking settled through the real app on PostgreSQL).

## (a) Six equal policies: family-wise false claims

Through the leaderboard (`Leaderboard`) and the schedule (`choose_pair` with the board's focus),
without the database, which only records the results (`board_run` in the script).

| runs | results per run | schedule | runs with any claim | FWE (SE) | bound alpha + 2 SE |
|---:|---:|---|---:|---:|---:|
| {null['runs']} | {null['results_per_run']} | {null['schedule']} | {null['runs_with_claim']} | {null['fwe']:.3f} ({null['fwe_se']:.3f}) | {null['bound']:.3f} |

Acceptance (FWE <= alpha + 2 SE, SE of a rate equal to alpha): **{'met' if null['passes'] else 'NOT met'}**.
The hub before issue 23 (one anytime test per pair at alpha each, 15 pairs) claimed a
difference in 0.160 of 200 such journals (1200 results each, measured in the issue). Sequential
Holm's claims are rarer than alpha here because the N-SCORE e-processes are conservative on
Bernoulli scores (seed 000) and every direction starts at alpha / 30.

## (b) A planted ranking: results until the hub reports it settled

Six policies with success rates {rates} (best first). "Settled": every adjacent pair of the
hub's current order is decided by sequential Holm, in that order's direction (what
`/v1/leaderboard`'s `progress` reports). Same seeds for both schedules; a run still unsettled at
{out['budget']} results counts as {out['budget']} (censored).

| schedule | runs | mean results (SE) | median | censored | settled in the planted order |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

The uncertain schedule needs {saving['ratio']:.2f} x the results of uniform pairing: {saving['mean']:.0f}
fewer on average (paired SE {saving['se']:.0f}). Uniform pairing spends 10 of every 15 results on
non-adjacent pairs, which settling the order does not need, and keeps spending on pairs already
decided; the uncertain schedule gives each pair {WARM_UP} results to warm up, then only the open
adjacent pairs of the current order (a decided pair gets none), so the slowest adjacent pair --
the smallest gap -- gets the robot time.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-runs", type=int, default=200)
    parser.add_argument("--null-results", type=int, default=1200)
    parser.add_argument("--planted-runs", type=int, default=40)
    parser.add_argument("--budget", type=int, default=20000, help="results after which a planted run is censored")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(DOC), help="markdown written here (default docs/hub_study.md; '-' none)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--part", choices=("all", "null", "planted"), default="all",
                        help="run only study (a) or (b) (with --part-to; default all)")
    parser.add_argument("--part-to", default=None, help="write this part's numbers to a JSON file")
    parser.add_argument("--part-from", nargs="+", default=None,
                        help="merge the parts' JSON files (same seed) into the markdown instead of running")
    args = parser.parse_args(argv)
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    out: dict[str, Any] = {"alpha": ALPHA, "seed": args.seed}
    if args.part_from:  # parts run as separate processes (two cores), merged here
        for name in args.part_from:
            out.update(json.loads(pathlib.Path(name).read_text(encoding="utf-8")))
    if args.part in ("all", "null") and not args.part_from:
        out["null"] = null_study(args.null_runs, args.null_results, args.seed, say)
    if args.part in ("all", "planted") and not args.part_from:
        out.update(planted_study(args.planted_runs, args.budget, args.seed, say))
    if args.part_to:
        pathlib.Path(args.part_to).write_text(json.dumps(out), encoding="utf-8")
    if "null" not in out or "planted" not in out:
        return 0
    out["seconds"] = out["null"]["seconds"] + out["seconds"]
    command = "python bench/hub_study.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in (
        ("null_runs", out["null"]["runs"]), ("null_results", out["null"]["results_per_run"]),
        ("planted_runs", out["planted"]["uniform"]["runs"]), ("budget", out["budget"]), ("seed", out["seed"])))
    if args.out != "-":
        pathlib.Path(args.out).write_text(markdown(out, command), encoding="utf-8")
    if args.json:
        for schedule in out["planted"].values():
            schedule.pop("results")
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
