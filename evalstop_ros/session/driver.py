"""The trial loop: what comes next in a session, and the rules of a runner's result.

:class:`TrialDriver` drives any :class:`DrivenSession` (an :class:`~.session.EvaluationSession`, a
hub station's :class:`~evalstop_ros.station.session.StationSession`, both on one
:class:`~.machine.TrialMachine`) from the journal alone: the fault limit (pause after ``max_attempts``
failed runs), automatic scores (held while paused), one runner per action (:mod:`.runner_check`) and
the operator's fallback for a run without a valid automatic score.  Details: docs/session.md.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import SessionError
from .runner_check import RunnerCheck, RunnerGraph
from .values import FINAL, PendingTrial, ScoreOutcome, SessionState, TrialRules, score_problem

__all__ = ["Action", "AutoScore", "DrivenSession", "Next", "RunVerdict", "TrialDriver", "Verdict"]

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
    """

    def __init__(self, session: DrivenSession, runner_action: str = "") -> None:
        self.session = session
        self.auto_scorer = f"auto:{runner_action or session.trial_rules.runner_action}"
        self._refused: set[int] = set()  # automatic scores the session refused (not expected: values are checked)
        self._told = 0  # the last trial whose operator fallback was logged
        #: The one-runner rule (:mod:`.runner_check`): its ``state`` says what holds the goals.
        self.runners = RunnerCheck()

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
        """Pause the running session if ``trial`` failed ``max_attempts`` times in a row; whether it did."""
        session = self.session
        faults = session.runner_faults
        if faults < self.max_attempts or session.state != SessionState.RUNNING:
            return False
        # the runner's category and error id only: its full text may name the policy (sealed in the journal)
        try:
            session.pause(f"runner failed {faults} times in a row on trial {trial.trial_id}: {session.runner_message}")
        except SessionError:  # paused or ended from another thread meanwhile
            return session.state not in FINAL  # paused (by someone else): as good as by the limit
        return True

    def watch_runners(self, graph: RunnerGraph) -> str:
        """Apply the one-runner rule to ``graph``: pause a running session on a duplicate (journaled with the
        reason, which is returned; "" when nothing was paused now). While :attr:`runners` holds, send no goal."""
        duplicate = self.runners.look(graph)
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
                 goal_seal: dict[str, Any] | None = None) -> RunVerdict:
        """Journal the runner's result of ``trial`` and apply the rules (module docstring).

        A result for a trial that is no longer pending (voided meanwhile, the session over) is
        ignored; a duration that is not a finite number >= 0 is journaled as 0.  ``goal_seal``: what the
        goal sealed for the runner (:func:`~.goal_sealing.journal_seal`), journaled with the result.
        """
        session = self.session
        pending = session.pending_trial()
        if pending is None or pending.trial_id != trial.trial_id or session.state in FINAL:
            return RunVerdict(Verdict.IGNORED, f"trial {trial.trial_id}: runner result ignored "
                              "(the trial is no longer pending)")
        duration = duration_s if math.isfinite(duration_s) and duration_s >= 0 else 0.0
        try:
            session.record_runner_result(trial.trial_id, ok, duration, message, auto_score=auto_score,
                                         goal_seal=goal_seal)
        except SessionError as err:  # voided or aborted from another thread since the check above
            return RunVerdict(Verdict.IGNORED, f"trial {trial.trial_id}: runner result ignored ({err})")
        if not ok:
            if self._fault_limit(trial):
                return RunVerdict(Verdict.PAUSED, f"session paused: runner failed {session.runner_faults} times on "
                                  f"trial {trial.trial_id}; fix the robot, then resume (session_control) or void "
                                  "the trial (correct_score)")
            return RunVerdict(Verdict.RETRY)
        if self.auto and auto_score is not None and session.state == SessionState.PAUSED:
            return RunVerdict(Verdict.HELD, f"trial {trial.trial_id}: automatic score held until the session resumes")
        fallback = self.operator_fallback()
        if fallback:
            self._told = trial.trial_id
            return RunVerdict(Verdict.OPERATOR, f"trial {trial.trial_id}: {fallback}; waiting for trial_score")
        return RunVerdict(Verdict.RAN)
