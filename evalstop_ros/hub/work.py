"""A station's hub work as blinded trials, without ROS: the evaluation manager's hub mode.

:class:`StationWork` turns the A/B assignments a hub leases to one station into trials for the
manager node (:class:`~evalstop_ros.session.PendingTrial`, arm ``A`` first, then ``B``), takes
the runner's results and the scores (the runner's automatic ones or the operator's), journals
each finished assignment locally first (:class:`~.station.StationClient`'s journal, fsync'ed),
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
import math
import secrets
import threading
import time
from typing import Any

from ..session.publishing import OK, WARN, Diagnostic
from ..session.values import STATE_CODES as SESSION_STATE_CODES
from ..session.values import PendingTrial, ScoreOutcome, SessionState
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
    scores: dict[str, float] = dataclasses.field(default_factory=dict)
    faults: int = 0
    renewed_at: float = dataclasses.field(default_factory=time.monotonic)


@dataclasses.dataclass(frozen=True)
class WorkStatus:
    """A snapshot for ``session_status`` and ``/diagnostics``.

    ``state`` is ``waiting_for_work``, ``running``, ``paused``, ``finished`` or ``aborted`` (a key
    of :data:`STATE_CODES`); ``awaiting`` is ``run`` or ``score`` while there is a trial;
    ``problem`` the last hub error ("" once the hub answers again).
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


class StationWork:
    """One station's work loop against a hub; the node drives it, a thread talks to the hub.

    :param client: The station's hub client (its directory holds the local journal).
    :param station_id: The station's name (session id ``hub:<station_id>`` of its trials).
    :param trials: Stop after this many A/B trials journaled locally (earlier runs count), all
        uploaded; 0 for no limit.
    :param max_faults: Runner faults in a row on one trial after which the assignment is given
        up (the hub requeues it when the station asks for new work).

    The first start journals ``trials`` and ``max_faults`` as a ``rules`` record; a restart on the
    same journal keeps those (a changed parameter is logged and ignored), as a session keeps its
    journaled ``runner.max_attempts``. ``pause``/``resume``/``abort`` are journaled as ``control``
    records (a restart comes back paused or aborted), each runner fault as a ``fault`` record
    (assignment, arm, attempt) and an assignment given up as ``given_up``.
    """

    def __init__(self, client: StationClient, station_id: str, *, trials: int = 0, max_faults: int = 3,
                 retry_min: float = 0.2, retry_max: float = 3.0) -> None:
        if trials < 0 or max_faults < 1 or not (0 < retry_min <= retry_max):
            raise HubError("trials must be >= 0, max_faults >= 1 and 0 < retry_min <= retry_max")
        self.client, self.station_id = client, station_id
        self.session_id = f"hub:{station_id}"
        records = client.records()
        rules = next((r for r in records if r.get("kind") == "rules"), None)
        if rules is None:  # the first start: the parameters become the journaled rules
            client.append({"kind": "rules", "max_faults": max_faults, "trials": trials})
            self.trials, self.max_faults = trials, max_faults
        else:  # a restart keeps the journaled rules, like a session's runner.max_attempts
            self.trials, self.max_faults = int(rules["trials"]), int(rules["max_faults"])
            if (self.trials, self.max_faults) != (trials, max_faults):
                log.warning("station %s: its journal %s holds max_faults %d, trials %d; the parameters "
                            "(max_faults %d, trials %d) are ignored", station_id, client.journal_path,
                            self.max_faults, self.trials, max_faults, trials)
        self.retry_min, self.retry_max = retry_min, retry_max
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = sum(r["kind"] == "result" for r in records)
        self._round = sum(r["kind"] == "leased" for r in records)
        self._assignment: _Assignment | None = None
        self._leased: dict[str, Any] | None = None  # leased, ticket not resolved yet
        self._problem = ""
        self._retry_at = 0.0
        self._finished = False
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
        """Stop the hub thread (what is journaled stays for the next start)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

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
                self._paused = ""
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
        if current is None and spent and not self.client.pending():
            with self._lock:
                self._finished = True
        if current is not None:
            interval = current.lease_seconds / 3
            if time.monotonic() - current.renewed_at >= interval:
                self.client.renew(current.assignment_id)
                current.renewed_at = time.monotonic()
            return max(0.05, interval - (time.monotonic() - current.renewed_at))
        if not spent:
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
            self._assignment = _Assignment(
                str(work["assignment_id"]), str(work["task"]), self._round, addresses,
                {arm: secrets.token_hex(6) for arm in ARMS}, float(work.get("lease_seconds") or 60.0))
        log.info("assignment %s leased: task %s, arms A then B (round %d)", work["assignment_id"], work["task"],
                 self._round)

    # -- the node's side --------------------------------------------------------------------
    def pending_trial(self) -> PendingTrial | None:
        """The trial to run or score next (arm A, then B), ``None`` while waiting for work.

        ``policy_id`` is the arm's policy-server address: for the runner's goal only.
        """
        with self._lock:
            return self._pending()

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

    def record_run(self, trial_id: int, ok: bool, message: str) -> bool:
        """The runner's result for ``trial_id``; ``False`` if that trial is no longer pending.

        A fault counts against the trial (its next run has the next attempt number); after
        ``max_faults`` in a row the assignment is given up.
        """
        with self._lock:
            trial = self._pending()
            if trial is None or trial.trial_id != trial_id:
                return False
            a = self._assignment
            assert a is not None
            if ok:
                a.faults = 0
                a.ran.add(trial.label)
                return True
            a.faults += 1
            self.client.append({"kind": "fault", "assignment_id": a.assignment_id, "arm": trial.label,
                                "attempt": a.attempts[trial.label], "message": message})
            a.attempts[trial.label] += 1
            if a.faults >= self.max_faults:
                self.client.append({"kind": "given_up", "assignment_id": a.assignment_id, "faults": a.faults})
                log.error("assignment %s given up: the runner failed %d times in a row (%s); the hub requeues it",
                          a.assignment_id, a.faults, message)
                self._assignment = None
                self._wake.set()
            return True

    def submit_score(self, trial_id: int, token: str, success: bool, progress: float, scorer: str) -> ScoreOutcome:
        """Record a score of the pending trial; the second arm's score journals the result and
        has it uploaded. A score resent unchanged is acknowledged as a duplicate."""
        if not (math.isfinite(progress) and 0.0 <= progress <= 1.0):
            return ScoreOutcome(False, False, f"progress must lie in [0, 1]; found {progress!r}")
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
            a.scores[trial.label] = score
            if len(a.scores) < len(ARMS):
                return ScoreOutcome(True, False, "")
            # journaled (fsync'ed) before anything is uploaded; the hub thread uploads it
            self.client.record_result(a.assignment_id, a.scores["A"], a.scores["B"])
            self._done += 1
            self._assignment = None
        log.info("assignment %s done (scored by %s): result journaled locally, uploading", a.assignment_id, scorer)
        self._wake.set()
        return ScoreOutcome(True, False, "")

    # -- status -----------------------------------------------------------------------------
    def _upload_counts(self) -> tuple[int, int, int]:
        """Results (pending, acknowledged, refused) in the local journal, re-read when it grew."""
        try:
            size = self.client.journal_path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size != self._counts[0]:
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
                problem, max(0.0, self._retry_at - time.monotonic()) if self._problem else 0.0)

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
        """The ``/diagnostics`` entry of the hub mode: WARN while the hub is unreachable or
        refuses, or the runner link has a problem (``runner``)."""
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

