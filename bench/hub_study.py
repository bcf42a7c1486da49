#!/usr/bin/env python3
"""The hub's family-wise error and how fast its test and schedule settle a ranking -> docs/hub_study.md.

Every simulated hub run of (b) goes through the hub's own code: an in-process store on SQLite
(``hub.store``), the live leaderboard of the app (``hub.app._Board``: the journal fed to
``hub.leaderboard.Leaderboard``, pairs under sequential Holm over all ``P (P - 1) / 2`` pairs),
and the schedule (``hub.schedule``) choosing each lease.  One station leases, runs both arms
(Bernoulli successes with the policy's planted rate; score 1 or 0) and reports, one result at a time.

Each study runs the hub's pairs' test (``mixture``) and the one before it (``nscore``) on the same seeds.

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
(c) **One pair.** Each adjacent planted pair alone at Holm's first level, per test and for the
    oracle SPRT (the true rates known): how much any test could save.

    python bench/hub_study.py [--null-runs 200] [--planted-runs 40] [--out docs/hub_study.md]
    # or in processes: --part null --part-to a.json; --part planted --part-to b.json;
    # --part pairs --part-to c.json; then --part-from a.json b.json c.json
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
    """(a): six equal policies, ``null_runs`` hubs of ``null_results`` results each, per method (same seeds)."""
    started = time.monotonic()
    rows = {}
    for method in (BEFORE, METHOD):
        false_claims = 0
        for r in range(null_runs):
            run = board_run([0.5] * 6, "uncertain", null_results, seed + r, method)
            false_claims += bool(run["claims"])
            if (r + 1) % max(1, null_runs // 10) == 0:
                say(f"null, {method}: {r + 1}/{null_runs} runs, {false_claims} with a claim "
                    f"({time.monotonic() - started:.0f} s)")
        rate = false_claims / null_runs
        se_alpha = math.sqrt(ALPHA * (1 - ALPHA) / null_runs)
        rows[method] = {"runs_with_claim": false_claims, "fwe": rate,
                        "fwe_se": math.sqrt(max(rate * (1 - rate), 1e-12) / null_runs),
                        "bound": ALPHA + 2 * se_alpha, "passes": rate <= ALPHA + 2 * se_alpha}
    return {"runs": null_runs, "results_per_run": null_results, "schedule": "uncertain", "methods": rows,
            "seconds": time.monotonic() - started}


#: The planted study's rows: (method, schedule); the first two on the same seeds give the test's
#: saving, the last two the schedule's.
PLANTED_ROWS = ((BEFORE, "uncertain"), (METHOD, "uncertain"), (METHOD, "uniform"))


def planted_study(planted_runs: int, budget: int, seed: int, say: Any = print,
                  uniform_runs: int | None = None) -> dict[str, Any]:
    """(b): the planted ranking, per (method, schedule) of :data:`PLANTED_ROWS`, on the same seeds
    (the first ``uniform_runs`` of them for uniform pairing, which needs several times the results)."""
    started = time.monotonic()
    planted: dict[str, Any] = {}
    for method, schedule in PLANTED_ROWS:
        needed, censored, correct = [], 0, 0
        runs = planted_runs if schedule != "uniform" or uniform_runs is None else min(uniform_runs, planted_runs)
        for r in range(runs):
            run = hub_run(PLANTED, schedule, budget, seed + 10_000 + r, stop_when_settled=True, method=method)
            if run["settled_at"] is None:
                censored += 1
                needed.append(float(budget))
            else:
                needed.append(float(run["settled_at"]))
                correct += run["order"] == run["planted"]
            say(f"planted, {method}, {schedule}: run {r + 1}/{runs}: "
                f"{'settled after ' + str(run['settled_at']) if run['settled_at'] else 'unsettled at the budget'} "
                f"({time.monotonic() - started:.0f} s)")
        planted[f"{method}/{schedule}"] = {
            "method": method, "schedule": schedule, "runs": runs, "mean_results": sum(needed) / len(needed),
            "se": _se(needed), "median_results": sorted(needed)[len(needed) // 2], "censored": censored,
            "correct_order": correct, "results": needed}

    def paired(first: str, second: str) -> dict[str, float]:
        diff = [u - v for u, v in zip(planted[first]["results"], planted[second]["results"])]  # common seeds
        common = len(diff)
        return {"mean": sum(diff) / common, "se": _se(diff), "runs": common,
                "ratio": sum(planted[second]["results"][:common]) / sum(planted[first]["results"][:common])}

    return {"planted_rates": PLANTED, "budget": budget, "planted": planted,
            "test_saving": paired(f"{BEFORE}/uncertain", f"{METHOD}/uncertain"),
            "saving": paired(f"{METHOD}/uniform", f"{METHOD}/uncertain"),
            "seconds": time.monotonic() - started}


def _oracle_bet(rate_a: float, rate_b: float) -> float:
    """The constant bet of Wald's SPRT for the discordant signs with the true rates (known only here)."""
    plus, minus = rate_b * (1 - rate_a), rate_a * (1 - rate_b)
    return (plus - minus) / (plus + minus)


