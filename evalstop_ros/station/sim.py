"""A simulated hub station without ROS: ``evalstop hub station``, the hub demo and the hub tests.

:func:`run_station` drives a station's session (:class:`~.session.StationSession`, kept
supplied by :class:`~.work.StationWork`) with the session's trial loop
(:class:`~evalstop_ros.session.driver.TrialDriver`), exactly as the ``station_manager`` node
does, on a simulated robot instead of a runner node: a policy server ``sim://success=P``
(:func:`~.client.sim_address_rate`) succeeds with probability ``P`` and the robot scores each
run itself (``scoring: auto``). Leases, renewals, the local journal and the uploads are the
work's (its hub thread retries while the hub is unreachable; nothing journaled is lost when the
process is killed). What it prints (the operator's view) names the arms ``A`` and ``B`` only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from ..hub.errors import HubError
from ..session.driver import Action, TrialDriver
from .client import StationClient, sim_address_rate
from .work import StationWork

__all__ = ["ArmRunner", "run_station", "sim_runner"]

#: One arm's run on a simulated robot: (policy-server address, task, rng) -> its score in [0, 1].
ArmRunner = Callable[[str, str, random.Random], float]

#: How often the loop looks at the work while it waits for it (s).
POLL = 0.02


def sim_runner(trial_seconds: float) -> ArmRunner:
    """A simulated robot: an arm of policy server ``sim://success=P`` succeeds (score 1) with
    probability ``P``, else fails (score 0); an episode of one arm takes ``trial_seconds / 2``."""

    def run(address: str, task: str, rng: random.Random) -> float:
        rate = sim_address_rate(address)
        if rate is None:
            raise HubError("the simulated runner drives sim://success=P policies only; this arm's is not one")
        time.sleep(trial_seconds / 2)
        return 1.0 if rng.random() < rate else 0.0

    return run


def run_station(client: StationClient, trials: int, runner: ArmRunner, *, seed: int | None = None,
                retry_seconds: float = 0.5, deadline_seconds: float = 600.0,
                say: Callable[[str], None] = print) -> int:
    """Run ``trials`` hub assignments (counting earlier runs in the local journal); returns how
    many results the hub has acknowledged. :class:`HubError` if they are not all journaled and
    settled with the hub within ``deadline_seconds``."""
    rng = random.Random(seed)
    work = StationWork(client, client.directory.name, trials=trials, retry_min=min(0.2, retry_seconds),
                       retry_max=max(3.0, retry_seconds))
    driver = TrialDriver(work.session, "sim")
    give_up = time.monotonic() + deadline_seconds
    told = ""
    work.start()
    try:
        while not work.finished:
            if time.monotonic() > give_up:
                raise HubError(f"station did not finish {trials} trials in {deadline_seconds:g} s")
            status = work.status()
            if status.problem and status.problem != told:
                say(f"hub unreachable; {status.results_pending} result(s) kept locally, retrying" if status.unreachable
                    else f"hub refuses ({status.problem}); retrying")
            told = status.problem
            step = driver.advance()
            if step.action is not Action.RUN or step.trial is None:
                time.sleep(POLL)
                continue
            trial = step.trial
            if trial.label == "A":
                say(f"trial {status.trials_done + 1}/{trials}: task {trial.task}, arms A then B")
            started = time.monotonic()
            score = runner(trial.policy_id, trial.task, rng)
            driver.run_done(trial, True, time.monotonic() - started, auto_score=(score == 1.0, score))
            say(f"  arm {trial.label}: score {score:g}")
    finally:
        work.close()
    return work.status().results_acked
