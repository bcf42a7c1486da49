"""The trial loop: what comes next in a session, and the rules of a runner's result.

:class:`TrialDriver` drives any :class:`DrivenSession` (an :class:`~.session.EvaluationSession`, a
hub station's :class:`~evalstop_ros.station.session.StationSession`, both on one
:class:`~.machine.TrialMachine`) from the journal alone: the fault limit (pause after ``max_attempts``
failed runs), automatic scores (held while paused), one runner per action (:mod:`.runner_check`),
several runners at once with scores in plan order (``runners=``, :mod:`.runner_pool`, docs/parallel.md)
and the operator's fallback for a run without a valid automatic score.  Details: docs/session.md.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from .config_sections import ROUND_DESIGNS
from .errors import SessionError
from .runner_check import RunnerCheck, RunnerGraph
from .runner_pool import RunnerPool
from .values import FINAL, PendingTrial, ScoreOutcome, SessionState, TrialRules, score_problem

__all__ = ["Action", "AutoScore", "Dispatch", "DrivenSession", "Next", "RunVerdict", "TrialDriver", "Verdict"]

logger = logging.getLogger(__name__)


class _Awaiting(Protocol):
    @property
    def awaiting(self) -> str | None: ...


class DrivenSession(Protocol):
    """What the driver needs of a session (:class:`~.session.EvaluationSession`,
    :class:`~evalstop_ros.station.session.StationSession`); each journals what it is told before it acts."""

    @property
    def state(self) -> SessionState: ...
    @property
    def trial_rules(self) -> TrialRules: ...
    @property
    def runner_faults(self) -> int: ...
    @property
    def runner_message(self) -> str: ...
    def status(self) -> _Awaiting: ...
    def pending_trial(self) -> PendingTrial | None: ...
    def next_trial(self) -> PendingTrial | None: ...
    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None: ...
    def pause(self, reason: str = "") -> None: ...
    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None,
                             goal_seal: dict[str, Any] | None = None) -> Any: ...
    def submit_score(self, trial_id: int, token: str, success: bool, progress: float,
                     operator: str = "") -> ScoreOutcome: ...


class ParallelSession(DrivenSession, Protocol):
    """What :meth:`TrialDriver.dispatch` needs besides (:class:`~.concurrent.ConcurrentTrials`)."""

    @property
    def config(self) -> Any: ...
    def trial_phase(self, trial_id: int) -> str: ...
    def issue_trial(self) -> PendingTrial | None: ...
    def round_continues(self) -> bool: ...
    def open_trials(self) -> list[PendingTrial]: ...
    def record_dispatch(self, trial_id: int, runner: str) -> None: ...
    def faulty_run(self) -> tuple[int | None, str]: ...
    def record_cancel(self, trial_id: int, runner: str, reason: str) -> None: ...
    def record_late_result(self, trial_id: int, runner: str, ok: bool, duration_s: float, message: str = "", *,
                           auto_score: tuple[bool, float] | None = None,
                           goal_seal: dict[str, Any] | None = None) -> None: ...


class Action(enum.Enum):
    """What the caller does next (:meth:`TrialDriver.advance`)."""

    #: Run ``trial`` on the robot, then report with :meth:`TrialDriver.run_done`.
    RUN = "run"
    #: Wait for the operator to reset the scene and confirm it (``confirm_reset``).
    RESET = "reset"
    #: Wait for the operator's score of ``trial``.
    SCORE = "score"
    #: Nothing to do: the session is idle or paused, the runner is busy, or a station waits for work.
    WAIT = "wait"
    #: The session is finished or aborted.
    DONE = "done"


@dataclass(frozen=True)
class AutoScore:
    """A held automatic score the driver submitted (the caller acknowledges it like any score)."""

    trial: PendingTrial
    outcome: ScoreOutcome


@dataclass(frozen=True)
class Dispatch:
    """:meth:`TrialDriver.dispatch`'s answer for one runner: run ``trial`` on it (``RUN``), or have its
    operator reset its scene first (``RESET``); :meth:`TrialDriver.stop`'s: cancel ``trial`` on it."""

    runner: str
    trial: PendingTrial
    action: Action


@dataclass(frozen=True)
class Next:
    """:meth:`TrialDriver.advance`'s answer: the action, its trial, and an automatic score submitted on the way."""

    action: Action
    trial: PendingTrial | None = None
    auto: AutoScore | None = None


