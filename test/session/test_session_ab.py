"""Tests of ``design: ab`` sessions (RoboArena's A/B protocol, seed 001 Alg. 1) and their A/B rounds.

The session runs through the real :class:`EvaluationSession` and journal (driven by the audit's
simulated lab, as the manager node drives it); the rounds are read back from the journal and
from a rosbag written from the messages the manager would publish.
"""

from __future__ import annotations

import collections
import json
import pathlib
from typing import Any

import pytest
from audit_support import cli_in_process

from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.session import EvaluationSession, PendingTrial, ScoreOutcome, offline_decisions
from evalstop_ros.session.ab import ab_rounds
from evalstop_ros.session.blinding import revealed_key
from evalstop_ros.session.config import ConfigError, parse_config
from evalstop_ros.session.errors import SessionError
from evalstop_ros.session.journal import Journal, read_journal
from evalstop_ros.session.plan import Plan

TASKS = [{"id": "cup", "description": "put the cup in the bowl",
          "initial_conditions": [{"id": "left", "reset_instructions": "cup left"},
                                 {"id": "right", "reset_instructions": "cup right"}]}]
RATES = {"a": 0.85, "b": 0.5, "c": 0.15}


def ab_config(**extra: object):
    return parse_config({"policies": ["a", "b", "c"], "seed": 5, "design": "ab", "blinding": "per-round",
                         "n_max": 30, "tasks": TASKS, **extra})


def test_config_accepts_ab_and_refuses_per_task_claims() -> None:
    assert ab_config().design == "ab"
    with pytest.raises(ConfigError, match="design 'ab' pools the tasks"):
        ab_config(claim="every", metrics=[{"name": "success", "alternative": "greater"}])


def test_plan_draws_each_pair_and_both_orders_reproducibly() -> None:
    plan = Plan(ab_config())
    pairs = (("a", "b"), ("a", "c"), ("b", "c"))
    draws = [plan.ab_pair(r, pairs) for r in range(1, 601)]
    assert draws == [Plan(ab_config()).ab_pair(r, pairs) for r in range(1, 601)]  # pure function of (seed, round)
    counts = collections.Counter(draws)
    assert len(counts) == 6  # every pair in both orders
    assert all(70 <= n <= 130 for n in counts.values()), counts  # 100 expected each; > 4 SD away is a bug
    assert plan.ab_pair(7, (("b", "c"),)) in (("b", "c"), ("c", "b"))
    with pytest.raises(ValueError, match="no pair"):
        plan.ab_pair(1, ())


def run_session(tmp_path: pathlib.Path, **extra: object):
    config = ab_config(**extra)
    messages = simulate_recording(config, SimulatedLab(RATES, seed=2), workdir=tmp_path)
    return config, messages, read_journal(tmp_path / "sim.db")


def test_every_round_runs_one_open_pair_from_one_condition(tmp_path: pathlib.Path) -> None:
    config, _, contents = run_session(tmp_path)
    requested = [e for e in contents.events if e.kind == "trial_requested"]
    rounds: dict[int, list[dict[str, object]]] = collections.defaultdict(list)
    for event in requested:
        rounds[int(event.payload["round"])].append(event.payload)
    for number, trials in rounds.items():
        assert len({t["policy_id"] for t in trials}) == 2, (number, trials)
        assert len({(t["task"], t["initial_condition"]) for t in trials}) == 1
    decided_at = {}
    for event in contents.events:
        if event.kind == "decision":
            decided_at.setdefault(frozenset((event.payload["policy_a"], event.payload["policy_b"])), []).append(event.seq)
    # a pair whose two tests are both decided is never drawn again
    for pair, seqs in decided_at.items():
        if len(seqs) == len(config.metrics):
            later = [e for e in requested if e.seq > max(seqs) and e.payload["rerun_of"] is None]
            drawn = {frozenset(t["policy_id"] for t in rounds[int(e.payload["round"])]) for e in later}
            assert pair not in drawn
    assert [e.kind for e in contents.events][-2:] == ["finished", "key_revealed"]


def test_rounds_become_comparisons_with_preferences(tmp_path: pathlib.Path) -> None:
    config, _, contents = run_session(tmp_path)
    rounds = ab_rounds(config, contents.events)
    assert rounds.n_incomplete == 0 and len(rounds.data) == len(rounds.rounds) > 20
    data = rounds.data
    for n in range(len(data)):
        gap = data.progress_a[n] - data.progress_b[n]
        expected = 1 if abs(gap) < 0.05 else (2 if gap > 0 else 0)  # SimulatedLab.preference
        assert data.outcome[n] == expected
    assert set(data.tasks) == {"put the cup in the bowl"}  # no instruction stated: the task's description
    with pytest.raises(SessionError, match="design 'ab'"):
        ab_rounds(parse_config({"policies": ["a", "b"], "seed": 1, "tasks": TASKS}), contents.events)


