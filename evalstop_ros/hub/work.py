"""A station's hub work as blinded trials, without ROS: the session that a station's trial loop drives.

:class:`StationWork` turns the A/B assignments a hub leases to one station into trials
(:class:`~evalstop_ros.session.PendingTrial`, arm ``A`` first, then ``B``) for the session's own
trial loop (:class:`~evalstop_ros.session.driver.TrialDriver`, in the ``station_manager`` node
and in :func:`~.sim_station.run_station`), takes the runner's results and the scores (the
runner's automatic ones or the operator's), journals each finished assignment locally first
(:class:`~.station.StationClient`'s journal, the standard journal of :mod:`.station_journal`),
and uploads it. All hub traffic runs in one background thread, so the node's executor never
waits on the network:

* while the hub is unreachable (or refuses, e.g. a revoked key) the thread retries with
  exponential back-off (``retry_min`` .. ``retry_max`` seconds), the finished results stay in
  the local journal and go out in order once the hub answers again -- nothing is lost, and a
  manager restarted after ``kill -9`` on the same directory uploads what it had journaled;
* the lease of the assignment in progress is renewed every third of its length;
* a restarted station asks for new work, and the hub requeues the lease it lost.

Blinding: a trial's request names the arm (``label`` ``A`` or ``B``) and the task only. The
policy-server address the hub resolves from the lease's runner ticket is the trial's
``policy_id``, which the node sends to the runner in the ``RunTrial`` goal and nowhere else.

A trial's score is ``1`` for a success, else its progress in [0, 1].
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from typing import Any

from ..session.errors import SessionError
from ..session.publishing import OK, WARN, Diagnostic
from ..session.runner_messages import operator_text
from ..session.values import STATE_CODES as SESSION_STATE_CODES
from ..session.values import EditOutcome, PendingTrial, ScoreOutcome, SessionState, TrialRules, score_problem
from .errors import HubError
from .station import ARMS, StationClient

__all__ = ["ARMS", "COMMANDS", "STATE_CODES", "StationWork", "WorkStatus"]

#: ``WorkStatus.state`` -> ``SessionStatus.STATE_*`` (msg/SessionStatus.msg).
#: Station state -> ``SessionStatus.STATE_*``: a session's (:data:`~evalstop_ros.session.values.STATE_CODES`), and
#: ``waiting_for_work`` as running.
STATE_CODES = {**{state.value: code for state, code in SESSION_STATE_CODES.items() if state is not SessionState.IDLE},
               "waiting_for_work": SESSION_STATE_CODES[SessionState.RUNNING]}
#: Commands of :meth:`StationWork.control` (the manager's ``session_control``).
COMMANDS = ("pause", "resume", "abort")
#: ``scoring`` of a station's rules: the runner scores (the operator where it sends no valid score), or the operator.
SCORING = ("auto", "operator")

#: A child of the session layer's logger, which the manager node forwards to its ROS log.
log = logging.getLogger("evalstop_ros.session.hub")


@dataclasses.dataclass
class _Assignment:
    """The leased assignment in progress: its arms' addresses (runner only) and scores so far."""

    assignment_id: str
    task: str
    round: int
    addresses: dict[str, str]
    tokens: dict[str, str]
    lease_seconds: float
    attempts: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(ARMS, 1))
    ran: set[str] = dataclasses.field(default_factory=set)
    auto: dict[str, tuple[bool, float]] = dataclasses.field(default_factory=dict)  # the runner's scores
    scores: dict[str, float] = dataclasses.field(default_factory=dict)
    renewed_at: float = dataclasses.field(default_factory=time.monotonic)


