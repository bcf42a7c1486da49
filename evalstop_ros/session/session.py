"""The evaluation session: a journaled state machine between the ROS nodes and the tests (docs/protocol.md)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import numpy as np

from ..stats.sequential import Decision
from .analysis import PairedTest, Test, build_tests, combine_claims
from .concurrent import ConcurrentTrials
from .config import SessionConfig
from .config_input import config_diff
from .edits import ScoreEdits
from .errors import JournalError
from .journal import Event, Journal
from .letters import letters
from .limits import bounded, score_fields, score_submission
from .machine import TrialMachine
from .plan import Plan
from .replay import locked as _locked
from .schedule import Schedule
from .trials import TrialBook, TrialRecord
from .values import (
    ClaimSnapshot,
    ComparisonSnapshot,
    EditOutcome,
    OperatorPrompt,
    PendingTrial,
    ScoreOutcome,
    SessionState,
    StatusSnapshot,
    TrialRules,
)

#: The value types and the submission helpers are importable from here too (their home modules
#: are :mod:`.values` and :mod:`.limits`).
__all__ = [
    "ClaimSnapshot",
    "ComparisonSnapshot",
    "EditOutcome",
    "EvaluationSession",
    "OperatorPrompt",
    "PendingTrial",
    "ScoreOutcome",
    "SessionState",
    "StatusSnapshot",
    "score_fields",
    "score_submission",
]

logger = logging.getLogger(__name__)

class EvaluationSession(ScoreEdits, ConcurrentTrials):
    """A journaled evaluation session (the protocol: docs/protocol.md).

    Parameters
    ----------
    config:
        The validated configuration; must be the one stored in ``journal``.
    journal:
        An open journal of this session (new or existing).  Its events are replayed now.
    session_id:
        Must match the journal's.

    Raises
    ------
    JournalError
        If the journal belongs to another session or configuration, or its replay diverges
        from what this code computes (e.g. the statistics core changed under a running
        session).
    """

    def __init__(self, config: SessionConfig, journal: Journal, session_id: str) -> None:
        if journal.session_id != session_id:
            raise JournalError(f"journal {str(journal.path)!r} belongs to session {journal.session_id!r}, not {session_id!r}")
        if journal.config_hash != config.config_hash:
            changes = config_diff(json.loads(journal.config_json), config.to_dict())
            raise JournalError(f"journal {str(journal.path)!r} holds a different configuration: {'; '.join(changes)}")
        self.config = config
        self.session_id = session_id
        self.plan = Plan(config, journal.plan_key)
        self._lock = threading.RLock()
        self._journal = journal
        self._book = TrialBook()
        self._tests: list[Test]
        self._tests, self._families, self._adastop = build_tests(config, self.plan)
        self._schedule = Schedule(config, self.plan, session_id, self._book, self._tests, self._adastop)
        #: The state machine (life cycle, runner results, scores), the one a hub station runs too.
        self._machine = TrialMachine(f"session {session_id!r}", self._book, self._commit, self._schedule.pending,
                                     self._schedule.request, log_name=f"session {session_id}", open_trial=self._open_trial)
        self._announced: set[int] = set()
        self._revealed = False
        self._auth_counters: dict[str, int] = {}  # operator -> highest journaled request counter
        self._auth: dict[str, Any] | None = None  # the request being handled (:meth:`authenticated`)
        #: Called with every event right after it is journaled and applied (e.g. the node publishes it).
        self.on_commit: Callable[[Event], None] | None = None
        for event in journal.events():
            self._apply(self._unsealed(event))
        self._settle()  # a crash between a score and its decision event: write the decision now
        self._release_held()  # a crash between a score and the held score it frees
        self._reveal()  # a crash between the end and the reveal

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: SessionConfig, session_id: str, *,
             durable: bool = True, plan_key: bytes | None = None) -> EvaluationSession:
        """Open (create or resume) the journal at ``path`` and the session over it.

        ``durable`` and ``plan_key`` are passed to :meth:`Journal.open` (``plan_key``: tests only;
        a live session's key comes from the OS).  Close the session (or use ``with``) to release
        the journal.
        """
        new = not os.path.exists(path)
        journal = Journal.open(path, session_id, config, durable=durable, plan_key=plan_key)
        try:
            return cls(config, journal, session_id)
        except BaseException:
            if new:  # a session that cannot start leaves no journal: its id stays usable
                journal.discard()
            else:
                journal.close()
            raise

    # -- life cycle ------------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        """The current :class:`SessionState`."""
        return self._machine.state

    @property
    def rejections(self) -> int:
        """Scores rejected since this object was built (for diagnostics)."""
        return self._machine.rejections

    def _transition(self, action: str, allowed: tuple[SessionState, ...]) -> None:
        self._machine.transition(action, allowed)

    @_locked
    def start(self) -> None:
        """Start the session (``IDLE -> RUNNING``)."""
        self._machine.start()
        logger.info("session %s started: %d policies, %d tests", self.session_id, len(self.config.policies), len(self._tests))

    @_locked
    def pause(self, reason: str = "") -> None:
        """Pause (``RUNNING -> PAUSED``): scores are refused until :meth:`resume`.

        Pausing a paused session does nothing (a re-sent request whose answer was lost).
        """
        self._machine.pause(reason)

    @_locked
    def resume(self) -> None:
        """Resume (``PAUSED -> RUNNING``); resuming a running session does nothing (a re-send)."""
        self._machine.resume()
        self._release_held()  # held scores whose turn came while paused

    @_locked
    def abort(self, reason: str) -> None:
        """Abort for good (any non-final state); ``reason`` is required."""
        self._machine.abort(reason)
        self._reveal()

    @_locked
    def reject_message(self, kind: str, reason: str, summary: dict[str, Any]) -> None:
        """Journal a message refused before it reached the session (audit only; no state change).

        ``summary`` must already be bounded (the node's :mod:`.auth` builds it).
        """
        self._commit("message_rejected", None, message=str(kind)[:64], reason=str(reason)[:256], summary=summary)

    @_locked
    def auth_counter(self, operator: str) -> int:
        """The highest request counter of ``operator`` journaled so far (0 if none)."""
        return self._auth_counters.get(operator, 0)

    @contextlib.contextmanager
    def authenticated(self, auth: dict[str, Any] | None) -> Iterator[None]:
        """Journal ``auth`` (an authenticated request's :class:`~.auth.Check` record) with the request.

        Inside the block, the first event of :data:`REQUEST_KINDS` committed carries ``auth``; if the request commits
        nothing (refused, or a repeat), a ``request_noted`` event does on leaving the block, so
        its counter is journaled either way and a replay stays refused after a restart.
        ``None`` (authentication off) does nothing.  Holds the session's lock for the block.
        """
        if auth is None:
            yield
            return
        with self._lock:
            self._auth = dict(auth)
            try:
                yield
            finally:
                pending, self._auth = self._auth, None
                if pending is not None:
                    self._commit("request_noted", None, auth=pending)

    @_locked
    def close(self) -> None:
        """Close the journal.  The session object must not be used afterwards."""
        self._journal.close()

    def __enter__(self) -> EvaluationSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- trials ----------------------------------------------------------------------------
    @_locked
    def pending_trial(self) -> PendingTrial | None:
        """The trial waiting to be run or scored, if any (any state; creates nothing)."""
        record = self._schedule.pending()
        return None if record is None else self._schedule.request(record)

    @_locked
    def next_trial(self) -> PendingTrial | None:
        """The pending trial, creating (and journaling) the next one if none is pending.

        Returns ``None`` once the session is finished or aborted.

        Raises
        ------
        SessionError
            If the session is idle or paused.
        """
        if self._state in (SessionState.FINISHED, SessionState.ABORTED):
            return None
        self._transition("request a trial", (SessionState.RUNNING,))
        record = self._schedule.pending()
        if record is None:
            record = self._request_next()
        return self._schedule.request(record)

    @_locked
    def confirm_reset(self, trial_id: int, attempt: int = 0) -> EditOutcome:
        """The operator confirms that the scene of the pending trial is reset (``confirm_reset``).

        Journals ``reset_confirmed`` for the trial's current run; the trial then waits for its
        run (:attr:`StatusSnapshot.awaiting`).  ``attempt`` (0: the current one) names the run the
        operator saw, so that a confirmation sent before a failed run cannot start the next one.
        Idempotent: confirming a confirmed run again answers ``applied`` and journals nothing (a
        re-sent request whose answer was lost), also once the run is over if it names the attempt.  Refused (nothing journaled) when the session
        does not ask for confirmations, is not running, ``trial_id`` is not the pending trial
        (a stale confirmation), or ``attempt`` is not its current run.
        """
        if not self.config.confirm_reset:
            return EditOutcome(False, "this session does not ask for reset confirmations (confirm_reset: false)",
                               trial_id)
        known = self._book.trials[trial_id] if self._known(trial_id) else None
        if known is not None and attempt == known.attempt and known.reset_confirmed == attempt:
            return EditOutcome(True, f"trial {trial_id}: reset already confirmed", trial_id)  # a re-send
        if self._state != SessionState.RUNNING:
            return EditOutcome(False, f"session is {self._state.value}; confirm the reset once it runs", trial_id)
        record = self._book.trials[trial_id] if self._known(trial_id) else None
        if record is None or record.closed:  # several may be open (parallel runners, docs/parallel.md)
            head = self._schedule.pending()
            return EditOutcome(False, f"trial {bounded(trial_id)} is not the pending trial ("
                               f"{'none' if head is None else f'trial {head.trial_id}'} is); nothing confirmed", None)
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt not in (0, record.attempt):
            return EditOutcome(False, f"trial {trial_id}: attempt {bounded(attempt)} is over (the current run is "
                               f"attempt {record.attempt}: reset the scene again)", trial_id)
        if record.reset_confirmed == record.attempt:
            return EditOutcome(True, f"trial {trial_id}: reset already confirmed", trial_id)
        self._commit("reset_confirmed", trial_id, attempt=record.attempt)
        logger.info("trial %d (label %s): scene reset confirmed for attempt %d", trial_id, record.label,
                    record.attempt)
        return EditOutcome(True, f"trial {trial_id}: reset confirmed", trial_id)

    @_locked
    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None,
                             goal_seal: dict[str, Any] | None = None) -> PendingTrial | None:
        """Record the runner's result for the pending trial.

        Returns the trial to run next: ``None`` after a successful run (the trial now waits
        for its score), or the same trial with ``attempt + 1`` after a failure (retry it, or
        :meth:`void_score` it).

        ``auto_score`` (``success``, ``progress``): the runner's own score of a successful run,
        journaled with the result so that it survives a pause or a restart until it is submitted
        (:meth:`held_auto_score`).  ``goal_seal``: the run's sealed goal (:func:`~.goal_sealing.journal_seal`),
        which the audit checks against the plan once the key is revealed.

        Raises
        ------
        SessionError
            If ``trial_id`` is not an open trial, the session is not running or paused, or
            (``confirm_reset``) the reset of this run was not confirmed.
        """
        def unready(record: TrialRecord) -> str:
            if self.config.confirm_reset and record.reset_confirmed != record.attempt:
                return (f"runner result for trial {trial_id}, attempt {record.attempt}, whose scene reset "
                        "was not confirmed")
            return ""

        return self._machine.record_runner_result(trial_id, ok, duration_s, message, auto_score=auto_score,
                                                  goal_seal=goal_seal, unready=unready)

    @_locked
    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None:
        """The pending trial's journaled automatic score, not yet submitted (``None`` if none).

        Automatic scoring records the runner's score with its result
        (:meth:`record_runner_result`); the node submits it while the session runs.  A score that
        came while the session was paused, or before a crash, is held here until then.
        """
        return self._machine.held_auto_score()

    @property
    def runner_message(self) -> str:
        """The last run's message as an operator channel may show it (a category and an error id,
        :mod:`.runner_messages`; its full text is sealed in the journal)."""
        return self._machine.runner_message

    @property
    def trial_rules(self) -> TrialRules:
        """The rules of its trial loop, from the journaled configuration (:class:`~.driver.TrialDriver`)."""
        runner = self.config.runner
        return TrialRules(runner.max_attempts, self.config.scoring == "auto", runner.action_name)

    @property
    def runner_faults(self) -> int:
        """Failed runs of the pending trial in a row, since it was requested or the session resumed.

        Derived from the journal like everything else, so a restart does not forget it.
        """
        return self._machine.faults

    @_locked
    def submit_score(self, trial_id: int, token: str, success: bool, progress: float, operator: str = "",
                     notes: str = "", *, preference: str = "", instruction: str = "",
                     pair_invalid: bool = False) -> ScoreOutcome:
        """Score the pending trial.

        Checks, in order (the first failing one is the reason; every rejection is journaled as
        ``score_rejected`` and changes no test): unknown trial; wrong token; already scored (a
        byte-identical resubmission is a *duplicate*: acknowledged, journaled as
        ``score_duplicate``, ignored); voided trial; session not running; no successful run
        recorded; ``success`` not a bool; ``progress`` not finite or outside [0, 1];
        ``preference`` not ``""``, ``"="`` or a label of the trial's round.  A valid score that
        can feed no undecided test (its policy's tests, on its task for a per-task claim) is
        journaled as ``post_decision_score`` and fed to no test.  A valid score for an open trial that is
        not the pending one (several runners) is journaled as ``score_held`` and enters the tests when
        every earlier trial is scored or voided (docs/parallel.md).

        ``operator``, ``notes`` and ``preference`` (the operator's preferred label in the round,
        RoboArena-style; stored, not tested) are journaled with the score; so are, in a ``design:
        ab`` session, the round's ``instruction`` and ``pair_invalid`` (the operator judged the
        pair not valid: the round then forms no pair, :func:`~.trials.form_pairs`).
        """
        def form_problem() -> str | None:
            if not isinstance(pair_invalid, bool) or not isinstance(instruction, str):
                return "`pair_invalid` must be true or false and `instruction` a string"
            if (instruction or pair_invalid) and self.config.design != "ab":
                return ("`instruction` and `pair_invalid` apply only to design 'ab'; "
                        f"this session's design is {self.config.design!r}")
            return None

        return self._machine.submit_score(
            trial_id, token, success, progress, operator, notes, preference=preference, instruction=instruction,
            pair_invalid=pair_invalid, form_problem=form_problem,
            value_problem=lambda record: self._preference_problem(preference, record.round),
            held_until=self._held_until, accept=self._accept)

    def _held_until(self, record: TrialRecord) -> int | None:
        """Scores enter in plan order, whatever the runs' durations (docs/parallel.md): the earlier open
        trial a score of ``record`` waits for (``None``: it enters now)."""
        head = self._schedule.pending()
        return None if head is None or head.trial_id == record.trial_id else head.trial_id

    def _open_trial(self, trial_id: Any) -> TrialRecord | None:
        """The record of ``trial_id`` if it is open (issued, neither scored nor voided): with several
        runners more than one is (docs/parallel.md)."""
        record = self._book.trials[trial_id] if self._known(trial_id) else None
        return None if record is None or record.closed else record

    def _accept(self, record: TrialRecord, submission: dict[str, Any], *, released: bool = False) -> ScoreOutcome:
        """Journal a valid score: fed to the undecided tests it can feed, else ``post_decision_score``; then
        the held scores it frees (``released``: this one was held)."""
        trial_id = record.trial_id
        undecided = [t for t in self._tests if t.feeds(record) and not t.decided]
        kind = "score_accepted" if undecided else "post_decision_score"
        self._commit(kind, trial_id, submission=submission, **({"held": True} if released else {}))
        logger.info("trial %d (label %s) scored: success=%d progress=%.3g%s%s", trial_id, record.label,
                    submission["success"], submission["progress"], " (held for its turn)" if released else "",
                    "" if undecided else " (post-decision: fed to no test)")
        self._settle()
        if not released:
            self._release_held()
        if undecided:
            return ScoreOutcome(True, False, f"trial {trial_id} scored")
        return ScoreOutcome(True, False, f"trial {trial_id} recorded after all its comparisons were decided; "
                            "fed to no test", post_decision=True)

    def _preference_problem(self, preference: object, round_number: int) -> str | None:
        labels = sorted(self.plan.label(p, round_number) for p in self.config.policies)
        if preference in ("", "=", *labels):
            return None
        return f"`preference` must be '', '=' or one of the labels {labels}; found {preference!r}"

    # -- reports ---------------------------------------------------------------------------
    @_locked
    def status(self) -> StatusSnapshot:
        """A :class:`StatusSnapshot` snapshot."""
        pending = self._schedule.pending()
        live = self.state not in (SessionState.FINISHED, SessionState.ABORTED)
        active = self._schedule.active() if live else ()
        return StatusSnapshot(
            session_id=self.session_id,
            state=self.state,
            trials_requested=len(self._book.trials),
            trials_scored=self._book.n_scored,
            trials_voided=self._book.n_voided,
            rounds=self._schedule.state.round,
            pending_trial_id=None if pending is None else pending.trial_id,
            awaiting=None if pending is None else self._awaiting(pending),
            active_policies=active,
            comparisons_total=len(self._tests),
            comparisons_decided=sum(t.decided for t in self._tests),
            max_trials_left=self._schedule.max_trials_left() if live else 0,
            active_tasks=self._schedule.active_tasks() if live else (),
        )

    @_locked
    def comparisons(self) -> list[ComparisonSnapshot]:
        """One :class:`ComparisonSnapshot` per test, in the fixed order (comparison, metric, task)."""
        out = []
        for test in self._tests:
            mean_a, mean_b = test.means()
            out.append(ComparisonSnapshot(
                policy_a=test.comparison.policy_a, policy_b=test.comparison.policy_b, metric=test.metric.name,
                method=test.method, alternative=test.metric.alternative, alpha=test.alpha, n=test.n,
                decision=test.decision, pvalue=test.pvalue(), evalue=test.evalue(), mean_a=mean_a, mean_b=mean_b,
                stopping_trial=test.stopping_trial, task=test.task or "",
            ))
        return out

    @_locked
    def claims(self) -> list[ClaimSnapshot]:
        """One :class:`ClaimSnapshot` per comparison x metric with a non-pooled ``claim``; empty otherwise.

        Combines the per-task tests' current results with
        :func:`~evalstop_ros.stats.multitask.combine_tasks`, as
        :func:`~evalstop_ros.stats.multitask.run_multitask` does on the same scores.  Publish each
        one as a ``ComparisonStatus`` with :meth:`ClaimSnapshot.as_comparison`.
        """
        if self.config.claim == "pooled":
            return []
        tasks = tuple(t.id for t in self.config.tasks)
        paired = [t for t in self._tests if isinstance(t, PairedTest)]
        assert len(paired) == len(self._tests)
        out = []
        for start, combined in zip(range(0, len(paired), len(tasks)),
                                   combine_claims(self.config, [(t.metric, t.result()) for t in paired])):
            group = paired[start:start + len(tasks)]
            first = group[0]
            metric = first.metric
            level = self.config.comparison_alpha(metric)
            decided = [t.decided for t in group]
            final = all(decided)  # per-task: later task claims can still come
            if self.config.claim == "any":  # a claim, once made, stays (decisions are final, p-values fall)
                final = final or combined.established
            elif self.config.claim == "every":  # iut/bonferroni: a task that stopped unclaimed refutes it
                final = final or combined.established or any(
                    d and c == Decision.CONTINUE for d, c in zip(decided, combined.task_claims))
            fed = [pair for t in group if isinstance(t, PairedTest) for pair in t.fed]
            means = np.asarray(fed, dtype=np.float64)[:, 2:].mean(axis=0) if fed else np.full(2, np.nan)
            out.append(ClaimSnapshot(
                policy_a=first.comparison.policy_a, policy_b=first.comparison.policy_b, metric=metric.name,
                method=metric.method, alternative=metric.alternative, claim=self.config.claim,
                correction=combined.correction, alpha=level, task_alpha=combined.task_alpha, tasks=tasks,
                task_claims=combined.task_claims, established=combined.established, final=bool(final),
                n=len(fed), mean_a=float(means[0]), mean_b=float(means[1]),
            ))
        return out

    @_locked
    def letters(self, metric: str | None = None, task: str | None = None) -> dict[str, str]:
        """Compact letter display of one metric (default: the first configured).

        Policies sharing a letter were not found different; the best mean carries ``a``.
        "Different" means a directional decision of the pair's test (Holm's with ``correction:
        holm``, AdaStop's under that design); with a non-pooled claim, an established claim
        (:meth:`claims`), or with ``task`` a claim on that task, whose scores alone give the
        means.  Means are over every effective score of the policy.  Empty while some policy has
        no score yet.  :func:`~.offline.offline_letters` recomputes it from the journal.

        Raises
        ------
        SessionError
            For an unknown metric or task, or a task with ``claim: pooled``.
        """
        claims = self.claims()
        return letters(self.config, self._book, metric, task,
                       [(t.comparison.pair, t.metric.name, t.decision) for t in self._tests],
                       [(frozenset((c.policy_a, c.policy_b)), c.metric, c.established, c.task_claims) for c in claims])

    @_locked
    def events(self) -> list[Event]:
        """Every journaled event so far, in order, as the journal's owner reads them (sealed fields
        restored: :mod:`.blinding`; publish them through :func:`~.blinding.seal`)."""
        return [self._unsealed(event) for event in self._journal.events()]
