"""The leaderboard's pairs under sequential Holm (family-wise error), the uncertain schedule, and progress.

The family-wise claims follow seed 000 §VI-B (Holm over anytime-valid p-values, see
evalstop_ros/stats/families.py); the declared family weights Holm from a warm-up's order (Holm 1979
Sec. 5, Bretz et al. 2009; docs/hub.md, "The family"); the pairing the schedule is compared with is
RoboArena's (seed 001 §3); the full study is bench/hub_study.py -> docs/hub_study.md.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hub_support import HubProcess, call, hub_journal, register_hub

from evalstop_ros.hub.designs import DECLARE_AFTER
from evalstop_ros.hub.evaluation import Evaluation
from evalstop_ros.hub.family import HolmPairs
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
    board = leaderboard(["bad", "good"], [_result(*t) for t in trials], models=("bt",), family="all-pairs")
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


@pytest.mark.parametrize("family", ["all-pairs", "declared"])
def test_familywise_error_of_six_equal_policies_is_controlled(family: str) -> None:
    """Monte Carlo, worst-case kind of null for this data (six equal policies, fair coin scores):
    the probability that the leaderboard makes any claim is <= alpha + 2 SE, SE = sqrt(alpha (1 -
    alpha) / R), for either family.  alpha = 0.2 keeps R small and the test discriminating: one
    test per pair at alpha each claims in about half of these runs (0.55 at 600 results)."""
    alpha, runs, results = 0.2, 30, 400
    claims = 0
    for seed in range(runs):
        rng = random.Random(seed)
        entries = []
        for _ in range(results):
            x, y = rng.sample(SIX, 2)
            entries.append(_result(x, y, float(rng.random() < 0.5), float(rng.random() < 0.5)))
        board = leaderboard(SIX, entries, alpha=alpha, models=(), family=family)
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
        warm = board.family is not None and int(board.family.n.min()) >= max(WARM_UP, board.family.warm_up)
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


def _station_until_finished(url: str, key: str, viewer: str, rng: random.Random, results: int = 600) -> dict[str, Any]:
    """A station over HTTP: lease, run both arms at their planted rates (``sim://success=R``),
    report; the leaderboard every 10 results, until it says finished (or ``results``)."""
    board: dict[str, Any] = {}
    for i in range(results):
        status, work = call(url + "/v1/work", "POST", key=key)
        assert status == 200, work
        status, arms = call(url + "/v1/tickets/resolve", "POST", key=key, body={"ticket": work["runner_ticket"]})
        assert status == 200
        scores = [float(rng.random() < float(arms[arm].split("=")[1])) for arm in ("A", "B")]
        status, _ = call(url + f"/v1/assignments/{work['assignment_id']}/result", "POST", key=key,
                         body={"upload_id": f"upload-{i:05d}", "score_a": scores[0], "score_b": scores[1]})
        assert status == 200
        if i % 10 == 9:
            board = call(url + "/v1/leaderboard", key=viewer)[1]
            if board["progress"]["finished"]:
                break
    return board


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
    try:
        board = _station_until_finished(hub.url, key, viewer, random.Random(8))
        assert board["progress"]["settled"] and board["progress"]["order"] == ["hi", "mid", "lo"]
        page = call(hub.url + "/leaderboard", key=viewer)[1]
        assert "Finished: every adjacent pair is decided" in page
        assert re.search(r"all 3 pairs of the 3 policies .* sequential weighted Holm at level 0.05", page)
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


# -- the declared family ---------------------------------------------------------------------------


def test_declared_family_orders_by_the_warm_up_and_tests_only_the_later_results() -> None:
    """The warm-up (DECLARE_AFTER results of every pair) only orders the policies: however one-sided
    its results, no test has seen them (every p-value 1, no claim); the order it declares is by mean
    score, and the weights favour that order's adjacent pairs in its direction."""
    family = HolmPairs(["a", "b", "c"], method="mixture", alpha=0.05)
    assert family.declared_at is None and family.statement()["design"] == "declared"
    for _ in range(DECLARE_AFTER):  # c beats everyone, a loses to everyone: a sure order c > b > a
        family.add("a", "b", 0.0, 1.0)
        family.add("a", "c", 0.0, 1.0)
        family.add("b", "c", 0.0, 1.0)
    assert family.declared_at == 3 * DECLARE_AFTER and family.declared_order == ("c", "b", "a")
    assert family.n_tested.tolist() == [0, 0, 0] and family.decided() == set()
    assert [family.pvalue(j) for j in range(family.m)] == [1.0, 1.0, 1.0]
    # (a, b) and (b, c) are adjacent, "B better" carries their weight; (a, c) is two apart
    assert family.first_level(0) == family.first_level(2) > family.first_level(1)
    assert family.engine.levels.sum() == pytest.approx(0.05)
    for _ in range(3):  # the first test results
        family.add("a", "b", 0.0, 1.0)
    assert family.n_tested.tolist() == [3, 0, 0] and family.pvalue(0) < 1.0
    # the same results with the warm-up counted as data: more evidence
    counted = HolmPairs(["a", "b", "c"], method="mixture", alpha=0.05, family="all-pairs")
    for _ in range(DECLARE_AFTER + 3):
        counted.add("a", "b", 0.0, 1.0)
    assert counted.pvalue(0) < family.pvalue(0)


def test_an_evaluation_journaled_before_the_declared_family_keeps_all_pairs() -> None:
    old = {"method": "mixture", "alpha": 0.05, "ranker": "bt", "models": ["bt"], "budget": 0,
           "schedule": "uncertain", "tasks": ["default"]}
    assert Evaluation.from_body(old).family == "all-pairs"
    assert Evaluation.from_body({**old, "family": "declared"}).family == "declared"
    assert Evaluation().family == "declared"


def _null_run(rng: np.random.Generator, rates: dict[str, float], family: HolmPairs, results: int,
              warm_up_scores: dict[str, float] | None = None) -> None:
    """Feed ``results`` random pairs with Bernoulli scores at ``rates``; during the warm-up, scores
    at ``warm_up_scores`` instead (a warm-up that misleads the declaration)."""
    names = sorted(rates)
    for _ in range(results):
        i, j = sorted(rng.choice(len(names), size=2, replace=False))
        x, y = names[i], names[j]
        use = warm_up_scores if warm_up_scores is not None and family.declared_at is None else rates
        family.add(x, y, float(rng.random() < use[x]), float(rng.random() < use[y]))


def _claims(family: HolmPairs) -> dict[tuple[str, str], int]:
    """The family's claims: pair -> decision (1: B better, -1: A better)."""
    return {(c.policy_a, c.policy_b): int(family.decision(j)) for j, c in enumerate(family.comparisons)
            if family.decision(j) != 0}


def _partial_null(rng: np.random.Generator, rates: dict[str, float], alpha: float, runs: int, results: int,
                  warm_up_scores: dict[str, float] | None = None) -> Iterator[tuple[HolmPairs, dict[tuple[str, str], int]]]:
    """``runs`` declared families over :data:`SIX` fed by :func:`_null_run`, each with its claims."""
    for _ in range(runs):
        family = HolmPairs(SIX, method="mixture", alpha=alpha)
        _null_run(rng, rates, family, results, warm_up_scores)
        yield family, _claims(family)


def _false(claims: dict[tuple[str, str], int], rates: dict[str, float]) -> list[tuple[str, str]]:
    """The false claims: between equal policies, or in the wrong direction."""
    return [pair for pair, d in claims.items()
            if rates[pair[0]] == rates[pair[1]] or (rates[pair[1]] > rates[pair[0]]) != (d == 1)]


def test_declared_family_keeps_the_familywise_error_under_the_global_null() -> None:
    """Monte Carlo, six equal policies (fair coins) through the declared family, any pairing:
    P(any claim) <= alpha + 2 SE over R runs, alpha = 0.3 (SE = sqrt(alpha (1 - alpha) / R));
    alpha this large keeps R small."""
    alpha, runs, results = 0.3, 120, 500
    rng = np.random.default_rng(20)
    rates = dict.fromkeys(SIX, 0.5)
    claims = 0
    for _ in range(runs):
        family = HolmPairs(SIX, method="mixture", alpha=alpha)
        _null_run(rng, rates, family, results)
        claims += bool(family.decided())
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)
    assert claims / runs <= bound, f"FWE {claims / runs:.3f} (SE {math.sqrt(alpha * (1 - alpha) / runs):.3f}) > {bound:.3f}"