@dataclasses.dataclass(frozen=True)
class WorkStatus:
    """A snapshot for ``session_status`` and ``/diagnostics``.

    ``state`` is ``waiting_for_work``, ``running``, ``paused``, ``finished`` or ``aborted`` (a key
    of :data:`STATE_CODES`); ``awaiting`` is ``run`` or ``score`` while there is a trial;
    ``problem`` the last hub error ("" once the hub answers again), ``unreachable`` whether it
    was the hub not answering (rather than refusing).
    """

    state: str
    awaiting: str
    trials_done: int
    results_pending: int
    results_acked: int
    results_rejected: int
    assignment_id: str
    pending_trial_id: int
    problem: str
    retry_in: float
    unreachable: bool = False


class StationWork:
    """One station's work against a hub: a session the trial loop drives, a thread talks to the hub.

    :param client: The station's hub client (its directory holds the local journal).
    :param station_id: The station's name (session id ``hub:<station_id>`` of its trials).
    :param trials: Stop after this many A/B trials journaled locally (earlier runs count), all
        uploaded; 0 for no limit.
    :param max_faults: Runner faults in a row on one trial after which the station pauses (a
        session's ``runner.max_attempts``).
    :param scoring: ``auto`` (the runner's score; the operator's where the runner sends no valid
        one) or ``operator`` (a session's ``scoring``).

    It is a :class:`~evalstop_ros.session.driver.DrivenSession`: the node (and
    :func:`~.sim_station.run_station`) drive it with the same :class:`~evalstop_ros.session.driver.TrialDriver`
    as a local session, so a station keeps a session's rules -- after ``max_faults`` runner faults
    in a row it pauses, journaled with the reason; the operator resumes (``max_faults`` more runs)
    or voids the trial (:meth:`void_score`: the assignment is given up and the hub requeues it);
    an automatic score that came while paused is held until the station runs again; a run without a
    valid automatic score waits for the operator's.

    The first start journals ``trials``, ``max_faults`` and ``scoring`` as a ``rules`` record; a
    restart on the same journal keeps those (a changed parameter is logged and ignored), as a
    session keeps its journaled configuration. ``pause``/``resume``/``abort`` are journaled as
    ``control`` records (a restart comes back paused or aborted), each runner fault as a ``fault``
    record (assignment, arm, attempt) and an assignment given up as ``given_up``.
    """

    def __init__(self, client: StationClient, station_id: str, *, trials: int = 0, max_faults: int = 3,
                 scoring: str = "auto", retry_min: float = 0.2, retry_max: float = 3.0) -> None:
        if trials < 0 or max_faults < 1 or scoring not in SCORING or not (0 < retry_min <= retry_max):
            raise HubError(f"trials must be >= 0, max_faults >= 1, scoring one of {SCORING} and "
                           "0 < retry_min <= retry_max")
        self.client, self.station_id = client, station_id
        self.session_id = f"hub:{station_id}"
        client.open_journal(station_id)  # the writer: a second station on the directory is refused
        records = client.records()
        rules = next((r for r in records if r.get("kind") == "rules"), None)
        if rules is None:  # the first start: the parameters become the journaled rules
            client.append({"kind": "rules", "max_faults": max_faults, "trials": trials, "scoring": scoring})
            self.trials, self.max_faults, self.scoring = trials, max_faults, scoring
        else:  # a restart keeps the journaled rules, like a session's configuration
            # (a journal from before stations had a scoring rule used the runner's score where it sent one)
            self.trials, self.max_faults = int(rules["trials"]), int(rules["max_faults"])
            self.scoring = str(rules.get("scoring", "auto"))
            if (self.trials, self.max_faults, self.scoring) != (trials, max_faults, scoring):
                log.warning("station %s: its journal %s holds max_faults %d, trials %d, scoring %s; the parameters "
                            "(max_faults %d, trials %d, scoring %s) are ignored", station_id, client.journal_path,
                            self.max_faults, self.trials, self.scoring, max_faults, trials, scoring)
        self.retry_min, self.retry_max = retry_min, retry_max
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = sum(r["kind"] == "result" for r in records)
        self._round = sum(r["kind"] == "leased" for r in records)
        self._assignment: _Assignment | None = None
        self._leased: dict[str, Any] | None = None  # leased, ticket not resolved yet
        self._problem = ""
        self._problem_status = 0
        self._retry_at = 0.0
        self._finished = False
        self._faults = 0  # runner faults in a row on the pending trial, since it was leased or the station resumed
        self._runner_message = ""
        self._paused = ""  # the reason, while paused
        self._aborted = ""  # the reason, once aborted: no new work; what is journaled is still uploaded
        for r in records:  # a restarted station comes back paused or aborted, as its journal says
            if r.get("kind") == "control":
                if r["command"] == "pause":
                    self._paused = r["reason"]
                elif r["command"] == "resume":
                    self._paused = ""
                else:
                    self._aborted = r["reason"]
        self._counts: tuple[int, tuple[int, int, int]] = (-1, (0, 0, 0))  # journal size -> pending/acked/rejected
        self._thread = threading.Thread(target=self._loop, name=f"hub-{station_id}", daemon=True)

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start talking to the hub (sync what the local journal holds, then lease work)."""
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the hub thread and close the local journal (what is journaled stays for the next start)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.client.close()

    @property
    def paused(self) -> bool:
        """Paused (:meth:`control`): no run may start."""
        with self._lock:
            return bool(self._paused)

    @property
    def finished(self) -> bool:
        """Over: every trial of the budget is journaled and uploaded (never with ``trials`` 0), or
        aborted and everything journaled uploaded."""
        with self._lock:
            return self._finished

    def control(self, command: str, reason: str = "") -> tuple[bool, str]:
        """``pause`` (no new run starts; the lease is kept alive), ``resume``, or ``abort`` (the
        assignment in progress is given up -- the hub requeues it when its lease runs out --, no
        new work is leased, the journaled results are still uploaded): ``(ok, message)``."""
        if command not in COMMANDS:
            return False, f"unknown command {command!r}; one of {COMMANDS}"
        with self._lock:
            if self._aborted:
                return False, f"station {self.station_id} is aborted ({self._aborted})"
            if command == "resume" and not self._paused:
                return False, f"station {self.station_id} is not paused"
            reason = reason or ("" if command == "resume" else f"{command}d by the operator")
            self.client.append({"kind": "control", "command": command, "reason": reason})  # journaled first
            if command == "pause":
                self._paused = reason
            elif command == "resume":
                self._paused, self._faults = "", 0
            else:
                self._aborted, self._assignment, self._leased = reason, None, None
        log.warning("station %s: %s%s", self.station_id, command, f" ({reason})" if reason else "")
        self._wake.set()
        return True, f"station {self.station_id} {'running' if command == 'resume' else command + 'd'}"

    # -- the hub thread -------------------------------------------------------------------
    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            wait = 1.0
            try:
                wait = self._step()
                failures = 0
                with self._lock:
                    if self._problem:
                        log.info("hub %s answers again", self.client.hub_url)
                    self._problem, self._retry_at = "", 0.0
            except HubError as err:
                failures += 1
                wait = min(self.retry_max, self.retry_min * 2 ** (failures - 1))
                with self._lock:
                    first = not self._problem
                    self._problem, self._retry_at = str(err), time.monotonic() + wait
                    self._problem_status = err.status
                if first or failures % 20 == 0:
                    log.warning("%s; %d result(s) kept locally; retrying with back-off", err,
                                len(self.client.pending()))
            except Exception:  # a bug must not silently stop the station: log it and go on
                log.exception("hub thread error; retrying")
                wait = self.retry_max
            self._wake.wait(wait)
            self._wake.clear()

    def _step(self) -> float:
        """Sync, renew, lease when idle; the seconds until the next step is due."""
        remaining = self.client.sync()
        if remaining:
            raise HubError(f"hub {self.client.hub_url} unreachable", 503)
        with self._lock:
            current, spent = self._assignment, self._budget_spent() or bool(self._aborted)
        if current is not None:
            interval = current.lease_seconds / 3
            if time.monotonic() - current.renewed_at >= interval:
                self.client.renew(current.assignment_id)
                current.renewed_at = time.monotonic()
            return max(0.05, interval - (time.monotonic() - current.renewed_at))
        # No assignment in progress, so no result can be journaled now; one journaled after the
        # sync above is still pending: upload it first. Asking for work while holding a lease
        # tells the hub this station lost it (a restart): the hub would requeue that assignment
        # and refuse its result (410).
        if self.client.pending():
            return 0.0
        if spent:
            with self._lock:
                self._finished = True
        else:
            self._lease()
        return 1.0

    def _budget_spent(self) -> bool:
        return self.trials > 0 and self._done >= self.trials

    def _lease(self) -> None:
        """Lease work and resolve its runner ticket (a lease whose resolve failed is kept and retried)."""
        if self._leased is None:
            self._leased = self.client.lease()
        work = self._leased
        try:
            addresses = self.client.resolve(work)
        except HubError as err:
            if err.status != 503:
                self._leased = None  # the lease is gone (expired, revoked): lease again
            raise
        self._leased = None
        with self._lock:
            if self._aborted:
                return
            self._round += 1
            self._faults = 0
            self._assignment = _Assignment(
                str(work["assignment_id"]), str(work["task"]), self._round, addresses,
                {arm: secrets.token_hex(6) for arm in ARMS}, float(work.get("lease_seconds") or 60.0))
        log.info("assignment %s leased: task %s, arms A then B (round %d)", work["assignment_id"], work["task"],
                 self._round)

    # -- the session the trial loop drives (session/driver.py) -------------------------------
    @property
    def state(self) -> SessionState:
        """``running`` (also while waiting for work), ``paused``, ``finished`` or ``aborted``."""
        with self._lock:
            return (SessionState.ABORTED if self._aborted else SessionState.FINISHED if self._finished
                    else SessionState.PAUSED if self._paused else SessionState.RUNNING)

    @property
    def trial_rules(self) -> TrialRules:
        """The journaled rules (``max_faults``, ``scoring``) as the trial loop's."""
        return TrialRules(self.max_faults, self.scoring == "auto", "")

    @property
    def runner_faults(self) -> int:
        """Runner faults in a row on the pending trial, since it was leased or the station resumed."""
        with self._lock:
            return self._faults

    @property
    def runner_message(self) -> str:
        """The last run's message as an operator may see it (a category and an error id)."""
        with self._lock:
            return self._runner_message

    def pause(self, reason: str = "") -> None:
        """Pause (:meth:`control`); the trial loop's fault limit."""
        ok, message = self.control("pause", reason)
        if not ok:
            raise SessionError(message)

    def pending_trial(self) -> PendingTrial | None:
        """The trial to run or score next (arm A, then B), ``None`` while waiting for work.

        ``policy_id`` is the arm's policy-server address: for the runner's goal only.
        """
        with self._lock:
            return self._pending()

    def next_trial(self) -> PendingTrial | None:
        """The pending trial (the hub thread leases the work; ``None`` while there is none)."""
        return self.pending_trial()

    def _pending(self) -> PendingTrial | None:
        a = self._assignment
        if a is None:
            return None
        arm = next(arm for arm in ARMS if arm not in a.scores)
        return PendingTrial(
            session_id=self.session_id, trial_id=2 * a.round - 1 + ARMS.index(arm), round=a.round,
            attempt=a.attempts[arm], label=arm, policy_id=a.addresses[arm], task=a.task,
            task_description=f"hub assignment {a.assignment_id}, arm {arm}", initial_condition="",
            reset_instructions="", token=a.tokens[arm])

    def awaiting(self) -> str:
        """``run`` (the pending trial must run), ``score`` (it ran; a score is due) or ``""``."""
        with self._lock:
            trial = self._pending()
            if trial is None:
                return ""
            assert self._assignment is not None
            return "score" if trial.label in self._assignment.ran else "run"

    def record_runner_result(self, trial_id: int, ok: bool, duration_s: float, message: str = "", *,
                             auto_score: tuple[bool, float] | None = None,
                             goal_seal: dict[str, Any] | None = None) -> PendingTrial | None:
        """The runner's result for the pending trial: ``None`` after a successful run (it waits
        for its score; ``auto_score`` is held for the trial loop), else the trial to run again
        (next attempt; a ``fault`` record is journaled with the runner's category and error id only,
        as a session's journal shows it: the runner's own words may name the policy, and a station
        has no key to seal them with). :class:`~evalstop_ros.session.errors.SessionError`
        if ``trial_id`` is not the pending trial (as a session's)."""
        with self._lock:
            trial = self._pending()
            if trial is None or trial.trial_id != trial_id or self._aborted:
                raise SessionError(f"runner result for trial {trial_id}, which is not the pending trial")
            a = self._assignment
            assert a is not None
            self._runner_message = operator_text(message, ok)
            if ok:
                a.ran.add(trial.label)
                if auto_score is not None:
                    a.auto[trial.label] = auto_score
                return None
            self._faults += 1
            self.client.append({"kind": "fault", "assignment_id": a.assignment_id, "arm": trial.label,
                                "attempt": a.attempts[trial.label], "message": self._runner_message})
            a.attempts[trial.label] += 1
            return self._pending()

    def held_auto_score(self) -> tuple[PendingTrial, bool, float] | None:
        """The pending trial's automatic score from its run, not yet submitted (``None`` if none)."""
        with self._lock:
            trial, a = self._pending(), self._assignment
            if trial is None or a is None or trial.label not in a.ran or trial.label not in a.auto:
                return None
            success, progress = a.auto[trial.label]
            return trial, success, progress

    def void_score(self, trial_id: int, reason: str) -> EditOutcome:
        """Void the pending trial (``correct_score``'s void, e.g. after the fault limit): its
        assignment is given up (journaled ``given_up``); the hub requeues it when its lease runs out."""
        with self._lock:
            trial, a = self._pending(), self._assignment
            if trial is None or a is None or trial.trial_id != trial_id:
                return EditOutcome(False, f"trial {trial_id} is not the pending trial; at a hub station only "
                                   "the pending trial can be voided", None)
            self.client.append({"kind": "given_up", "assignment_id": a.assignment_id, "faults": self._faults,
                                "reason": reason})
            self._assignment, self._faults = None, 0
        log.warning("assignment %s given up (%s); the hub requeues it", a.assignment_id, reason or "voided")
        self._wake.set()
        return EditOutcome(True, f"trial {trial_id} voided: assignment {a.assignment_id} given up", trial_id)

    def submit_score(self, trial_id: int, token: str, success: bool, progress: float,
                     operator: str = "") -> ScoreOutcome:
        """Record a score of the pending trial; the second arm's score journals the result and
        has it uploaded. A score resent unchanged is acknowledged as a duplicate."""
        problem = score_problem(success, progress)
        if problem:
            return ScoreOutcome(False, False, problem)
        score = 1.0 if success else float(progress)
        with self._lock:
            a = self._assignment
            trial = self._pending()
            if a is not None and trial is not None and trial.trial_id == trial_id + 1 and trial.label == "B":
                if token == a.tokens["A"] and a.scores.get("A") == score:  # arm A's score, resent
                    return ScoreOutcome(True, True, f"trial {trial_id} already scored")
            if trial is None or trial.trial_id != trial_id:
                return ScoreOutcome(False, False, f"trial {trial_id} is not the pending trial")
            assert a is not None
            if token != trial.token:
                return ScoreOutcome(False, False, f"wrong token for trial {trial_id}")
            if trial.label not in a.ran:
                return ScoreOutcome(False, False, f"trial {trial_id} has not run yet")
            if self._paused or self._aborted:
                return ScoreOutcome(False, False, f"station {self.station_id} is {'aborted' if self._aborted else 'paused'}"
                                    "; scores are accepted only while it runs")
            a.scores[trial.label] = score
            self._faults = 0
            if len(a.scores) < len(ARMS):
                return ScoreOutcome(True, False, "")
            # journaled (fsync'ed) before anything is uploaded; the hub thread uploads it
            self.client.record_result(a.assignment_id, a.scores["A"], a.scores["B"])
            self._done += 1
            self._assignment = None
        log.info("assignment %s done (scored by %s): result journaled locally, uploading", a.assignment_id,
                 operator[:64])
        self._wake.set()
        return ScoreOutcome(True, False, "")

    # -- status -----------------------------------------------------------------------------
    def _upload_counts(self) -> tuple[int, int, int]:
        """Results (pending, acknowledged, refused) in the local journal, re-read when it grew."""
        size = self.client.journal_size()
        if size != self._counts[0] or size < 0:
            records = self.client.records()
            settled = {r["upload_id"]: r["kind"] for r in records if r["kind"] in ("ack", "rejected")}
            results = [r["upload_id"] for r in records if r["kind"] == "result"]
            self._counts = (size, (sum(u not in settled for u in results), sum(settled.get(u) == "ack" for u in results),
                                   sum(settled.get(u) == "rejected" for u in results)))
        return self._counts[1]

    def status(self) -> WorkStatus:
        """What the station is doing (for ``session_status`` and ``/diagnostics``)."""
        pending, acked, rejected = self._upload_counts()
        awaiting = self.awaiting()
        with self._lock:
            trial = self._pending()
            state = ("aborted" if self._aborted else "finished" if self._finished
                     else "paused" if self._paused else "running" if trial else "waiting_for_work")
            problem = self._problem
            return WorkStatus(
                state, awaiting, self._done, pending, acked, rejected,
                self._assignment.assignment_id if self._assignment else "", trial.trial_id if trial else 0,
                problem, max(0.0, self._retry_at - time.monotonic()) if self._problem else 0.0,
                bool(problem) and self._problem_status == 503)

    def status_fields(self, status: WorkStatus) -> dict[str, Any]:
        """``session_status`` fields (``state_name`` e.g. ``hub:waiting_for_work``,
        ``hub:running:awaiting_score``); no comparisons: the hub runs the tests."""
        name = f"hub:{status.state}" + (f":awaiting_{status.awaiting}" if status.awaiting else "")
        return {"session_id": self.session_id, "state": STATE_CODES[status.state],
                "state_name": name, "trials_done": status.trials_done,
                "budget_left": max(0, self.trials - status.trials_done) if self.trials else 0,
                "pending_trial_id": status.pending_trial_id, "active_policies": [], "active_tasks": [],
                "comparisons": [], "letter_policies": [], "letters": []}

    def diagnostics(self, status: WorkStatus, *, node: str, hardware_id: str, runner: str) -> list[Diagnostic]:
        """The ``/diagnostics`` entry of a station (``station_manager``): WARN while the hub is
        unreachable or refuses, or the runner link has a problem (``runner``)."""
        level, message = OK, f"{status.state}, {status.trials_done} trials journaled, {status.results_pending} to upload"
        if status.state in ("paused", "aborted"):
            level, message = WARN, f"{status.state} ({self._paused or self._aborted})"
        elif status.problem:
            level = WARN
            message = (f"{status.problem}; retrying in {status.retry_in:.1f} s; "
                       f"{status.results_pending} result(s) kept locally")
        elif runner:
            level, message = WARN, runner
        values = (("state", status.state), ("awaiting", status.awaiting), ("hub_url", self.client.hub_url),
                  ("station_id", self.station_id), ("trials_done", str(status.trials_done)),
                  ("results_pending", str(status.results_pending)), ("results_acked", str(status.results_acked)),
                  ("results_rejected", str(status.results_rejected)), ("assignment_id", status.assignment_id),
                  ("pending_trial_id", str(status.pending_trial_id)), ("hub", status.problem or "ok"),
                  ("runner", runner or "ok"), ("journal", str(self.client.journal_path)))
        return [Diagnostic(level, f"{node}: hub station", message, hardware_id, values)]

