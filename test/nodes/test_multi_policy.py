"""Sessions of more than two policies over DDS: sequential Holm, multi-task claims.

evaluation_manager and sim_robot run as processes (auto scoring); the final ``SessionStatus``
must carry exactly the offline re-analysis of the journal: every test's decision
(``offline_decisions``), the claim rows (``offline_claims``) and the letters (``offline_letters``).
sim_robot's outcomes are a pure function of (seed, session, policy, trial), so every run of a
test sees the same scores. An AdaStop session's rows are the same rows in the same message: its
decisions, letters and offline equivalence are checked on the session, without node processes
(test/session/test_session_adastop.py, the relabel scheme included).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from nodes_support import final_status, public_view, same_float, write_config

pytestmark = pytest.mark.usefixtures("ros_env")

AGENTS = ["agent_1", "agent_2", "agent_3", "agent_4", "agent_5"]
#: Mean progress per agent (success rate 0: every rollout's progress is Beta with this mean).
MEANS = [0.15, 0.45, 0.5, 0.9]


def _collect(probe: Any) -> dict[str, list[Any]]:
    from evalstop.msg import ComparisonStatus, SessionStatus

    from evalstop_ros import qos

    return {"status": probe.collect(SessionStatus, "session_status", qos.STATUS_QOS),
            "comparison": probe.collect(ComparisonStatus, "comparison_status", qos.COMPARISON_QOS)}


def _sim_params(policies: list[str], means: list[float]) -> dict[str, Any]:
    return {"policies": policies, "success_rates": [0.0] * len(policies), "progress_means": means, "duration": 0.0}


def _manager_params(tmp_path: pathlib.Path, config: pathlib.Path) -> dict[str, Any]:
    return {"config_file": str(config), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
            "journal_fsync": False, "exit_on_finish": True, "exit_linger": 0.5}


def _assert_matches_offline(final: Any, config_path: pathlib.Path, journal: pathlib.Path) -> list[Any]:
    """The final status's tests and letters equal the offline re-analysis; returns the test rows."""
    from evalstop_ros.session import load_config, offline_decisions, offline_letters

    config = load_config(config_path)
    tests = [c for c in final.comparisons if c.task != "*"]
    offline = offline_decisions(config, journal)
    assert [(o.policy_a, o.policy_b, o.metric, o.task) for o in offline] == \
        [(c.policy_a, c.policy_b, c.metric, c.task) for c in tests]
    for live, o in zip(tests, offline):
        result = o.result
        assert (live.decision, live.stopping_trial, live.n) == \
            (int(result.decision), result.stopping_trial or 0, result.n_observed), (live, o)
        if result.pvalues.size:
            assert same_float(live.pvalue, float(result.pvalue)), (live.pvalue, result.pvalue)
    letters = offline_letters(config, journal)
    assert dict(zip(final.letter_policies, final.letters)) == letters and letters
    return tests


def test_four_policies_sequential_holm_matches_the_offline_analysis(
        start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    # progress by N-SCORE, sequential Holm over the 6 pairs at 0.05: agent_4 (0.9) beats
    # everyone early and leaves the rotation; agent_2 vs agent_3 (0.45 vs 0.5) runs to n_max.
    policies = AGENTS[:4]
    config = write_config(tmp_path / "holm.yaml", policies=policies, correction="holm", alpha=0.05, n_max=30,
                          metrics=[{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}])
    topics = _collect(probe)
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config))
    probe.hear()  # then the runner: the session cannot start before the probe hears the manager
    start_node("sim_robot", params=_sim_params(policies, MEANS))
    final = final_status(probe, topics["status"], timeout=180.0)
    assert manager.wait() == 0
    assert final.state_name == "finished" and list(final.active_tasks) == []
    tests = _assert_matches_offline(final, config, tmp_path / "journals" / "s1.db")
    assert len(tests) == 6 and all(c.task == "" for c in final.comparisons)
    decisions = {(c.policy_a, c.policy_b): c.decision for c in tests}
    assert decisions[("agent_2", "agent_3")] == 3, "0.45 vs 0.5 should not decide within 30 pairs"
    assert all(decisions[(a, "agent_4")] == 1 for a in policies[:3]), decisions
    # agent_4 left the rotation once its three comparisons were decided, and never came back
    # (the running statuses name stand-ins only: session/public_view.py)
    view = public_view(tmp_path / "journals" / "s1.db")
    running = [s for s in topics["status"] if s.state == 1]
    active = [[view.restore(p) for p in s.active_policies] for s in running]
    assert not {p for s in running for p in s.active_policies} & set(policies) and any("agent_4" in a for a in active)
    dropped_at = next(i for i, a in enumerate(active) if a and "agent_4" not in a)
    assert all("agent_4" not in a for a in active[dropped_at:])
    assert all(list(s.active_tasks) == ["push"] for s in running)
    # comparison_status carried every final decision
    expected = {(c.policy_a, c.policy_b, c.decision) for c in tests}
    probe.spin_until(lambda: expected <= {(c.policy_a, c.policy_b, c.decision) for c in topics["comparison"]},
                     10.0, "every decision on comparison_status")


def test_multi_task_claim_rows_match_the_offline_claims(start_node: Any, probe: Any, tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session import load_config, offline_claims

    # two tasks, claim "every" (intersection-union): one test per pair x task, then one "*" row
    tasks = [{"id": t, "description": f"Task {t}.",
              "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Spot {i}."} for i in range(2)]}
             for t in ("push", "pick")]
    policies = AGENTS[:3]
    config = write_config(tmp_path / "every.yaml", policies=policies, tasks=tasks, claim="every", alpha=0.1,
                          n_max=15, metrics=[{"name": "progress", "method": "nscore", "alpha": 0.1, "bins": 21,
                                              "alternative": "greater"}])
    topics = _collect(probe)
    manager = start_node("evaluation_manager", params=_manager_params(tmp_path, config))
    probe.hear()  # then the runner: the session cannot start before the probe hears the manager
    start_node("sim_robot", params=_sim_params(policies, [0.15, 0.5, 0.9]))
    final = final_status(probe, topics["status"], timeout=180.0)
    assert manager.wait() == 0
    journal = tmp_path / "journals" / "s1.db"
    tests = _assert_matches_offline(final, config, journal)
    assert [c.task for c in tests] == ["push", "pick"] * 3
    claims = [c for c in final.comparisons if c.task == "*"]
    offline = offline_claims(load_config(config), journal)
    assert [(o.policy_a, o.policy_b, o.metric) for o in offline] == [(c.policy_a, c.policy_b, c.metric) for c in claims]
    for live, o in zip(claims, offline):
        assert live.decision == (1 if o.result.established else 3), (live, o.result)
        assert live.n == o.result.n_trials and live.stopping_trial == 0
    assert any(c.decision == 1 for c in claims)
    # the claim rows went out on comparison_status too
    expected = {(c.policy_a, c.policy_b, c.decision) for c in claims}
    probe.spin_until(lambda: expected <= {(c.policy_a, c.policy_b, c.decision) for c in topics["comparison"]
                                          if c.task == "*"}, 10.0, "the claim rows on comparison_status")