def _run_and_score(session: EvaluationSession, *score: Any, **options: Any) -> tuple[PendingTrial, ScoreOutcome]:
    """The next trial runs (the runner reports success) and is scored ``submit_score(trial, token, *score,
    **options)``; (the trial, the score's outcome)."""
    trial = session.next_trial()
    assert trial is not None
    session.record_runner_result(trial.trial_id, True, 1.0, "")
    return trial, session.submit_score(trial.trial_id, trial.token, *score, **options)


def test_a_round_without_both_scores_or_a_preference_is_set_aside(tmp_path: pathlib.Path) -> None:
    config = ab_config()
    with Journal.open(tmp_path / "s.db", "s", config, durable=False) as journal:
        session = EvaluationSession(config, journal, "s")
        session.start()
        for number in range(3):
            first, _ = _run_and_score(session, True, 1.0, "op", "")
            preference = {0: first.label, 1: "", 2: "="}[number]
            second, _ = _run_and_score(session, False, 0.3, "op", f"note {number}", preference=preference)
            assert second.round == first.round
        third = session.next_trial()  # round 4: only its first trial runs
        assert third is not None
        events = session.events()  # the owner's view (the rows seal the policies)
    rounds = ab_rounds(config, events)
    assert rounds.rounds == (1, 3) and rounds.n_incomplete == 2
    assert rounds.data.outcome.tolist() == [2, 1]  # A preferred, then a tie
    assert rounds.explanations == ("note 0", "note 2")