def pair_study(reps: int, horizon: int, seed: int, say: Any = print) -> dict[str, Any]:
    """(c): each adjacent planted pair alone, one-sided at the hub's first Holm level alpha / 30:
    mean pairs to the claim for each test and for the oracle SPRT (a bound no valid test beats)."""
    import numpy as np

    from evalstop_ros.stats.registry import make_process
    from evalstop_ros.stats.sequential import run_batch

    started = time.monotonic()
    level = ALPHA / 30
    rng = np.random.default_rng(seed)
    rows = []
    for better, worse in zip(PLANTED, PLANTED[1:]):
        a = (rng.random((reps, horizon)) < worse).astype(float)
        b = (rng.random((reps, horizon)) < better).astype(float)
        row: dict[str, Any] = {"rates": (better, worse)}
        for method in (BEFORE, METHOD):
            outcome = run_batch(make_process(method, reps, alpha=level, alternative="greater", n_max=None), a, b)
            stops = np.where(outcome.stopping_trial > 0, outcome.stopping_trial, horizon)
            row[method] = float(stops.mean())
        log_e = np.cumsum(np.log1p(_oracle_bet(worse, better) * (b - a)), axis=1)
        crossed = log_e >= -math.log(level)
        row["oracle"] = float(np.where(crossed.any(axis=1), crossed.argmax(axis=1) + 1, horizon).mean())
        rows.append(row)
        say(f"pairs: {better} vs {worse}: {row[BEFORE]:.0f} / {row[METHOD]:.0f} / {row['oracle']:.0f} "
            f"({time.monotonic() - started:.0f} s)")
    return {"pairs": {"reps": reps, "horizon": horizon, "level": level, "rows": rows},
            "seconds": time.monotonic() - started}


