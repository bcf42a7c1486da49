"""``station_manager``: one station of an evaluation hub (the node side of
:class:`~evalstop_ros.station.session.StationSession`); topics, rules and parameters: docs/nodes.md.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from evalstop.msg import TrialScore
from evalstop.srv import CorrectScore, SessionControl
from rclpy.qos import QoSProfile

from .. import qos
from ..hub.errors import HubError
from ..session.driver import Action, TrialDriver, Verdict
from ..session.goal_sealing import GoalSealer
from ..session.values import PendingTrial, ScoreOutcome
from ..station.client import StationClient, read_key
from ..station.session import SCORING
from ..station.work import StationWork
from ._common import declare
from .manager_base import ManagerNode, run_manager
from .manager_services import apply_control, control_command
from .quick_log import SessionLogHandler
from .runner_link import RunnerLink, RunResult

__all__ = ["StationManager", "main"]

#: How often the station looks at the work and the goal in flight (s).
TICK = 0.2
#: The loggers whose lines the node forwards to its ROS log: the session layer's (state machine, trial loop)
#: and the station's (its session, the hub thread).
STATION_LOGGERS = ("evalstop_ros.session", "evalstop_ros.station")


def _station_work(node: ManagerNode) -> tuple[StationWork, float]:
    """Declare the hub parameters on ``node``; its :class:`StationWork` (the local journal opened) and the
    runner goal's time limit (s). :class:`ValueError` names a bad parameter."""
    hub_url: str = declare(node, "hub_url", "", "Hub URL (e.g. http://hub:8765) of which this node is a station.",
                           read_only=True)
    station_id: str = declare(node, "station_id", "", "This station's id at the hub (names its local journal "
                              "directory, journal_dir/hub-<station_id>).", read_only=True)
    key_file: str = declare(node, "hub_key_file", "", "File holding the station's hub API key (empty: "
                            "$EVALSTOP_HUB_KEY). The key itself is never a parameter.", read_only=True)
    trials: int = declare(node, "hub_trials", 0, "A/B trials to run, counting those already in the local journal "
                          "(0: no limit). With exit_on_finish the node exits once all are uploaded.",
                          int_range=(0, 10_000_000), read_only=True)
    scoring: str = declare(node, "hub_scoring", "auto", "'auto' (the runner's score; the operator's where the "
                           "runner sends no valid one) or 'operator'. Journaled on the station's first start.",
                           read_only=True)
    run_timeout: float = declare(node, "hub_run_timeout", 600.0, "Seconds a runner goal may run.",
                                 float_range=(0.1, 86400.0), read_only=True)
    if not hub_url:
        raise ValueError("`hub_url` is required: the hub this node is a station of (e.g. http://hub:8765)")
    if not station_id:
        raise ValueError("`station_id` is required with `hub_url`")
    if scoring not in SCORING:
        raise ValueError(f"`hub_scoring` must be one of {SCORING}; found {scoring!r}")
    if not hub_url.startswith(("http://", "https://")):
        raise ValueError(f"`hub_url` must be an http:// or https:// URL; found {hub_url!r}")
    try:
        key = read_key(key_file or None)
    except HubError as err:
        raise ValueError(f"hub mode: {err}") from err
    directory = node.journal_path(f"hub-{station_id}").with_suffix("")
    try:
        work = StationWork(StationClient(hub_url, key, directory, timeout=5.0), station_id, trials=trials,
                           max_faults=node.max_attempts, scoring=scoring)
    except HubError as err:  # the local journal cannot be opened (another station on it, a broken journal ...)
        raise ValueError(f"hub mode: {err}") from err
    return work, run_timeout


