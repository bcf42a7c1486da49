"""``evalstop sim-eval``'s loop: an evaluation session whose trials are robosuite rollouts on Ray workers.

The session is an ordinary :class:`~evalstop_ros.session.EvaluationSession` with its journal,
moved on by the one trial loop (:class:`~evalstop_ros.session.driver.TrialDriver`): the same
schedule, tests, multi-task claims, fault rule and key reveal as a robot session, so ``evalstop
report`` and ``evalstop audit`` read its journal as any other. This module only plays the runner:
each trial the driver issues becomes a :class:`~.rollout.RolloutRequest` on a worker
(:class:`~.ray_pool.RayPool`), and each outcome goes back through
:meth:`~evalstop_ros.session.driver.TrialDriver.run_done` with the simulator's score (``scoring:
auto``). A failed rollout (a worker that died, a policy server that did not answer) is journaled
as a runner fault with its category and an error id; its full text goes to the private error log
(:class:`~evalstop_ros.runner.errors.ErrorLog`). At the fault limit the session pauses, and
sim-eval, having no operator to fix anything, aborts it with the reason.

Several workers run at once through the driver's parallel dispatch (one runner per worker,
``runner.runners``; :meth:`~evalstop_ros.session.driver.TrialDriver.dispatch`): a round stays on
one worker, each result is journaled when it arrives, and scores enter the tests in the plan's
order; at the stop the rollouts still in flight are cancelled (their workers released at once) and
a result that already came back is journaled as after the stop, never used (docs/sim_eval.md,
"What is valid and why").
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from ..runner import scripted_physics
from ..runner.client import ServerAddress
from ..runner.errors import Category, ErrorLog, operator_message
from ..runner.server import PolicyServer
from ..session import EvaluationSession, SessionConfig
from ..session.driver import Action, Dispatch, TrialDriver, Verdict
from ..session.journal import Journal
from ..session.values import ClaimSnapshot, ComparisonSnapshot, PendingTrial, SessionState
from .errors import ParallelError
from .ray_pool import RayPool
from .rollout import RolloutOutcome, RolloutRequest
from .sim_config import SimulationConfig

__all__ = ["SimEvalResult", "run_sim_eval", "served_policies"]


@dataclasses.dataclass(frozen=True)
class SimEvalResult:
    """What a sim-eval did: the session's end, the rollouts per task, the time.

    ``rollouts`` counts every rollout run (faults included), ``per_task`` the scored ones per task;
    ``fixed_n`` is the fixed-N batch of the same design (``n_max`` pairs per task and comparison's
    policies); ``rollout_s`` the summed time the workers spent in rollouts, ``wall_s`` the time to
    the decision; ``after_stop`` the results journaled after the stop (never used), ``cancelled``
    the rollouts released at the stop; ``cpu_s``, ``policy_s`` and ``setup_s`` the summed parts of
    the rollouts' time (:class:`~.rollout.RolloutOutcome`).
    """

    session_id: str
    journal: pathlib.Path
    state: SessionState
    rollouts: int
    faults: int
    per_task: dict[str, int]
    fixed_n: int
    wall_s: float
    rollout_s: float
    comparisons: list[ComparisonSnapshot]
    claims: list[ClaimSnapshot]
    after_stop: int = 0
    cancelled: int = 0
    cpu_s: float = 0.0
    policy_s: float = 0.0
    setup_s: float = 0.0


@contextmanager
def served_policies(simulation: SimulationConfig, *, host: str = "127.0.0.1") -> Iterator[dict[str, ServerAddress]]:
    """The address of every policy: scripted ones served here on ``host`` for the block, the rest as configured."""
    with ExitStack() as stack:
        addresses = {}
        for policy, source in simulation.policies.items():
            if source.serve is None:
                addresses[policy] = source.address()
                continue
            # the scripted physics policies read the exterior image only: no wrist camera to render
            metadata = dict(scripted_physics.METADATA, needs_wrist_camera=False)
            server = stack.enter_context(PolicyServer(source.serve, host=host, metadata=metadata))
            addresses[policy] = ServerAddress(host, server.port)
        yield addresses


def fixed_n_rollouts(config: SessionConfig) -> int:
    """Rollouts of the fixed-N batch of ``config``: ``n_max`` per policy (per task with a non-pooled claim)."""
    tasks = 1 if config.claim == "pooled" else len(config.tasks)
    return config.n_max * tasks * len(config.policies)


def _request(trial: PendingTrial, simulation: SimulationConfig, addresses: dict[str, ServerAddress],
             prompt: str) -> RolloutRequest:
    task = simulation.tasks[trial.task]
    return RolloutRequest(trial.session_id, trial.trial_id, trial.attempt, trial.task, trial.initial_condition, prompt,
                          addresses[trial.policy_id], task.env, task.spread, task.seed, task.max_steps,
                          simulation.rate, simulation.infer_timeout)


def run_sim_eval(config: SessionConfig, simulation: SimulationConfig, pool: RayPool, *, journal_path: pathlib.Path,
                 session_id: str, addresses: dict[str, ServerAddress], error_log: ErrorLog,
                 progress: Callable[[str], None] | None = None) -> SimEvalResult:
    """Run the session of ``config`` to its end on ``pool``'s workers (module docstring).

    :param config: The session; ``runner.runners`` names the workers, one per worker of ``pool``
        (:func:`~.sim_config.load_sim_eval` fills them in).
    :param journal_path: The session journal to create (its directory must exist).
    :param addresses: The policy servers (:func:`served_policies`).
    :param error_log: Where the full text of each failed rollout goes.
    :param progress: Told one line per rollout and per decision (no policy id: labels only).
    """
    if config.scoring != "auto" or config.confirm_reset:
        raise ParallelError("sim-eval needs `scoring: auto` and `confirm_reset: false` (the simulator scores "
                            "and resets its own rollouts)")
    runners = config.runner.actions
    if len(runners) != pool.workers:
        raise ParallelError(f"the session names {len(runners)} runners ({list(runners)}) for {pool.workers} workers")
    say = progress or (lambda line: None)
    prompts = {task.id: task.description or task.id for task in config.tasks}
    journal = Journal.open(journal_path, session_id, config)
    session = EvaluationSession(config, journal, session_id)
    start = time.monotonic()
    tally = _Tally()
    held: dict[str, PendingTrial] = {}  # runner -> the trial on its worker
    try:
        session.start()
        driver = TrialDriver(session, runners=runners, max_ahead=config.runner.max_ahead)
        while not driver.finished:
            if session.state == SessionState.PAUSED:  # the fault limit, and no operator to resume
                session.abort(f"paused with no operator to resume it: {session.runner_message}")
                break
            for work in _dispatch(driver, pool, runners, held):
                if work.action is not Action.RUN:
                    raise ParallelError(f"sim-eval cannot go on: {work.runner} waits for {work.action.value}")
                pool.submit(work.runner, _request(work.trial, simulation, addresses, prompts[work.trial.task]),
                            worker=runners.index(work.runner))
                held[work.runner] = work.trial
            if not held:
                if driver.finished:
                    break
                raise ParallelError("sim-eval cannot go on: no trial to run and the session is not over")
            for runner, outcome in pool.wait(timeout=5.0):
                _done(driver, str(runner), held.pop(str(runner)), outcome, error_log, tally, say, start)
            tally.decisions(session, say)
        _stop(driver, pool, held, error_log, tally, say, start)
        return SimEvalResult(session_id, journal_path, session.state, tally.rollouts, tally.faults,
                             dict(tally.per_task), fixed_n_rollouts(config), time.monotonic() - start,
                             tally.rollout_s, session.comparisons(), session.claims(), tally.after_stop,
                             pool.cancelled, tally.cpu_s, tally.policy_s, tally.setup_s)
    finally:
        session.close()


def _dispatch(driver: TrialDriver, pool: RayPool, runners: tuple[str, ...], held: dict[str, PendingTrial]
              ) -> list[Dispatch]:
    """The next rollouts, on live workers first: a dead worker's retry goes to a live idle one (a fault
    retried elsewhere); only when nothing else runs does a dead one's work wait for Ray to restart it."""
    down = [runner for index, runner in enumerate(runners) if not pool.up(index)]
    for runner in down:
        driver.retry_elsewhere(runner, down)
    work = driver.dispatch([runner for runner in runners if runner not in down])
    return work if work or held else driver.dispatch()