def _rank(source: pathlib.Path, model: str) -> dict[str, Any]:
    """``evalstop rank SOURCE --model MODEL --json`` in this process (:func:`audit_support.cli_in_process`;
    the installed script's own test is in test_cli_rank): its JSON."""
    done = cli_in_process("rank", str(source), "--model", model, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def ranked_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """One session's messages and its journal's rankings (``bt``, ``task``): each storage's bag of
    those messages is ranked against them (the journal is read, never written, by the rankings)."""
    root = tmp_path_factory.mktemp("ab-rank")
    _, messages, _ = run_session(root)
    return messages, {model: _rank(root / "sim.db", model) for model in ("bt", "task")}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_rank_from_journal_and_bag_agree(ranked_journal: tuple[list[Any], dict[str, dict[str, Any]]],
                                         tmp_path: pathlib.Path, storage: str) -> None:
    messages, from_journal = ranked_journal
    bag = write_bag(tmp_path / "bag", messages, storage=storage)
    for model in ("bt", "task"):
        from_bag = _rank(bag, model)
        assert from_journal[model] == from_bag
        assert [row["policy"] for row in from_bag["ranking"]] == ["a", "b", "c"]


def test_fewest_pairing_keeps_the_pairs_balanced(tmp_path: pathlib.Path) -> None:
    # with equal policies nothing is decided early: every pair stays open, and "by need" draws
    # keep the round counts of the pairs within one of each other at every point
    config = ab_config(ab_pairing="fewest", n_max=15)
    simulate_recording(config, SimulatedLab({"a": 0.5, "b": 0.5, "c": 0.5}, seed=4), workdir=tmp_path)
    events = read_journal(tmp_path / "sim.db").events
    members: dict[int, set[str]] = collections.defaultdict(set)
    counts: collections.Counter[frozenset[str]] = collections.Counter()
    for event in events:
        if event.kind == "trial_requested" and event.payload["rerun_of"] is None:
            number = int(event.payload["round"])
            members[number].add(str(event.payload["policy_id"]))
            if len(members[number]) == 2:
                counts[frozenset(members[number])] += 1
                open_counts = [counts[frozenset(p)] for p in (("a", "b"), ("a", "c"), ("b", "c"))]
                assert max(open_counts) - min(open_counts) <= 1, counts
    assert sum(counts.values()) >= 30


def test_ab_pairing_needs_design_ab() -> None:
    assert ab_config().to_dict()["ab_pairing"] == "uniform"  # the default, written out
    with pytest.raises(ConfigError, match="`ab_pairing` applies only to design 'ab'"):
        parse_config({"policies": ["a", "b"], "seed": 1, "tasks": TASKS, "ab_pairing": "fewest"})


def test_weighted_plan_draws_the_first_policy_by_weight_and_its_partner_uniformly() -> None:
    # the released RoboArena server's draw: P(first = p) = w_p / sum(w), then a uniform partner
    plan = Plan(ab_config(ab_pairing="ucb"))
    pairs = (("a", "b"), ("a", "c"), ("b", "c"))
    weights = {"a": 6.0, "b": 1.0, "c": 1.0}
    draws = [plan.ab_pair(r, pairs, weights) for r in range(1, 2001)]
    with_a = sum("a" in pair for pair in draws)
    # P(a in the pair) = 6/8 + 2 * (1/8) * (1/2) = 0.875; SD of the count ~ 14.8, bound at 5 SD
    assert abs(with_a - 0.875 * 2000) < 75, with_a
    assert draws == [Plan(ab_config(ab_pairing="ucb")).ab_pair(r, pairs, weights) for r in range(1, 2001)]
    assert collections.Counter(draws)[("b", "c")] + collections.Counter(draws)[("c", "b")] > 0


def test_ucb_weight_is_the_released_servers() -> None:
    # central_server: w = (U / (n + 1)) ** 0.8 if n < U else 1, U = ucb_times_threshold = 500
    assert Plan.ucb_weight(0, 500) == pytest.approx(144.2700, abs=1e-4)
    assert Plan.ucb_weight(99, 500) == pytest.approx(5.0 ** 0.8)
    assert Plan.ucb_weight(499, 500) == 1.0 and Plan.ucb_weight(500, 500) == 1.0 and Plan.ucb_weight(7000, 500) == 1.0


def test_ucb_pairing_weights_each_policy_by_its_rounds_so_far(tmp_path: pathlib.Path) -> None:
    # every round's pair is the weighted draw with w = (U / (n + 1)) ** 0.8 (n < U, else 1), n the
    # rounds the policy was in before: recomputed here from the journal, independently of the session
    threshold = 40
    config = ab_config(ab_pairing="ucb", ab_ucb_threshold=threshold, n_max=40)
    simulate_recording(config, SimulatedLab({"a": 0.5, "b": 0.5, "c": 0.5}, seed=4), workdir=tmp_path)
    members: dict[int, list[str]] = collections.defaultdict(list)
    events = read_journal(tmp_path / "sim.db").events
    key, problem = revealed_key(events, "sim")
    assert key is not None, problem
    for event in events:
        if event.kind == "trial_requested" and event.payload["rerun_of"] is None:
            members[int(event.payload["round"])].append(str(event.payload["policy_id"]))
    plan, pairs = Plan(config, key), (("a", "b"), ("a", "c"), ("b", "c"))  # equal policies: none decided
    seen: collections.Counter[str] = collections.Counter()
    per_pair: collections.Counter[frozenset[str]] = collections.Counter()
    for number in sorted(members):
        if max(per_pair.values(), default=0) == config.n_max:
            break  # a pair is out of budget: the draw is among the others from here
        weights = {p: (threshold / (seen[p] + 1)) ** 0.8 if seen[p] < threshold else 1.0 for p in "abc"}
        assert tuple(members[number]) == plan.ab_pair(number, pairs, weights)
        seen.update(members[number])
        per_pair[frozenset(members[number])] += 1
    assert sum(per_pair.values()) >= 80 and min(seen.values()) > threshold  # both branches of the weight were used
    with pytest.raises(ConfigError, match="`ab_ucb_threshold` applies only to `ab_pairing: ucb`"):
        ab_config(ab_ucb_threshold=10)


def test_a_pair_judged_not_valid_counts_in_no_test_and_no_ranking(tmp_path: pathlib.Path) -> None:
    # seed 001 §3.1: only valid A/B evaluations count; the operator states the instruction they gave
    config = ab_config(n_max=5)
    with Journal.open(tmp_path / "s.db", "s", config, durable=False) as journal:
        session = EvaluationSession(config, journal, "s")
        session.start()
        for number in range(4):
            first, scored = _run_and_score(session, True, 1.0, "op", "", instruction=f"stack block {number}")
            assert scored.accepted
            invalid = number in (1, 2)
            second, scored = _run_and_score(session, False, 0.2, "op", f"why {number}", preference=first.label,
                                            pair_invalid=invalid)
            assert scored.accepted and second.round == first.round
            # an invalid round adds no pair to its comparison's tests
            assert sum(c.n for c in session.comparisons()) == [1, 1, 1, 2][number] * len(config.metrics)
        events = session.events()  # the owner's view (the rows seal the policies)
    rounds = ab_rounds(config, events)
    assert rounds.rounds == (1, 4) and rounds.n_invalid == 2 and rounds.n_incomplete == 0
    assert rounds.data.tasks == ("stack block 0", "stack block 3")
    assert rounds.explanations == ("why 0", "why 3")
    offline = offline_decisions(config, tmp_path / "s.db")  # the offline re-analysis agrees
    assert sum(o.result.n_observed for o in offline) == 2 * len(config.metrics)


def test_instruction_and_validity_are_refused_outside_design_ab(tmp_path: pathlib.Path) -> None:
    config = parse_config({"policies": ["a", "b"], "seed": 1, "tasks": TASKS, "n_max": 5})
    with Journal.open(tmp_path / "p.db", "p", config, durable=False) as journal:
        session = EvaluationSession(config, journal, "p")
        session.start()
        trial = session.next_trial()
        assert trial is not None
        session.record_runner_result(trial.trial_id, True, 1.0, "")
        outcome = session.submit_score(trial.trial_id, trial.token, True, 1.0, "op", "", pair_invalid=True)
        assert not outcome.accepted and "apply only to design 'ab'" in outcome.reason
        too_long = session.submit_score(trial.trial_id, trial.token, True, 1.0, "op", "", instruction="x" * 501)
        assert not too_long.accepted and "`instruction` is longer than 500" in too_long.reason
        assert session.submit_score(trial.trial_id, trial.token, True, 1.0, "op", "").accepted