def test_declared_family_keeps_the_familywise_error_when_the_warm_up_swaps_the_order() -> None:
    """Monte Carlo, a partial null whose warm-up lies: policies p0, p1 at 0.8 and p2, p3 at 0.2,
    p4, p5 at 0.5, but during the warm-up p0 and p1 lose and p2 and p3 win, so the declared order's
    heaviest directions are true nulls.  A false claim is any 'better' between equal policies or in
    the wrong direction: P(any false claim) <= alpha + 2 SE, alpha = 0.3; and the warm-up's mistake
    can still be corrected, at the light weights (p0 better than p2 is claimed in some runs)."""
    alpha, runs, results = 0.3, 100, 600
    rng = np.random.default_rng(21)
    rates = {"p0": 0.8, "p1": 0.8, "p2": 0.2, "p3": 0.2, "p4": 0.5, "p5": 0.5}
    lying = {"p0": 0.1, "p1": 0.1, "p2": 0.95, "p3": 0.95, "p4": 0.5, "p5": 0.5}
    false_runs, corrected = 0, 0
    for family, claims in _partial_null(rng, rates, alpha, runs, results, lying):
        assert family.declared_order is not None and set(family.declared_order[:2]) == {"p2", "p3"}
        false_runs += bool(_false(claims, rates))
        corrected += ("p0", "p2") in claims
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)
    assert false_runs / runs <= bound, f"FWE {false_runs / runs:.3f} > {bound:.3f}"
    assert corrected > 0