def _stop(driver: TrialDriver, pool: RayPool, held: dict[str, PendingTrial], error_log: ErrorLog, tally: _Tally,
          say: Callable[[str], None], start: float) -> None:
    """At the stop: give up what still runs (journaled), journal what already came back as after the stop
    (never used), and release the rest at once."""
    cancelled = driver.stop("the session is decided")
    for runner, outcome in pool.wait(timeout=0):
        _done(driver, str(runner), held.pop(str(runner)), outcome, error_log, tally, say, start)
    for work in cancelled:
        if pool.cancel(work.runner):
            held.pop(work.runner, None)
            say(f"trial {work.trial.trial_id} (task {work.trial.task}, label {work.trial.label}) cancelled on "
                f"{work.runner} at the stop")


def _done(driver: TrialDriver, runner: str, trial: PendingTrial, outcome: RolloutOutcome, error_log: ErrorLog,
          tally: _Tally, say: Callable[[str], None], start: float) -> None:
    """Journal one rollout's outcome through the driver (plan order, faults, after the stop) and say it."""
    message = _message(outcome, error_log, trial)
    verdict = driver.run_done(trial, outcome.ok, outcome.duration_s, message, runner=runner,
                              auto_score=(outcome.success, outcome.progress) if outcome.ok else None)
    tally.count(trial, outcome, verdict.verdict)
    note = " (after the stop: journaled, not used)" if verdict.verdict is Verdict.AFTER_STOP else ""
    say(_line(trial, outcome, message, tally.rollouts, time.monotonic() - start) + f" on {runner}{note}")


