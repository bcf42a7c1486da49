"""A station's traffic with the hub, in one background thread: upload, renew, lease, with back-off.

:class:`StationWork` keeps a :class:`~.session.StationSession` (the trials, under the
session's state machine) supplied with the hub's assignments and uploads the results it journals,
so the node's executor never waits on the network:

* while the hub is unreachable (or refuses, e.g. a revoked key) the thread retries with
  exponential back-off (``retry_min`` .. ``retry_max`` seconds), the finished results stay in
  the local journal and go out in order once the hub answers again -- nothing is lost, and a
  station restarted after ``kill -9`` on the same directory uploads what it had journaled;
* the lease of the assignment in progress is renewed every third of its length;
* a restarted station asks for new work, and the hub requeues the lease it lost.

Blinding: a trial names the arm (``label`` ``A`` or ``B``) and the task only; the policy-server
address the hub resolves from the lease's runner ticket is the trial's ``policy_id``, for the
runner's goal and nowhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from ..hub.errors import HubError
from ..session.publishing import OK, WARN, Diagnostic
from ..session.values import STATE_CODES as SESSION_STATE_CODES
from ..session.values import SessionState
from .client import StationClient
from .session import StationSession

__all__ = ["STATE_CODES", "StationWork", "WorkStatus"]

#: Station state -> ``SessionStatus.STATE_*``: a session's (:data:`~evalstop_ros.session.values.STATE_CODES`), and
#: ``waiting_for_work`` as running.
STATE_CODES = {**{state.value: code for state, code in SESSION_STATE_CODES.items() if state is not SessionState.IDLE},
               "waiting_for_work": SESSION_STATE_CODES[SessionState.RUNNING]}

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WorkStatus:
    """A snapshot for ``session_status`` and ``/diagnostics``.

    ``state`` is ``waiting_for_work``, ``running``, ``paused``, ``finished`` (once everything is
    uploaded) or ``aborted`` (a key of :data:`STATE_CODES`); ``awaiting`` is ``run`` or ``score``
    while there is a trial; ``problem`` the last hub error ("" once the hub answers again),
    ``unreachable`` whether it was the hub not answering (rather than refusing).
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
    reason: str = ""


class StationWork:
    """One station against a hub: its :attr:`session` (driven by the trial loop) and the hub thread.

    :param client: The station's hub client (its directory holds the local journal).
    :param station_id: The station's name.
    :param trials, max_faults, scoring: The session's rules (:class:`~.session.StationSession`).
    :param retry_min, retry_max: The back-off's bounds (s).
    """

    def __init__(self, client: StationClient, station_id: str, *, trials: int = 0, max_faults: int = 3,
                 scoring: str = "auto", retry_min: float = 0.2, retry_max: float = 3.0) -> None:
        if not (0 < retry_min <= retry_max):
            raise HubError("0 < retry_min <= retry_max is required")
        self.client, self.station_id = client, station_id
        self.retry_min, self.retry_max = retry_min, retry_max
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        #: The station's trials (:class:`~evalstop_ros.session.driver.DrivenSession`).
        self.session = StationSession(client, station_id, trials=trials, max_faults=max_faults, scoring=scoring)
        self.session.on_change = self._wake.set
        self._leased: dict[str, Any] | None = None  # leased, ticket not resolved yet
        self._renewed: tuple[str, float] = ("", 0.0)  # the assignment last renewed (or taken), when
        self._problem = ""
        self._problem_status = 0
        self._retry_at = 0.0
        self._finished = False
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

    def wake(self) -> None:
        """Let the hub thread look again now (e.g. after a control command)."""
        self._wake.set()

    @property
    def finished(self) -> bool:
        """Over: the session finished or aborted, and everything it journaled uploaded."""
        with self._lock:
            return self._finished

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
        lease = self.session.lease()
        if lease is not None:
            assignment_id, seconds = lease
            interval = seconds / 3
            if self._renewed[0] != assignment_id:
                self._renewed = (assignment_id, time.monotonic())
            elif time.monotonic() - self._renewed[1] >= interval:
                self.client.renew(assignment_id)
                self._renewed = (assignment_id, time.monotonic())
            return max(0.05, interval - (time.monotonic() - self._renewed[1]))
        # No assignment in progress, so no result can be journaled now; one journaled after the
        # sync above is still pending: upload it first. Asking for work while holding a lease
        # tells the hub this station lost it (a restart): the hub would requeue that assignment
        # and refuse its result (410).
        if self.client.pending():
            return 0.0
        if self.session.wants_work():
            self._lease()
        elif self.session.state in (SessionState.FINISHED, SessionState.ABORTED):
            with self._lock:
                self._finished = True
        return 1.0

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
        self.session.assign(work, addresses)

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
        session = self.session.status()
        with self._lock:
            state = session.state.value
            if session.state == SessionState.FINISHED and not self._finished:
                state = "waiting_for_work"  # its last results are not all uploaded yet
            elif session.state == SessionState.RUNNING and not session.pending_trial_id:
                state = "waiting_for_work"
            problem = self._problem
            return WorkStatus(
                state, session.awaiting, session.trials_done, pending, acked, rejected, session.assignment_id,
                session.pending_trial_id, problem,
                max(0.0, self._retry_at - time.monotonic()) if self._problem else 0.0,
                bool(problem) and self._problem_status == 503, session.reason)

    def status_fields(self, status: WorkStatus) -> dict[str, Any]:
        """``session_status`` fields (``state_name`` e.g. ``hub:waiting_for_work``,
        ``hub:running:awaiting_score``); no comparisons: the hub runs the tests."""
        name = f"hub:{status.state}" + (f":awaiting_{status.awaiting}" if status.awaiting else "")
        trials = self.session.trials
        return {"session_id": self.session.session_id, "state": STATE_CODES[status.state],
                "state_name": name, "trials_done": status.trials_done,
                "budget_left": max(0, trials - status.trials_done) if trials else 0,
                "pending_trial_id": status.pending_trial_id, "active_policies": [], "active_tasks": [],
                "comparisons": [], "letter_policies": [], "letters": []}

    def diagnostics(self, status: WorkStatus, *, node: str, hardware_id: str, runner: str) -> list[Diagnostic]:
        """The ``/diagnostics`` entry of a station (``station_manager``): WARN while paused or aborted, while the
        hub is unreachable or refuses, or the runner link has a problem (``runner``)."""
        level, message = OK, f"{status.state}, {status.trials_done} trials journaled, {status.results_pending} to upload"
        if status.state in ("paused", "aborted"):
            level, message = WARN, f"{status.state} ({status.reason})"
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