def test_declared_family_keeps_the_familywise_error_when_its_hedges_are_true_nulls() -> None:
    """Monte Carlo, a partial null where the declared weights hedge on true nulls: three tied pairs
    (p0 = p1 = 0.7, p2 = p3 = 0.4, p4 = p5 = 0.1), so within each tied pair the warm-up's order is a
    coin flip and both directions usually get large weights (the declared one 1, its reverse about
    its posterior probability), all true nulls.  A false claim is any 'better' between equal policies or
    in the wrong direction: P(any false claim) <= alpha + 2 SE, alpha = 0.3; and the true gaps can be
    claimed (p0 better than p2 in some runs)."""
    alpha, runs, results = 0.3, 100, 500
    rng = np.random.default_rng(22)
    rates = {"p0": 0.7, "p1": 0.7, "p2": 0.4, "p3": 0.4, "p4": 0.1, "p5": 0.1}
    false_runs, found, hedged = 0, 0, 0.0
    for family, claims in _partial_null(rng, rates, alpha, runs, results):
        levels = family.engine.levels.reshape(family.m, 2)
        hedged += sum(float(levels[family.index[pair]].min() > 0.05 * levels[family.index[pair]].max())
                      for pair in (("p0", "p1"), ("p2", "p3"), ("p4", "p5")))
        false_runs += bool(_false(claims, rates))
        found += ("p0", "p2") in claims
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)
    assert false_runs / runs <= bound, f"FWE {false_runs / runs:.3f} > {bound:.3f}"
    assert found > 0
    assert hedged > runs  # most tied pairs' reverses weigh more than 1/20 of their declared direction