@dataclasses.dataclass
class _Tally:
    """Counts of the run, for the result and the progress lines."""

    rollouts: int = 0
    faults: int = 0
    after_stop: int = 0
    rollout_s: float = 0.0
    cpu_s: float = 0.0
    policy_s: float = 0.0
    setup_s: float = 0.0
    decided: int = 0
    per_task: Counter[str] = dataclasses.field(default_factory=Counter)

    def count(self, trial: PendingTrial, outcome: RolloutOutcome, verdict: Verdict) -> None:
        self.rollouts += 1
        self.rollout_s += outcome.duration_s
        self.cpu_s += outcome.cpu_s
        self.policy_s += outcome.policy_s
        self.setup_s += outcome.setup_s
        if verdict is Verdict.AFTER_STOP:
            self.after_stop += 1
        elif verdict in (Verdict.RAN, Verdict.HELD):
            self.per_task[trial.task] += 1
        elif verdict is not Verdict.IGNORED:
            self.faults += 1

    def decisions(self, session: EvaluationSession, say: Callable[[str], None]) -> None:
        status = session.status()
        if status.comparisons_decided > self.decided:
            self.decided = status.comparisons_decided
            say(f"decided {self.decided} of {status.comparisons_total} tests after {self.rollouts} rollouts")


def _message(outcome: RolloutOutcome, error_log: ErrorLog, trial: PendingTrial) -> str:
    """The journaled message of a rollout: its length, or the failure's category and error id (text: private log)."""
    if outcome.ok:
        return f"{outcome.steps} steps, simulated"
    category = Category(outcome.category) if outcome.category in Category._value2member_map_ else Category.ROBOT
    error_id = error_log.record(outcome.text or category.value, category, session=trial.session_id,
                                trial=trial.trial_id, attempt=trial.attempt, policy=trial.policy_id)
    return operator_message(category, error_id, outcome.detail)


def _line(trial: PendingTrial, outcome: RolloutOutcome, message: str, rollouts: int, elapsed: float) -> str:
    what = (f"success={int(outcome.success)} progress={outcome.progress:.2f}" if outcome.ok
            else f"failed: {message}, run again")
    return (f"[{elapsed:6.0f} s] rollout {rollouts}: trial {trial.trial_id} (task {trial.task}, label {trial.label}, "
            f"attempt {trial.attempt}) {what} in {outcome.duration_s:.1f} s")