class StationManager(ManagerNode):
    """Runs the hub's work on this station's runner and operator (see the module docstring)."""

    def __init__(self, *, latched_qos: QoSProfile, comparison_qos: QoSProfile, event_qos: QoSProfile,
                 journal_qos: QoSProfile, diagnostics_qos: QoSProfile) -> None:
        super().__init__("station_manager")
        # the session layer's and the station's log lines in the ROS log (no policy ids: arms A and B only)
        self._log_handler = SessionLogHandler(self, str)
        for name in STATION_LOGGERS:
            forwarded = logging.getLogger(name)
            forwarded.addHandler(self._log_handler)
            forwarded.setLevel(logging.INFO)
            forwarded.propagate = False
        self.work, self.run_timeout = _station_work(self)
        self.runner_name = self.runner_action or "run_trial"
        self.open_interfaces(latched_qos=latched_qos, comparison_qos=comparison_qos, event_qos=event_qos,
                             journal_qos=journal_qos, diagnostics_qos=diagnostics_qos)
        work = self.work
        session = self.session = work.session
        self.driver = TrialDriver(session, self.runner_name)
        # a station reveals no key: its seal key is its own, drawn afresh (sealed goals need no audit here)
        sealer = GoalSealer(self.runner_key, secrets.token_bytes(32), session.session_id)
        self._link = RunnerLink(self, self.runner_name, limits=self.runner_limits, on_done=self._done, sealer=sealer)
        self._status: dict[str, Any] | None = None
        self._ended = False
        self.get_logger().info(
            f"hub mode: station {work.station_id!r} of hub {work.client.hub_url}, runner '{self.runner_name}', "
            f"scoring {session.scoring}, local journal {work.client.journal_path}"
            + (f", {session.trials} trials" if session.trials else ""))
        self.publisher.reset()
        work.start()
        self.create_timer(TICK, self._tick)

    # -- the loop -------------------------------------------------------------------------
    def _tick(self) -> None:
        """Move the work on (:meth:`TrialDriver.advance`): publish the pending trial and the
        status, start or watch the runner goal, acknowledge a held automatic score, finish."""
        if self._ended:
            return
        if self.work.finished:
            self._finish()
            return
        self.watch_runners(self.driver, self._link)  # one runner per action: goals held, the work paused
        upcoming = self.driver.advance(runner_busy=self._link.trial is not None)
        if upcoming.auto is not None:
            self._ack(upcoming.auto.trial.trial_id, upcoming.auto.outcome, self.driver.auto_scorer)
        trial = self.session.pending_trial()
        if trial is not None:
            self.publisher.request(trial)
            if upcoming.action is Action.RUN and self._link.trial is None:
                self._link.start(trial)
        elif self._link.trial is not None:
            self._link.cancel()  # the assignment was given up
        self._link.watch(self.run_timeout)
        self._publish_status()

    def _publish_status(self) -> None:
        fields = self.work.status_fields(self.work.status())
        if fields != self._status:
            self.publisher.station_status(fields)
            self._status = fields

    def _done(self, trial: PendingTrial, result: RunResult) -> None:
        """The run is over: the trial loop's rules (:meth:`TrialDriver.run_done`); move on."""
        verdict = self.driver.run_done(trial, result.ok, result.duration, result.message,
                                       auto_score=result.auto_score, goal_seal=result.goal_seal)
        log = self.get_logger()
        if verdict.verdict is Verdict.PAUSED:
            log.error(verdict.message)
        elif verdict.verdict is Verdict.RETRY:
            # a category and an id only: the runner's own words may name the policy (session/runner_messages.py)
            log.warning(f"trial {trial.trial_id}: runner fault: {self.session.runner_message}")
        elif verdict.verdict is Verdict.OPERATOR:
            log.warning(verdict.message)
        elif verdict.verdict is Verdict.RAN and not self.driver.auto:
            log.info(f"trial {trial.trial_id}: run done; waiting for the operator's score")
        elif verdict.message:
            log.info(verdict.message)
        self._tick()

    # -- services ---------------------------------------------------------------------------
    def _on_session_control(self, request: SessionControl.Request, response: SessionControl.Response) -> None:
        """Pause, resume or abort the station (e.g. policy_runner's emergency stop)."""
        command, response.message = control_command(request.command)
        if command is None:
            response.ok = False
        else:
            response.ok, response.message = apply_control(self.session, command, request)
            if response.ok and command == "abort":
                self._link.cancel()
            self.work.wake()
            self._tick()
        if not response.ok:
            self.get_logger().warning(f"session_control {command or request.command} refused: {response.message}")

    def _on_correct_score(self, request: CorrectScore.Request, response: CorrectScore.Response) -> None:
        """``ACTION_VOID`` of the pending trial: give its assignment up (e.g. after the fault limit paused
        the station); a correction or an undo has nothing to act on here (every result is uploaded as it
        is journaled)."""
        if request.action == CorrectScore.Request.ACTION_VOID:
            trial_id = int(request.trial_id)
            outcome = self.session.void_score(trial_id, request.reason.strip())
            if outcome.applied and self._link.trial is not None and self._link.trial.trial_id == trial_id:
                self._link.cancel()
            self._tick()
            response.ok, response.message = outcome.applied, outcome.reason
        else:
            response.ok, response.message = False, "in hub mode only ACTION_VOID of the pending trial applies"
        if not response.ok:
            self.get_logger().warning(f"correct_score refused for trial {request.trial_id}: {response.message}")

    # -- scores -----------------------------------------------------------------------------
    def _on_score(self, msg: TrialScore) -> None:
        """An operator's score (``trial_score``)."""
        scorer = msg.scorer
        outcome = self.session.submit_score(int(msg.trial_id), msg.token, bool(msg.success), float(msg.progress),
                                            scorer)
        self._ack(int(msg.trial_id), outcome, scorer)
        self._tick()

    def _ack(self, trial_id: int, outcome: ScoreOutcome, scorer: str) -> None:
        if outcome.accepted and not outcome.duplicate:
            self.get_logger().info(f"trial {trial_id} scored by {scorer[:64]!r}")
        elif not outcome.accepted:
            self.get_logger().warning(f"score for trial {trial_id} rejected: {outcome.reason}")
        self.publisher.ack(self.session.session_id, trial_id, outcome)

    # -- status -----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        """``/diagnostics`` of the station (the 1 s timer)."""
        self.send_diagnostics(self.work.diagnostics(self.work.status(), node=self.get_name(),
                                                    hardware_id=self.runner_name,
                                                    runner=self.runner_state(self._link, self.runner_name)))

    def _finish(self) -> None:
        """Every trial is journaled and uploaded: say so, and exit with ``exit_on_finish``."""
        self._ended = True
        self._publish_status()
        self.publisher.end(self.session.session_id)
        status = self.work.status()
        self.get_logger().info(
            f"hub station {self.work.station_id} {status.state}: {status.trials_done} trials, {status.results_acked} "
            f"counted by the hub, {status.results_rejected} refused (their leases had been handed out again)")
        self.exit_when_lingered()

    def destroy_node(self) -> None:
        """Stop the hub thread, then destroy the node."""
        if getattr(self, "work", None) is not None:  # (also called by rclpy's shutdown when __init__ failed half-way)
            self.work.close()
        handler = getattr(self, "_log_handler", None)
        if handler is not None:
            for name in STATION_LOGGERS:
                logging.getLogger(name).removeHandler(handler)
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the station until Ctrl-C, or until its work is over with ``exit_on_finish``.

    Exit status: 0 normally, 2 for invalid parameters (one FATAL line naming the value).
    """
    return run_manager("station_manager", lambda: StationManager(
        latched_qos=qos.LATCHED_QOS, comparison_qos=qos.COMPARISON_QOS, event_qos=qos.EVENT_QOS,
        journal_qos=qos.JOURNAL_EVENT_QOS, diagnostics_qos=qos.DIAGNOSTICS_QOS), args)