def _rebuilt_declared(results: list[dict[str, Any]], policies: list[str], alpha: float) -> dict[tuple[str, str], Any]:
    """The declared family rebuilt from the core's pieces, apart from the hub's family code: the
    warm-up's order by mean score, the weights of its counts, one-sided mixture processes at
    ``alpha w`` on the later results, weighted Holm after each; per pair (decided_at_result, better)."""
    from evalstop_ros.stats.adjacency import adjacency_weights
    from evalstop_ros.stats.families import comparison_pairs
    from evalstop_ros.stats.holm import holm

    comparisons = comparison_pairs(sorted(policies))
    index = {(c.policy_a, c.policy_b): j for j, c in enumerate(comparisons)}
    counts, totals, plays = np.zeros(len(comparisons)), dict.fromkeys(policies, 0.0), dict.fromkeys(policies, 0)
    out: dict[tuple[str, str], Any] = {pair: (None, None) for pair in index}
    processes: list[Any] = []
    pvalues = np.ones(2 * len(comparisons))
    weights = np.ones(0)
    for t, body in enumerate(results, 1):
        a, b, sa, sb = body["policy_a"], body["policy_b"], body["score_a"], body["score_b"]
        x, y, sx, sy = (a, b, sa, sb) if a < b else (b, a, sb, sa)
        j = index[(x, y)]
        if not processes:  # the warm-up
            counts[j] += 1
            totals[x] += sx
            totals[y] += sy
            plays[x] += 1
            plays[y] += 1
            if counts.min() >= DECLARE_AFTER:
                order = sorted(policies, key=lambda p: (-totals[p] / plays[p], p))
                weights = adjacency_weights(order, [totals[p] for p in order], [plays[p] for p in order], comparisons)
                processes = [make_process("mixture", 1, alpha=alpha * float(weights[h]),
                                          alternative="greater" if h % 2 == 0 else "less", n_max=None)
                             for h in range(len(weights))]
            continue
        if out[(x, y)][0] is not None:
            continue
        for h in (2 * j, 2 * j + 1):
            processes[h].update(np.array([sx]), np.array([sy]))
            pvalues[h] = float(processes[h].pvalue()[0])
        rejected = holm(pvalues, alpha, weights=weights)
        for (px, py), k in index.items():
            if out[(px, py)][0] is None and rejected[2 * k:2 * k + 2].any():
                out[(px, py)] = (t, py if rejected[2 * k] else px)
    return out


def test_declared_family_through_the_app(database: str, tmp_path: Any) -> None:
    """The real app (SQLite and PostgreSQL) with its default family and schedule: a station leases
    and reports planted results over HTTP until /v1/leaderboard says the ranking is settled; the
    board's family is the declared one, declared after the warm-up, and every pair's claim and the
    result that made it equal the family rebuilt from the journal with the core's pieces."""
    rates = {"hi": 0.9, "mid": 0.5, "lo": 0.1}
    keys, viewer = register_hub(database, rates, ["s1"], "board")
    hub = HubProcess(database, viewer, tmp_path, ["--seed", "5", "--models", "bt"])
    hub.start()
    try:
        board = _station_until_finished(hub.url, keys["s1"], viewer, random.Random(6))
        page = call(hub.url + "/leaderboard", key=viewer)[1]
        journal = hub_journal(hub.url, viewer)
    finally:
        hub.stop()
    family = board["family"]
    assert board["progress"]["settled"] and board["progress"]["order"] == ["hi", "mid", "lo"]
    assert (family["design"], family["procedure"], family["warm_up"]) == ("declared", "sequential weighted Holm",
                                                                          DECLARE_AFTER)
    assert family["declared_at"] == 3 * DECLARE_AFTER  # the uncertain schedule spreads the warm-up evenly
    assert f"declared after result {family['declared_at']}" in page
    results = [e["body"] for e in journal if e["kind"] == "result"][:board["n_results"]]
    rebuilt = _rebuilt_declared(results, list(rates), 0.05)
    shown = {(p["policy_a"], p["policy_b"]): (p["decided_at_result"], p["better"]) for p in board["pairs"]}
    assert shown == rebuilt
    assert all(at is None or at > family["declared_at"] for at, _ in shown.values())
