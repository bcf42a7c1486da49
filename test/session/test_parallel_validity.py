"""Valid under parallelism (docs/parallel.md): with durations that depend on the outcome, a test fed in
plan order keeps its level whatever the number of runners, one fed in completion order does not, and
sessions served by several runners keep their family-wise error (Monte Carlo, bounds stated)."""

from __future__ import annotations

import math
import pathlib

import parallel_sim
import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession, SessionState
from evalstop_ros.session.driver import Action, TrialDriver

ALPHA = 0.05


def two_se(rate: float, n: int) -> float:
    return 2 * math.sqrt(rate * (1 - rate) / n)


@pytest.mark.parametrize("method", ["nscore", "step"])
def test_plan_order_keeps_the_level_and_completion_order_does_not(method: str) -> None:
    """4000 null sequences at p = 0.5, 8 runners: plan order <= alpha + 2 SE (SE at alpha, 0.0069);
    completion order above alpha + 2 SE (bench/parallel_order.py: 0.12 and 0.14 with 2000)."""
    n = 4000
    rates = parallel_sim.rejection_rates(method, 0.5, 8, n, 100, ALPHA, seed=11)
    bound = ALPHA + two_se(ALPHA, n)
    assert rates["plan"] <= bound
    assert rates["completion"] > bound + two_se(rates["completion"], n)
    # and the same plan order on one runner is the serial session's
    assert parallel_sim.rejection_rates(method, 0.5, 1, 500, 100, ALPHA, seed=11)["plan"] == pytest.approx(
        parallel_sim.rejection_rates(method, 0.5, 32, 500, 100, ALPHA, seed=11)["plan"])


#: Three equal policies, all pairs, STEP (exact at its looks: the tightest of the methods) under Bonferroni:
#: 0.06 / 3 = 0.02 per comparison, 0.01 per direction, at n_max 20 (its table synthesized on first use, in
#: milliseconds): a session of 60 trials costs 0.4 of one at n_max 50, and feeding in completion order
#: inflates STEP's level at least as much there (parallel_sim, 4 runners, 4000 null sequences at 0.01 one
#: direction: 0.0085 in plan order, 0.0295 in completion order; 0.011 and 0.0225 at n_max 50).
FAMILY_ALPHA = 0.06
NULL_FAMILY = {
    "policies": ["a", "b", "c"], "scoring": "auto", "n_max": 20, "alpha": FAMILY_ALPHA, "comparisons": "all-pairs",
    "metrics": [{"name": "success", "method": "step"}], "runner": {"runners": ["r1", "r2", "r3", "r4"]},
}


def episode_s(policy: str, success: bool, trial_id: int) -> float:
    """A success ends at once; a failure of ``a`` is caught fast, of the others runs to the timeout."""
    base = 2.0 if success else (1.0 if policy == "a" else 10.0)
    return base + sim._uniform("jitter", trial_id)


def null_session(path: pathlib.Path, seed: int) -> bool:
    """One session of three equal policies (success 0.5) on four runners; whether any comparison decided."""
    config = sim.make_config(**{**NULL_FAMILY, "seed": seed})
    outcome = {"a": 0.5, "b": 0.5, "c": 0.5}
    with EvaluationSession.open(path, config, "s1", durable=False, plan_key=seed.to_bytes(32, "big")) as session:
        session.start()
        driver = TrialDriver(session, runners=config.runner.actions)
        clock, running = 0.0, {}
        while not driver.finished:
            for work in driver.dispatch():
                assert work.action is Action.RUN
                success, _ = sim.outcome(work.trial.policy_id, seed * 10**6 + work.trial.trial_id, outcome)
                running[work.runner] = (clock + episode_s(work.trial.policy_id, success, work.trial.trial_id),
                                        work.trial, success)
            runner = min(running, key=lambda r: running[r][0])
            clock, trial, success = running.pop(runner)
            driver.run_done(trial, True, 1.0, auto_score=(success, float(success)), runner=runner)
        assert session.state == SessionState.FINISHED
        return any(c.decision.name in ("A_BETTER", "B_BETTER") for c in session.comparisons())


def test_sessions_on_four_runners_keep_the_family_wise_error(tmp_path: pathlib.Path) -> None:
    """300 sessions of three equal policies (all pairs, STEP, Bonferroni at 0.06) on four runners with
    outcome-dependent durations: FWE <= alpha + 2 SE (SE at alpha, 0.0137; 11/300 = 0.037 measured)."""
    n = 300
    errors = sum(null_session(tmp_path / f"s{seed}.db", seed) for seed in range(1, n + 1))
    assert errors / n <= FAMILY_ALPHA + two_se(FAMILY_ALPHA, n)