class Verdict(enum.Enum):
    """What a runner result led to (:meth:`TrialDriver.run_done`)."""

    #: The trial was no longer pending (voided, the session ended): nothing journaled.
    IGNORED = "ignored"
    #: The run failed; the trial runs again (attempt + 1).
    RETRY = "retry"
    #: The run failed ``max_attempts`` times in a row: the session paused.
    PAUSED = "paused"
    #: The run succeeded; its automatic score (if any) is submitted by the next :meth:`~TrialDriver.advance`.
    RAN = "ran"
    #: The run succeeded with an automatic score while the session is paused: held until it resumes.
    HELD = "held"
    #: Automatic scoring, but the run has no valid automatic score: the operator scores it.
    OPERATOR = "operator"
    #: The result came after the session stopped: journaled as ``result_after_stop``, never used.
    AFTER_STOP = "after_stop"


@dataclass(frozen=True)
class RunVerdict:
    """:meth:`TrialDriver.run_done`'s answer, with a line for the log."""

    verdict: Verdict
    message: str = ""


class TrialDriver:
    """The trial loop of one session (module docstring: the rules).

    :param session: The session (started or resumed by the caller).
    :param runner_action: The runner's action name; automatic scores are journaled with scorer
        ``auto:<runner_action>`` (default: the rules' ``runner_action``).
    :param runners: Several runners serving the session at once (:meth:`dispatch`, docs/parallel.md).
    :param max_ahead: With ``runners``: the most open trials (issued, not yet scored or voided, the earliest
        first) before :meth:`dispatch` issues no new round; default twice the runners.  It bounds the runs a
        fast arm makes while a slow one holds the earliest trial (waste at the stop), not the decisions.
    """

    def __init__(self, session: DrivenSession, runner_action: str = "", *, runners: Sequence[str] = (),
                 max_ahead: int | None = None) -> None:
        self.session = session
        if max_ahead is not None and max_ahead < 1:
            raise SessionError(f"max_ahead must be at least 1; got {max_ahead}")
        #: The bound on open trials with several runners (``max_ahead``).
        self.max_ahead = max_ahead or 2 * len(runners)
        #: Who holds which trial, with ``runners`` (:mod:`.runner_pool`).
        self.pool = RunnerPool(tuple(runners)) if runners else None
        #: The automatic scores submitted in plan order so far (:meth:`submit_in_order`; a node acknowledges
        #: and clears them).
        self.auto_scores: list[AutoScore] = []
        self.auto_scorer = f"auto:{runner_action or session.trial_rules.runner_action}"
        self._refused: set[int] = set()  # automatic scores the session refused (not expected: values are checked)
        self._told = 0  # the last trial whose operator fallback was logged
        #: The one-runner rule (:mod:`.runner_check`): its ``state`` says what holds the goals.
        self.runners = RunnerCheck()
        #: The same rule per runner, with several (:meth:`check`).
        self.checks: dict[str, RunnerCheck] = {}
        self._voided_runs: set[tuple[str, int]] = set()  # runs cancelled because their trial was voided

    @property
    def max_attempts(self) -> int:
        """The fault limit: failed runs of one trial in a row before the session pauses (journaled)."""
        return self.session.trial_rules.max_attempts

    @property
    def auto(self) -> bool:
        """The session is scored by the runner (``scoring: auto``)."""
        return self.session.trial_rules.auto

    def operator_fallback(self) -> str:
        """Why the pending trial, run in an automatically scored session, waits for the operator ("" if it does not)."""
        session = self.session
        if not self.auto or session.status().awaiting != "score":
            return ""
        held = session.held_auto_score()
        if held is None:
            return "scoring is 'auto' but the runner returned no score"
        trial, success, progress = held
        problem = score_problem(success, progress)
        if problem:
            return f"scoring is 'auto' but the runner's score is invalid ({problem})"
        if trial.trial_id in self._refused:
            return "scoring is 'auto' but the session refused the runner's score"
        return ""

    def advance(self, *, runner_busy: bool = False) -> Next:
        """Move the session on and say what the caller does next.

        Submits a held automatic score, pauses at the fault limit (a crash between the last
        fault and its pause), and issues (journals) the next trial when none is pending.
        ``runner_busy``: a trial is on the robot; only the state is reported.
        """
        session = self.session
        if session.state in FINAL:
            return Next(Action.DONE)
        if session.state != SessionState.RUNNING or runner_busy:
            return Next(Action.WAIT)
        auto = self.submit_held()
        pending = session.pending_trial()
        if pending is not None and self._fault_limit(pending):
            return Next(Action.WAIT, pending, auto)
        try:
            trial = session.next_trial()
        except SessionError as err:  # not expected while RUNNING
            logger.error("cannot issue a trial: %s", err)
            return Next(Action.WAIT, None, auto)
        if trial is None:  # over, or a station waiting for work
            return Next(Action.DONE if session.state in FINAL else Action.WAIT, None, auto)
        awaiting = session.status().awaiting
        if awaiting == "reset":
            return Next(Action.RESET, trial, auto)
        if awaiting == "run":
            return Next(Action.RUN, trial, auto)
        fallback = self.operator_fallback()
        if fallback and self._told != trial.trial_id:
            self._told = trial.trial_id
            logger.warning("trial %d: %s; waiting for the operator's score", trial.trial_id, fallback)
        return Next(Action.SCORE, trial, auto)

    def submit_held(self) -> AutoScore | None:
        """Submit the pending trial's journaled automatic score, if it has a valid one and the session runs
        (:meth:`advance` does it first)."""
        session = self.session
        held = session.held_auto_score() if self.auto and session.state == SessionState.RUNNING else None
        if held is None or self.operator_fallback():
            return None
        trial, success, progress = held
        outcome = session.submit_score(trial.trial_id, trial.token, success, progress, self.auto_scorer)
        if not outcome.accepted:
            self._refused.add(trial.trial_id)  # the operator scores it instead
        return AutoScore(trial, outcome)

    def _fault_limit(self, trial: PendingTrial) -> bool:
        """Pause the running session if ``trial`` failed ``max_attempts`` times in a row (with several runners:
        any open trial, on its runner); whether it did."""
        session = self.session
        faults = session.runner_faults
        if faults < self.max_attempts or session.state != SessionState.RUNNING:
            return False
        where = f"runner failed {faults} times in a row on trial {trial.trial_id}"
        if self.pool is not None:
            trial_id, runner = cast(ParallelSession, session).faulty_run()
            where = f"runner {runner} failed {faults} times in a row on trial {trial_id}"
        # the runner's category and error id only: its full text may name the policy (sealed in the journal)
        try:
            session.pause(f"{where}: {session.runner_message}")
        except SessionError:  # paused or ended from another thread meanwhile
            return session.state not in FINAL  # paused (by someone else): as good as by the limit
        return True

    def check(self, runner: str = "") -> RunnerCheck:
        """The one-runner rule of ``runner`` (one of several, :meth:`dispatch`), or of the one runner ("")."""
        if not runner:
            return self.runners
        return self.checks.setdefault(runner, RunnerCheck())

    def watch_runners(self, graph: RunnerGraph, runner: str = "") -> str:
        """Apply the one-runner rule to ``graph`` (of ``runner``, with several): pause a running session on a
        duplicate (journaled with the reason, which is returned; "" when nothing was paused now). While
        :attr:`runners` (:meth:`check`) holds, send no goal (:meth:`dispatch` skips that runner)."""
        duplicate = self.check(runner).look(graph)
        session = self.session
        if not duplicate or session.state != SessionState.RUNNING:
            return ""
        try:
            session.pause(duplicate)
        except SessionError:  # paused or ended from another thread meanwhile
            return ""
        return duplicate

    def run_done(self, trial: PendingTrial, ok: bool, duration_s: float, message: str = "", *,
                 auto_score: tuple[bool, float] | None = None,
                 goal_seal: dict[str, Any] | None = None, runner: str = "") -> RunVerdict:
        """Journal the runner's result of ``trial`` and apply the rules (module docstring).

        A result for a trial that is no longer pending (voided meanwhile, the session over) is
        ignored; a duration that is not a finite number >= 0 is journaled as 0.  ``goal_seal``: what the
        goal sealed for the runner (:func:`~.goal_sealing.journal_seal`), journaled with the result.
        ``runner``: the runner that ran it (several runners, :meth:`dispatch`): any open trial's result
        is journaled when it arrives, one after the stop as ``result_after_stop`` (:attr:`Verdict.AFTER_STOP`).
        """
        session = self.session
        duration = duration_s if math.isfinite(duration_s) and duration_s >= 0 else 0.0
        if runner:
            late = self._parallel_result(trial, runner, ok, duration, message, auto_score, goal_seal)
            if late is not None:
                return late
        else:
            pending = session.pending_trial()
            if pending is None or pending.trial_id != trial.trial_id or session.state in FINAL:
                return RunVerdict(Verdict.IGNORED, f"trial {trial.trial_id}: runner result ignored "
                                  "(the trial is no longer pending)")
        try:
            retry = session.record_runner_result(trial.trial_id, ok, duration, message, auto_score=auto_score,
                                                 goal_seal=goal_seal)
        except SessionError as err:  # voided or aborted from another thread since the check above
            return RunVerdict(Verdict.IGNORED, f"trial {trial.trial_id}: runner result ignored ({err})")
        if runner and self.pool is not None:
            self.pool.finish(runner, trial.trial_id, retry)
            self.submit_in_order()
        if not ok:
            if self._fault_limit(trial):
                return RunVerdict(Verdict.PAUSED, f"session paused: {runner or 'runner'} failed {session.runner_faults} "
                                  f"times on trial {trial.trial_id}; fix the robot, then resume (session_control) or void "
                                  "the trial (correct_score)")
            return RunVerdict(Verdict.RETRY)
        if self.auto and auto_score is not None and session.state == SessionState.PAUSED:
            return RunVerdict(Verdict.HELD, f"trial {trial.trial_id}: automatic score held until the session resumes")
        fallback = self.operator_fallback()
        if fallback:
            self._told = trial.trial_id
            return RunVerdict(Verdict.OPERATOR, f"trial {trial.trial_id}: {fallback}; waiting for trial_score")
        return RunVerdict(Verdict.RAN)

    # -- several runners (docs/parallel.md) ------------------------------------------------------
    @property
    def finished(self) -> bool:
        """The session is over (decided or aborted): :meth:`stop` gives up what still runs."""
        return self.session.state in FINAL

    def _parallel(self) -> tuple[ParallelSession, RunnerPool]:
        if self.pool is None:
            raise SessionError("this driver has no runners (TrialDriver(..., runners=...))")
        return cast(ParallelSession, self.session), self.pool

    def submit_in_order(self) -> list[AutoScore]:
        """Submit the held automatic scores of the earliest open trials, in plan order, until one is missing."""
        submitted = []
        while (auto := self.submit_held()) is not None:
            submitted.append(auto)
            if not auto.outcome.accepted:
                break
        self.auto_scores.extend(submitted)
        return submitted

    def dispatch(self, ready: Collection[str] | None = None) -> list[Dispatch]:
        """Give each free runner its next trial: its reserved one, else the plan's next (issued now, with
        the rest of its round under a round design).  ``RUN`` dispatches are journaled
        (``trial_dispatched``); nothing is given while the session is not running, or at the fault limit.
        ``ready``: the runners that can take a goal now (default: every free one)."""
        session, pool = self._parallel()
        self.submit_in_order()
        if session.state != SessionState.RUNNING:
            return []
        head = session.pending_trial()
        if head is not None and self._fault_limit(head):
            return []
        out = []
        for runner in pool.free():
            if (ready is not None and runner not in ready) or self.check(runner).hold:
                continue
            trial = pool.next_for(runner, lambda trial_id: session.trial_phase(trial_id) in ("reset", "run"))
            if trial is None:
                trial = self._adopt(session, pool, runner) or self._issue(session, pool, runner)
            if trial is None:
                continue  # nothing left to issue, or max_ahead reached: a runner with a reserved trial still gets it
            if session.trial_phase(trial.trial_id) == "reset":
                out.append(Dispatch(runner, trial, Action.RESET))
                continue
            session.record_dispatch(trial.trial_id, runner)
            pool.start(runner, trial)
            out.append(Dispatch(runner, trial, Action.RUN))
        return out

    def _adopt(self, session: ParallelSession, pool: RunnerPool, runner: str) -> PendingTrial | None:
        """An open trial no runner holds (after a restart: it was on a robot, or reserved) goes to ``runner``,
        with the rest of its round."""
        orphans = [t for t in session.open_trials()
                   if session.trial_phase(t.trial_id) in ("reset", "run") and not pool.holds(t.trial_id)]
        if not orphans:
            return None
        pool.reserve(runner, [t for t in orphans if t.round == orphans[0].round])
        return orphans[0]

    def _issue(self, session: ParallelSession, pool: RunnerPool, runner: str) -> PendingTrial | None:
        """Issue the plan's next round for ``runner``, unless ``max_ahead`` trials are open already."""
        if len(session.open_trials()) >= self.max_ahead:
            return None
        try:
            trial = session.issue_trial()
            if trial is None:
                return None
            trials = [trial]
            while session.config.design in ROUND_DESIGNS and session.round_continues():
                more = session.issue_trial()
                if more is None:
                    break
                trials.append(more)
        except SessionError as err:  # no pair left to issue: the session settles on the next score
            logger.info("no trial issued for %s: %s", runner, err)
            return None
        pool.reserve(runner, trials)
        return trial

    def retry_elsewhere(self, runner: str, down: Collection[str] = ()) -> str | None:
        """``runner`` cannot run now (a simulated worker that died): its reserved trials, the failed run's retry
        first, go to a free runner with nothing reserved that is not ``down``; the recipient (``None``: they
        stay). For identical simulated workers only: a robot's round stays on its robot (docs/parallel.md)."""
        _, pool = self._parallel()
        recipient = pool.hand_over(runner, down)
        if recipient is not None:
            logger.info("the trials reserved for %s go to %s (it is down)", runner, recipient)
        return recipient

    def cancel_voided(self) -> list[Dispatch]:
        """The runs still on a runner whose trial was voided meanwhile, each journaled once (``trial_cancelled``):
        cancel them there (the runner holds the arm). Their results, when they come, free the runner and are
        not used (:meth:`run_done`); until then the runner gets no other trial."""
        session, pool = self._parallel()
        out = []
        for runner, trial in list(pool.running.items()):
            if session.trial_phase(trial.trial_id) or (runner, trial.trial_id) in self._voided_runs:
                continue
            self._voided_runs.add((runner, trial.trial_id))
            session.record_cancel(trial.trial_id, runner, "the trial was voided during its run")
            out.append(Dispatch(runner, trial, Action.RUN))
        return out

    def runner_work(self, runner: str, on_it: PendingTrial | None) -> tuple[bool, int]:
        """What ``runner`` is at, for its status (:mod:`.runner_status`): whether the run ``on_it`` (the trial
        its link still waits for) was given up (at the stop, or its trial voided), and the trial reserved for
        it that waits for the operator's scene reset (0: none)."""
        session, pool = self._parallel()
        running = pool.running.get(runner)
        cancelled = on_it is not None and (running is None or running.trial_id != on_it.trial_id
                                           or not session.trial_phase(on_it.trial_id))
        reset = next((t.trial_id for t in pool.reserved.get(runner, ()) if session.trial_phase(t.trial_id) == "reset"),
                     0)
        return cancelled, reset

    def stop(self, reason: str) -> list[Dispatch]:
        """At the stop, give up every open trial (journaled ``trial_cancelled``: on a runner, reserved for one,
        or run with its result unused); returns the running ones, to cancel on their runners (robot held, operator told).  Their results, if they still come,
        go to :meth:`run_done` and are journaled as after the stop."""
        session, pool = self._parallel()
        running, waiting = pool.release()
        for runner, trial in [*running, *waiting]:
            session.record_cancel(trial.trial_id, runner, reason)
        given_up = {trial.trial_id for _, trial in [*running, *waiting]}
        for trial in session.open_trials():  # ran, its result waiting for earlier trials when the tests stopped
            if trial.trial_id not in given_up:
                session.record_cancel(trial.trial_id, "", reason)
        return [Dispatch(runner, trial, Action.RUN) for runner, trial in running]

    def _parallel_result(self, trial: PendingTrial, runner: str, ok: bool, duration: float, message: str,
                         auto_score: tuple[bool, float] | None, goal_seal: dict[str, Any] | None) -> RunVerdict | None:
        """A parallel runner's result that is not recorded as a run: after the stop, or for a closed trial."""
        session, pool = self._parallel()
        if session.state in FINAL:
            pool.finish(runner, trial.trial_id)
            session.record_late_result(trial.trial_id, runner, ok, duration, message, auto_score=auto_score,
                                       goal_seal=goal_seal)
            return RunVerdict(Verdict.AFTER_STOP, f"trial {trial.trial_id} on {runner}: result after the stop, "
                              "journaled, not used")
        if session.trial_phase(trial.trial_id) != "run":
            pool.finish(runner, trial.trial_id)
            return RunVerdict(Verdict.IGNORED, f"trial {trial.trial_id}: runner result ignored (not waiting for a run)")
        return None
