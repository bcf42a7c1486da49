"""Helpers of the session tests: configurations, a deterministic simulated lab, and a driver
(the manager's trial loop, :class:`~evalstop_ros.session.driver.TrialDriver`).

Also runnable as a script (``python session_sim.py JOURNAL SESSION_ID [SCENARIO]``): it drives a
crash test's session (:data:`SCENARIOS`) until the end, so that the test can SIGKILL it at any point.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from evalstop_ros.session import EvaluationSession, ScoreOutcome, SessionConfig, SessionError, parse_config
from evalstop_ros.session.driver import Action, TrialDriver

BASE: dict[str, Any] = {
    "policies": ["pi0", "pi1"],
    "seed": 11,
    # alpha 0.1 split evenly over success/progress gives each two-policy comparison 0.05: the
    # two-sided STEP table it needs (per direction 0.025) ships for n_max 50/100/200/500.
    "alpha": 0.1,
    "n_max": 50,
    "tasks": [{
        "id": "push",
        "description": "Push the block onto the target.",
        "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Block at spot {i}."} for i in range(3)],
    }],
}

#: Success rates of the crash-test session: STEP decides at pair 40, N-SCORE runs out at 50 (100 trials).
#: A fixed randomization key for tests that compare two sessions (a live session draws its own).
TEST_KEY = hashlib.sha256(b"evalstop test key2").digest()
CRASH_RATES = {"pi0": 0.3, "pi1": 0.6}
CRASH_SESSION = {"seed": 5}

#: Five agents under AdaStop (5 trials per agent per interim, at most 6 interims), progress only.
#: B = 200 permutation paths keeps the tests fast; the preset uses 10**4.
AGENTS = [f"agent_{i}" for i in range(1, 6)]
ADASTOP_SESSION: dict[str, Any] = {
    "policies": AGENTS, "design": "adastop", "alpha": 0.05, "seed": 7, "metrics": [{"name": "progress"}],
    "adastop": {"n_per_interim": 5, "n_interims": 6, "n_permutations": 200},
}
#: Mean progress of each agent (agent_2 and agent_3 tie).
ADASTOP_MEANS = {"agent_1": 0.3, "agent_2": 0.5, "agent_3": 0.5, "agent_4": 0.6, "agent_5": 0.9}


def make_config(**overrides: Any) -> SessionConfig:
    """``BASE`` with top-level keys replaced."""
    return parse_config({**BASE, **overrides})


def _uniform(*keys: object) -> float:
    digest = hashlib.sha256(repr(keys).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def outcome(policy: str, trial_id: int, rates: dict[str, float]) -> tuple[bool, float]:
    """The lab's result of one trial: a pure function of policy and trial id."""
    success = _uniform("success", policy, trial_id) < rates[policy]
    progress = 1.0 if success else round(0.8 * _uniform("progress", policy, trial_id), 3)
    return success, progress


def progress_outcome(policy: str, trial_id: int, means: Mapping[str, float]) -> tuple[bool, float]:
    """A progress-scored lab: uniform within +-0.25 of the policy's mean, success at 0.5."""
    progress = round(min(1.0, max(0.0, means[policy] + 0.5 * (_uniform("spread", policy, trial_id) - 0.5))), 3)
    return progress >= 0.5, progress


#: A lab: success rates (:func:`outcome`) or any ``(policy, trial id) -> (success, progress)``.
Lab = dict[str, float] | Callable[[str, int], tuple[bool, float]]


def run_fails(trial_id: int, attempt: int, every: int) -> bool:
    """Whether a run fails (the runner's fault, not the policy's): about one in ``every``."""
    return every > 0 and attempt == 1 and _uniform("fault", trial_id) < 1.0 / every


def step(session: EvaluationSession, rates: Lab, *, fail_every: int = 0,
         resend: Callable[[int], bool] = lambda trial_id: False,
         sent: dict[str, tuple[int, str, bool, float]] | None = None) -> ScoreOutcome | None:
    """One operator/runner action on ``session`` through the manager's trial loop
    (:class:`~evalstop_ros.session.driver.TrialDriver`); ``None`` once the session is over.

    Runs the pending trial if the loop says so (journaling its runner result, the fault limit
    applied), confirms its reset if it waits for one, otherwise scores it.  ``resend(t)`` true
    means the score of trial ``t`` is sent twice (a retransmission).  ``sent["last"]`` is set to
    each score just before it is sent.

    Raises
    ------
    SessionError
        If the session is idle or paused (no trial can be issued).
    """
    driver = TrialDriver(session)
    upcoming = driver.advance()
    if upcoming.action is Action.DONE:
        return None
    if upcoming.action is Action.WAIT or upcoming.trial is None:
        raise SessionError(f"cannot step: session {session.session_id!r} is {session.state.value}")
    trial = upcoming.trial
    if upcoming.action is Action.RESET:
        confirmed = session.confirm_reset(trial.trial_id, trial.attempt)
        return ScoreOutcome(confirmed.applied, False, "reset")
    if upcoming.action is Action.RUN:
        ok = not run_fails(trial.trial_id, trial.attempt, fail_every)
        driver.run_done(trial, ok, 1.5, "" if ok else "arm fault")
        return ScoreOutcome(True, False, "ran")
    if callable(rates):
        success, progress = rates(trial.policy_id, trial.trial_id)
    else:
        success, progress = outcome(trial.policy_id, trial.trial_id, rates)
    if sent is not None:
        sent["last"] = (trial.trial_id, trial.token, success, progress)
    result = session.submit_score(trial.trial_id, trial.token, success, progress, operator="sim")
    assert result.accepted, result
    if resend(trial.trial_id):
        again = session.submit_score(trial.trial_id, trial.token, success, progress, operator="sim")
        assert again.duplicate, again
    return result


def drive(session: EvaluationSession, rates: Lab, **options: Any) -> None:
    """Run ``session`` (already started) to its end."""
    while step(session, rates, **options) is not None:
        pass


def audit_verified(source: Any, **options: Any) -> Any:
    """``evalstop_ros.audit.audit(source, **options)``, asserted verified (its violations' messages
    otherwise); the report."""
    from evalstop_ros.audit import audit  # not at import: the crash tests run this module as a script

    report = audit(source, **options)
    assert report.verified, [v.message for v in report.violations]
    return report


def adastop_lab(policy: str, trial_id: int) -> tuple[bool, float]:
    """The lab of the AdaStop sessions (:data:`ADASTOP_MEANS`)."""
    return progress_outcome(policy, trial_id, ADASTOP_MEANS)


#: Crash-test sessions: configuration overrides and lab.
SCENARIOS: dict[str, tuple[dict[str, Any], Lab]] = {
    "step": (CRASH_SESSION, CRASH_RATES),
    "adastop": (ADASTOP_SESSION, adastop_lab),
}


def main(argv: list[str]) -> int:
    """Drive the crash-test session in ``argv[0]`` (durable journal; scenario ``argv[2]``) to the end."""
    path, session_id, *rest = argv
    overrides, lab = SCENARIOS[rest[0] if rest else "step"]
    config = make_config(**overrides)
    with EvaluationSession.open(path, config, session_id, plan_key=TEST_KEY) as session:
        if session.state.value == "idle":
            session.start()
        drive(session, lab, fail_every=7)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
