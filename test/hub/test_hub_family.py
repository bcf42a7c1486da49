"""The leaderboard's pairs under sequential Holm (family-wise error), the uncertain schedule, and progress.

The family-wise claims follow seed 000 §VI-B (Holm over anytime-valid p-values, see
evalstop_ros/stats/families.py); the pairing the schedule is compared with is RoboArena's (seed
001 §3); the full study is bench/hub_study.py -> docs/hub_study.md.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from typing import Any

import numpy as np
from hub_support import HubProcess, call, hub_journal, register_hub

from evalstop_ros.hub.leaderboard import WARM_UP, Leaderboard, leaderboard
from evalstop_ros.hub.page import render_page
from evalstop_ros.hub.schedule import Focus, Schedule, choose_pair
from evalstop_ros.hub.store import open_store
from evalstop_ros.session.values import ComparisonSnapshot
from evalstop_ros.stats.registry import make_process

SIX = [f"p{k}" for k in range(6)]


def _result(a: str, b: str, score_a: float, score_b: float, task: str = "t") -> dict[str, Any]:
    return {"kind": "result", "body": {"policy_a": a, "policy_b": b, "task": task, "score_a": score_a, "score_b": score_b}}


def test_two_policies_claim_when_a_direction_reaches_alpha_over_two() -> None:
    """P = 2: one pair, two directional hypotheses; Holm's first threshold is alpha / 2, so the claim
    comes at the first result where a one-sided process at alpha / 2 has p <= alpha / 2 (rebuilt
    here from the core's processes, independently of the hub's family code)."""
    rng = random.Random(5)
    trials = []
    for _ in range(80):
        x, y = float(rng.random() < 0.9), float(rng.random() < 0.3)
        trials.append(("good", "bad", x, y) if rng.random() < 0.5 else ("bad", "good", y, x))
    board = leaderboard(["bad", "good"], [_result(*t) for t in trials], models=("bt",))
    sides = {alt: make_process("mixture", 1, alpha=0.025, alternative=alt, n_max=None) for alt in ("greater", "less")}
    expected = None
    for n, (a, _, sa, sb) in enumerate(trials, 1):
        bad, good = (sb, sa) if a == "good" else (sa, sb)  # oriented (bad, good) by name
        for process in sides.values():
            process.update(np.array([bad]), np.array([good]))
        if min(float(p.pvalue()[0]) for p in sides.values()) <= 0.025:
            expected = n
            break
    (pair,) = board["pairs"]
    assert expected is not None and (pair["policy_a"], pair["policy_b"], pair["n"]) == ("bad", "good", 80)
    assert pair["decision"] == "B_BETTER" and pair["better"] == "good"
    assert pair["decided_at_result"] == pair["stopping_trial"] == expected
    # the session's row type and its one JSON form (session/values.py::ComparisonSnapshot.to_dict)
    assert set(pair) == {f.name for f in dataclasses.fields(ComparisonSnapshot)} | {"better"}
    assert (pair["metric"], pair["alternative"], pair["task"], pair["evalue"]) == ("score", "two-sided", "", None)
    assert pair["alpha"] == board["family"]["side_alpha"]
    assert board["family"]["pairs"] == 1 and board["family"]["hypotheses"] == 2
    assert [row["policy"] for row in board["ranking"]] == ["good", "bad"]
    assert board["ranking"][0]["low"] <= board["ranking"][0]["score"] <= board["ranking"][0]["high"]
    assert board["progress"]["settled"] and board["progress"]["order"] == ["good", "bad"]


def test_familywise_error_of_six_equal_policies_is_controlled() -> None:
    """Monte Carlo, worst-case kind of null for this data (six equal policies, fair coin scores):
    the probability that the leaderboard makes any claim is <= alpha + 2 SE, SE = sqrt(alpha (1 -
    alpha) / R).  alpha = 0.2 keeps R small and the test discriminating: one test per pair at alpha
    each (the hub before issue 23) claims in about half of these runs (0.55 at 600 results)."""
    alpha, runs, results = 0.2, 30, 400
    claims = 0
    for seed in range(runs):
        rng = random.Random(seed)
        entries = []
        for _ in range(results):
            x, y = rng.sample(SIX, 2)
            entries.append(_result(x, y, float(rng.random() < 0.5), float(rng.random() < 0.5)))
        board = leaderboard(SIX, entries, alpha=alpha, models=())
        assert board["family"]["pairs"] == 15 and board["n_results"] == results
        claims += any(pair["better"] for pair in board["pairs"])
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)
    assert claims / runs <= bound, (claims, runs, bound)


def _planted(rng: random.Random, rates: dict[str, float], a: str, b: str) -> tuple[float, float]:
    return float(rng.random() < rates[a]), float(rng.random() < rates[b])


def test_uncertain_schedule_drops_decided_pairs_and_settles_a_planted_ranking() -> None:
    """Decided pairs are never drawn again; after the warm-up only open pairs adjacent in the
    current order are drawn; the board reports the ranking settled in the planted order."""
    rates = {"a": 0.95, "b": 0.6, "c": 0.25, "d": 0.05}
    names = sorted(rates)
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    rng = random.Random(3)
    board = Leaderboard(names, models=())
    load = dict.fromkeys(pairs, 0)
    drawn_after_decision = []
    for _ in range(3000):
        focus = board.focus()
        x, y = choose_pair(Schedule("uncertain", focus), pairs, load, rng)
        assert (x, y) in focus.uncertain  # never a decided pair, never one the order does not need
        if board.family is not None and (x, y) in board.family.decided():
            drawn_after_decision.append((x, y))
        warm = board.family is not None and int(board.family.n.min()) >= WARM_UP
        if warm and not all(a["decided"] for a in board.progress()["adjacent"]):
            order = board.order()
            assert abs(order.index(x) - order.index(y)) == 1, (order, x, y)  # adjacent in the current order
        load[(x, y)] += 1
        board.add([_result(x, y, *_planted(rng, rates, x, y))])
        if board.progress()["settled"]:
            break
    progress = board.progress()
    assert progress["settled"] and progress["finished"] and progress["reason"] == "every adjacent pair is decided"
    assert progress["order"] == ["a", "b", "c", "d"] and drawn_after_decision == []
    decided = board.family.decided() if board.family is not None else set()
    assert decided and all(load[pair] == int(board.family.n[board.family.index[pair]]) for pair in pairs)
    page = render_page(board.snapshot())
    assert "Finished: every adjacent pair is decided" in page and 'data-finished="yes"' in page
    # once everything is decided, the schedule still serves (by need) -- the hub never refuses work
    everything = Focus(frozenset(), frozenset())
    assert choose_pair(Schedule("uncertain", everything), pairs, load, rng) in pairs


def test_budget_spent_is_reported() -> None:
    rng = random.Random(9)
    entries = [_result(x, y, float(rng.random() < 0.5), float(rng.random() < 0.5))
               for x, y in (rng.sample(SIX, 2) for _ in range(30))]
    board = leaderboard(SIX, entries, models=(), budget=30)
    assert board["progress"]["budget_spent"] and board["progress"]["finished"]
    assert board["progress"]["reason"] == "the budget of 30 results is spent"
    assert not leaderboard(SIX, entries, models=(), budget=31)["progress"]["finished"]


def test_store_lease_follows_the_schedule(database: str) -> None:
    """The store draws from the schedule's focus (SQLite and PostgreSQL): only the uncertain pairs."""
    store = open_store(database)
    try:
        for name in ("a", "b", "c"):
            store.add_policy(name, "sim://success=0.5")
        store.add_station("s1")
        focus = Focus(frozenset({("a", "c"), ("b", "c")}), frozenset({("b", "c")}))
        rng = random.Random(1)
        for i in range(6):
            work, _ = store.lease("s1", 30.0, ["towel"], Schedule("uncertain", focus), rng)
            assert {work.policy_a, work.policy_b} == {"b", "c"}
            store.submit("s1", work.assignment_id, f"upload-{i:04d}", 1.0, 0.0)
        only_open = Focus(frozenset({("a", "c"), ("b", "c")}), frozenset())
        seen = set()
        for i in range(6):
            work, _ = store.lease("s1", 30.0, ["towel"], Schedule("uncertain", only_open), rng)
            seen.add(frozenset((work.policy_a, work.policy_b)))
            store.submit("s1", work.assignment_id, f"upload-x{i:04d}", 1.0, 0.0)
        assert seen == {frozenset({"a", "c"})}  # the least loaded open pair: (b, c) already had 6
    finally:
        store.close()