def markdown(out: dict[str, Any], command: str) -> str:
    null, planted, saving, test_saving = out["null"], out["planted"], out["saving"], out["test_saving"]
    null_rows = "\n".join(
        f"| `{method}` | {null['runs']} | {null['results_per_run']} | {null['schedule']} | {row['runs_with_claim']} | "
        f"{row['fwe']:.3f} ({row['fwe_se']:.3f}) | {row['bound']:.3f} | {'met' if row['passes'] else 'NOT met'} |"
        for method, row in null["methods"].items())
    labels = {"uncertain": "`uncertain` (the hub's default)", "uniform": "uniform (RoboArena, seed 001 Alg. 1)"}
    rows = []
    for p in planted.values():
        rows.append(f"| `{p['method']}` | {labels[p['schedule']]} | {p['runs']} | {p['mean_results']:.0f} ({p['se']:.0f}) | "
                    f"{p['median_results']:.0f} | {p['censored']} | {p['correct_order']} of {p['runs'] - p['censored']} |")
    pairs = out["pairs"]
    pair_rows = "\n".join(
        f"| {r['rates'][0]:g} vs {r['rates'][1]:g} | {r[BEFORE]:.0f} | {r[METHOD]:.0f} ({r[METHOD] / r[BEFORE]:.2f}) | "
        f"{r['oracle']:.0f} ({r['oracle'] / r[BEFORE]:.2f}) |" for r in pairs["rows"])
    total = {key: sum(r[key] for r in pairs["rows"]) for key in (BEFORE, METHOD, "oracle")}
    rates = ", ".join(f"{r:g}" for r in out["planted_rates"])
    met = test_saving["ratio"] <= 0.7
    return f"""<!-- generated by bench/hub_study.py; do not edit by hand -->
# Hub study: family-wise error and results to settle a ranking

`{command}` ({out["seconds"]:.0f} s of runs). Every run of (b) is a simulated hub through the hub's own code: an
in-process store on SQLite, the app's live leaderboard (pairs under sequential Holm over all
P(P-1)/2 pairs at family-wise alpha = {out['alpha']:g}, `hub/family.py`) and the schedule
(`hub/schedule.py`) choosing every lease; one station runs both arms (Bernoulli successes,
score 1 or 0) and reports each result. The PostgreSQL path of the same code is tested in
`test/hub/test_hub_family.py` (a planted ranking settled through the real app on PostgreSQL).
Each pair's two directions are tested by `--method`: `{METHOD}` (the hub's default, the mixture
e-process of `stats/mixture.py`; docs/hub.md, "The pairs' test") or `{BEFORE}` (N-SCORE, the
default before it), on the same seeds.

## (a) Six equal policies: family-wise false claims

Through the leaderboard (`Leaderboard`) and the schedule (`choose_pair` with the board's focus),
without the database, which only records the results (`board_run` in the script).

| method | runs | results per run | schedule | runs with any claim | FWE (SE) | bound alpha + 2 SE | FWE <= bound |
|---|---:|---:|---|---:|---:|---:|---|
{null_rows}

Both stay far below alpha: every direction starts at alpha / 30, and an e-process's p-value
reaches its level less often than the level (Ville's inequality is an upper bound; the exact
crossing probability of the mixture at alpha / 30 is at most 0.00153 = 0.92 alpha / 30,
`test/stats/test_mixture.py`).

## (b) A planted ranking: results until the hub reports it settled

Six policies with success rates {rates} (best first). "Settled": every adjacent pair of the
hub's current order is decided by sequential Holm, in that order's direction (what
`/v1/leaderboard`'s `progress` reports). Same seeds for every row; a run still unsettled at
{out['budget']} results counts as {out['budget']} (censored).

| method | schedule | runs | mean results (SE) | median | censored | settled in the planted order |
|---|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

**The test.** With the `uncertain` schedule the mixture needs {test_saving['ratio']:.2f} x N-SCORE's
results ({test_saving['mean']:.0f} fewer on average, paired SE {test_saving['se']:.0f}). The
acceptance goal of 0.7 x is **{'met' if met else 'not met'}**, and (c) shows why no valid test
meets it here: even Wald's SPRT, told the true rates of each pair, needs
{total['oracle'] / total[BEFORE]:.2f} x N-SCORE's pairs at Holm's first level.

**The schedule.** On the {saving['runs']} seeds both ran, the uncertain schedule needs {saving['ratio']:.2f} x
the results of uniform pairing (both with the mixture): {saving['mean']:.0f} fewer on average
(paired SE {saving['se']:.0f}).
Uniform pairing spends 10 of every 15 results on non-adjacent pairs, which settling the order
does not need, and keeps spending on pairs already decided; the uncertain schedule gives each
pair {WARM_UP} results to warm up, then only the open adjacent pairs of the current order (a
decided pair gets none), so the slowest adjacent pair -- the smallest gap -- gets the robot time.

## (c) One adjacent pair alone: what a test can gain

Each adjacent pair of (b), one-sided at Holm's first level alpha / 30 = {pairs['level']:.5f}: mean
pairs until the claim over {pairs['reps']} sequences (same data for every column; at most
{pairs['horizon']}). The oracle is the constant bet of Wald's SPRT for the discordant pairs'
signs with the true rates -- not a test anyone can run (it needs the answer), but a bound: by
Wald's lower bound on the expected sample size, no level-alpha / 30 test with power near one
needs fewer pairs on average than about log(30 / alpha) over the information per pair, which
the SPRT attains up to its overshoot.

| pair (rates) | `{BEFORE}` | `{METHOD}` (ratio) | oracle SPRT (ratio) |
|---|---:|---:|---:|
{pair_rows}
| sum | {total[BEFORE]:.0f} | {total[METHOD]:.0f} ({total[METHOD] / total[BEFORE]:.2f}) | {total['oracle']:.0f} ({total['oracle'] / total[BEFORE]:.2f}) |

The settled ranking costs about the sum of its adjacent pairs (plus the warm-up), so the test
alone can save at most about {1 - total['oracle'] / total[BEFORE]:.0%} of the results at these
levels; the mixture saves {1 - total[METHOD] / total[BEFORE]:.0%} of the pairs here. A larger saving
needs a larger level per direction (fewer hypotheses in the family, e.g. only adjacent pairs
declared before the data, or one-sided claims), not a sharper test.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-runs", type=int, default=200)
    parser.add_argument("--null-results", type=int, default=1200)
    parser.add_argument("--planted-runs", type=int, default=40)
    parser.add_argument("--uniform-runs", type=int, default=10,
                        help="planted runs with uniform pairing, the first of the same seeds (default %(default)s)")
    parser.add_argument("--budget", type=int, default=20000, help="results after which a planted run is censored")
    parser.add_argument("--pair-reps", type=int, default=400, help="sequences per pair in (c) (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(DOC), help="markdown written here (default docs/hub_study.md; '-' none)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--part", choices=("all", "null", "planted", "pairs"), default="all",
                        help="run only study (a), (b) or (c) (with --part-to; default all)")
    parser.add_argument("--part-to", default=None, help="write this part's numbers to a JSON file")
    parser.add_argument("--part-from", nargs="+", default=None,
                        help="merge the parts' JSON files (same seed) into the markdown instead of running")
    args = parser.parse_args(argv)
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    out: dict[str, Any] = {"alpha": ALPHA, "seed": args.seed}
    seconds = 0.0
    if args.part_from:  # parts run as separate processes (two cores), merged here
        for name in args.part_from:
            part = json.loads(pathlib.Path(name).read_text(encoding="utf-8"))
            seconds += part.pop("seconds", 0.0) + part.get("null", {}).get("seconds", 0.0)
            out.update(part)
    else:
        parts = {"null": lambda: {"null": null_study(args.null_runs, args.null_results, args.seed, say)},
                 "planted": lambda: planted_study(args.planted_runs, args.budget, args.seed, say, args.uniform_runs),
                 "pairs": lambda: pair_study(args.pair_reps, 4000, args.seed, say)}
        for name, run in parts.items():
            if args.part in ("all", name):
                part = run()
                seconds += part.pop("seconds", 0.0) + part.get("null", {}).get("seconds", 0.0)
                out.update(part)
        if args.part_to:
            out["seconds"] = seconds
            pathlib.Path(args.part_to).write_text(json.dumps(out), encoding="utf-8")
    if not {"null", "planted", "pairs"} <= set(out):
        return 0
    out["seconds"] = seconds
    command = "python bench/hub_study.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in (
        ("null_runs", out["null"]["runs"]), ("null_results", out["null"]["results_per_run"]),
        ("planted_runs", next(iter(out["planted"].values()))["runs"]),
        ("uniform_runs", out["planted"][f"{METHOD}/uniform"]["runs"]), ("budget", out["budget"]),
        ("pair_reps", out["pairs"]["reps"]), ("seed", out["seed"])))
    if args.out != "-":
        pathlib.Path(args.out).write_text(markdown(out, command), encoding="utf-8")
    if args.json:
        for row in out["planted"].values():
            row.pop("results")
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