def test_hub_on_postgresql_settles_a_planted_ranking(postgres: Any, tmp_path: Any) -> None:
    """The real app on PostgreSQL with the default (uncertain) schedule: a station leases and reports
    planted results over HTTP until /v1/leaderboard says the ranking is settled; no pair is
    handed out after the result that decided it; the page says so."""
    db = postgres.new_database()
    rates = {"hi": 0.95, "mid": 0.5, "lo": 0.05}
    keys, viewer = register_hub(db, rates, ["s1"], "board")
    key = keys["s1"]
    hub = HubProcess(db, viewer, tmp_path, ["--seed", "4", "--models", "bt"])
    hub.start()
    rng = random.Random(8)
    try:
        board: dict[str, Any] = {}
        for i in range(600):
            status, work = call(hub.url + "/v1/work", "POST", key=key)
            assert status == 200, work
            status, arms = call(hub.url + "/v1/tickets/resolve", "POST", key=key, body={"ticket": work["runner_ticket"]})
            assert status == 200
            scores = [float(rng.random() < float(arms[arm].split("=")[1])) for arm in ("A", "B")]
            status, _ = call(hub.url + f"/v1/assignments/{work['assignment_id']}/result", "POST", key=key,
                             body={"upload_id": f"upload-{i:05d}", "score_a": scores[0], "score_b": scores[1]})
            assert status == 200
            if i % 10 == 9:
                board = call(hub.url + "/v1/leaderboard", key=viewer)[1]
                if board["progress"]["finished"]:
                    break
        assert board["progress"]["settled"] and board["progress"]["order"] == ["hi", "mid", "lo"]
        page = call(hub.url + "/leaderboard", key=viewer)[1]
        assert "Finished: every adjacent pair is decided" in page
        assert re.search(r"all 3 pairs of the 3 policies .* sequential Holm at level 0.05", page)
        journal = hub_journal(hub.url, viewer)
    finally:
        hub.stop()
    results = [e for e in journal if e["kind"] == "result"]
    # Until every pair is decided; then the hub serves all pairs by need (it never refuses work),
    # and this station leases on until its next look at the board.
    stops = [pair["decided_at_result"] for pair in board["pairs"]]
    all_decided = results[max(stops) - 1]["seq"] if None not in stops else math.inf
    for pair in board["pairs"]:
        if pair["decided_at_result"] is None:
            continue
        decisive = results[pair["decided_at_result"] - 1]["seq"]
        later = [e for e in journal if e["kind"] == "assigned" and decisive < e["seq"] < all_decided
                 and {e["body"]["policy_a"], e["body"]["policy_b"]} == {pair["policy_a"], pair["policy_b"]}]
        assert later == [], (pair, later[:2])
