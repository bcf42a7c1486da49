"""``evaluation_manager``: runs one :class:`~evalstop_ros.session.EvaluationSession` over ROS.

The node only turns messages into calls on the session object (plain Python, journaled,
unit-tested without DDS) and the session's answers back into messages:

* publishes the pending trial, blinded, on ``trial_request`` (latched: a late operator
  terminal still sees it; ``trial_id`` 0 once nothing is pending);
* sends it to the runner as a ``RunTrial`` goal (``runner_action``; retried after a runner
  fault, the session paused after ``max_attempts`` faults in a row);
* records scores from ``trial_score`` -- the operator's, or, when the session config says
  ``scoring: auto``, the runner's own ``auto_success``/``auto_progress``, which the manager
  submits itself as scorer ``auto:<runner action>`` -- and answers every score on
  ``score_ack`` (a rejection carries the reason that is also logged);
* publishes ``session_status`` (latched), ``comparison_status`` (one message per changed
  comparison; with a multi-task claim also per changed claim row, ``task`` ``"*"``), ``/diagnostics``, and for recordings ``session_config`` (the pre-registered
  design, latched) and ``session_event`` (every journal event right after it is committed;
  after a restart the whole journal again, same ``seq``);
* serves ``start_session``, ``session_control`` (pause/resume/abort) and ``correct_score``.

Crash safety comes from the session journal (``journal_dir/<session_id>.db``): started again
with the same ``session_id`` the manager replays it and carries on from the pending trial.
A trial whose automatic score was lost with the crash (run recorded, score not) is run again.

When the session ends the node keeps serving its final status (a lab dashboard can still
read it), unless ``exit_on_finish`` is set (the demo and tests), then it exits with status 0.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import pathlib
import sqlite3
from typing import Any

import rclpy
import yaml
from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionClient
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.task import Future

from evalstop.action import RunTrial
from evalstop.msg import ComparisonStatus, ScoreAck, SessionEvent, SessionStatus, TrialRequest, TrialScore
from evalstop.msg import SessionConfig as SessionConfigMsg
from evalstop.srv import CorrectScore, SessionControl, StartSession

from .. import __version__, qos
from ..session import ConfigError, EvaluationSession, SessionConfig, SessionError, SessionState, parse_config
from ..session import ComparisonStatus as SessionComparison
from ..session import TrialRequest as SessionTrial
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, declare, ros_context

__all__ = ["EvaluationManager", "main"]

#: SessionState -> SessionStatus.STATE_*.
STATE_CODES = {
    SessionState.IDLE: SessionStatus.STATE_IDLE,
    SessionState.RUNNING: SessionStatus.STATE_RUNNING,
    SessionState.PAUSED: SessionStatus.STATE_PAUSED,
    SessionState.FINISHED: SessionStatus.STATE_FINISHED,
    SessionState.ABORTED: SessionStatus.STATE_ABORTED,
}
FINAL = (SessionState.FINISHED, SessionState.ABORTED)
#: Parameters fixed for the life of a session (a change is refused while one is active).
SESSION_PARAMETERS = ("alpha", "method", "n_max", "config_file", "session_id", "journal_dir", "runner_action")


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


class _RosLogHandler(logging.Handler):
    """Forwards the session layer's Python log records to the node's ROS logger."""

    def __init__(self, node: Node) -> None:
        super().__init__(logging.INFO)
        self._logger = node.get_logger()

    #: Session records the node logs itself, with more context (the ROS trial id and scorer).
    SKIP = frozenset({"score for trial %s rejected: %s"})

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg in self.SKIP:
            return
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            self._logger.error(message)
        elif record.levelno >= logging.WARNING:
            self._logger.warning(message)
        else:
            self._logger.info(message)


class EvaluationManager(Node):
    """Drives an evaluation session: trials out, runner goals, scores in, status out."""

    def __init__(self, *, latched_qos: QoSProfile, comparison_qos: QoSProfile, event_qos: QoSProfile,
                 journal_qos: QoSProfile, diagnostics_qos: QoSProfile) -> None:
        super().__init__("evaluation_manager")
        self.config_file: str = declare(
            self, "config_file", "", "Session config (YAML) started at launch (auto_start) or by start_session.")
        self.session_id: str = declare(
            self, "session_id", "",
            "Session id; the journal is journal_dir/<session_id>.db. Reusing an id resumes that session. "
            "Empty: <config name>-<UTC time>.")
        self.journal_dir: str = declare(
            self, "journal_dir", "", "Directory of the session journals (empty: $ROS_HOME/evalstop or ~/.ros/evalstop).")
        self.runner_action: str = declare(
            self, "runner_action", "", "RunTrial action of the robot's runner (empty: the config's runner.action_name).")
        self.auto_start: bool = declare(
            self, "auto_start", True, "Start (or resume) the session from config_file at launch.")
        self.exit_on_finish: bool = declare(
            self, "exit_on_finish", False, "Exit (status 0) once the session is finished or aborted.")
        self.exit_linger: float = declare(
            self, "exit_linger", 2.0,
            "With exit_on_finish: seconds to keep serving the final (latched) status before exiting, "
            "so that subscribers still being discovered receive it.")
        self.max_attempts: int = declare(
            self, "max_attempts", 3, "Runner faults in a row on one trial before the session pauses.")
        self.journal_fsync: bool = declare(
            self, "journal_fsync", True,
            "fsync every journal append (survives a power cut); false survives a killed process only.")
        # Pre-registered test settings: overrides of the config before a session starts, fixed after.
        self.alpha: float = declare(
            self, "alpha", 0.0, "Override of the config's session alpha, in (0, 1) (0: keep the config's).")
        self.method: str = declare(
            self, "method", "", "Override of every metric's sequential method, e.g. 'nscore' (empty: the config's).")
        self.n_max: int = declare(
            self, "n_max", 0, "Override of the config's trial budget per comparison (0: keep the config's).")
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.get_logger().info(
            f"QoS: trial_request/session_status/session_config {qos.describe(latched_qos)}, comparison_status "
            f"{qos.describe(comparison_qos)}, session_event {qos.describe(journal_qos)}, trial_score/score_ack "
            f"{qos.describe(event_qos)}")
        self._request_pub = self.create_publisher(TrialRequest, "trial_request", latched_qos)
        self._status_pub = self.create_publisher(SessionStatus, "session_status", latched_qos)
        self._comparison_pub = self.create_publisher(ComparisonStatus, "comparison_status", comparison_qos)
        self._ack_pub = self.create_publisher(ScoreAck, "score_ack", event_qos)
        self._config_pub = self.create_publisher(SessionConfigMsg, "session_config", latched_qos)
        self._event_pub = self.create_publisher(SessionEvent, "session_event", journal_qos)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", diagnostics_qos)
        self.create_subscription(TrialScore, "trial_score", self._on_score, event_qos)
        self.create_service(StartSession, "start_session", self._on_start_session)
        self.create_service(SessionControl, "session_control", self._on_session_control)
        self.create_service(CorrectScore, "correct_score", self._on_correct_score)
        self.create_timer(1.0, self._publish_diagnostics)

        self._log_handler = _RosLogHandler(self)
        session_log = logging.getLogger("evalstop_ros.session")
        session_log.addHandler(self._log_handler)
        session_log.setLevel(logging.INFO)
        session_log.propagate = False

        #: Set (to the exit status) when the node should exit: session over and exit_on_finish.
        self.done = Future()
        self.session: EvaluationSession | None = None
        self._runner: ActionClient | None = None
        self._runner_name = ""
        self._goal_trial: tuple[int, int] | None = None  # (trial_id, attempt) of the goal in flight
        self._goal_handle: Any = None
        self._goal_timer: Any = None
        self._retry_timer: Any = None
        self._waiting_logged = False
        self._faults = 0
        self._operator_trial = 0  # auto-scoring session, but this trial waits for an operator score
        self._held_score: tuple[SessionTrial, bool, float] | None = None  # auto score that came while paused
        self._published_request: tuple[int, int] | None = None
        self._published_comparisons: list[tuple[int, int]] = []
        self._ended = False
        self._journal_reader: sqlite3.Connection | None = None
        self._published_seq = 0  # last journal event published on session_event

        if self.auto_start and self.config_file:
            ok, message = self.start_session(self.session_id, self.config_file)
            if not ok:
                raise SessionError(message)
        else:
            self.get_logger().info("idle: waiting for a start_session request")
            self._publish_status()

    # -- parameters -------------------------------------------------------------------------
    def _active(self) -> bool:
        return self.session is not None and self.session.state not in FINAL

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Refuse changes to the pre-registered settings while a session is active; check values."""
        for param in params:
            reason = ""
            if param.name in SESSION_PARAMETERS and self._active():
                assert self.session is not None
                reason = (f"cannot change `{param.name}` while session {self.session.session_id!r} is "
                          f"{self.session.state.value}: the test is pre-registered (config hash "
                          f"{self.session.config.config_hash[:12]}); finish or abort the session first")
            elif param.name == "alpha" and not (param.value == 0.0 or 0.0 < param.value < 1.0):
                reason = f"`alpha` must lie in (0, 1), or be 0 for the config's; found {param.value!r}"
            elif param.name == "n_max" and param.value < 0:
                reason = f"`n_max` must be >= 1, or 0 for the config's; found {param.value!r}"
            elif param.name == "max_attempts" and param.value < 1:
                reason = f"`max_attempts` must be >= 1; found {param.value!r}"
            if reason:
                self.get_logger().warning(f"parameter change refused: {reason}")
                return SetParametersResult(successful=False, reason=reason)
        for param in params:
            if hasattr(self, param.name):
                setattr(self, param.name, param.value)
        return SetParametersResult(successful=True)

    # -- starting ---------------------------------------------------------------------------
    def _load_config(self, path: str) -> SessionConfig:
        """The config at ``path`` with this node's alpha/method/n_max overrides applied."""
        try:
            data = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise ConfigError(path, f"cannot read the file: {err.strerror or err}") from err
        except yaml.YAMLError as err:
            raise ConfigError(path, f"not valid YAML: {err}") from err
        if isinstance(data, dict):
            if self.alpha:
                data["alpha"] = self.alpha
                for metric in data.get("metrics") or []:
                    if isinstance(metric, dict):
                        metric.pop("alpha", None)
            if self.n_max:
                data["n_max"] = self.n_max
            if self.method:
                metrics = data.get("metrics") or [{"name": "success"}, {"name": "progress"}]
                data["metrics"] = [{**m, "method": self.method} for m in metrics if isinstance(m, dict)]
        return parse_config(data, path)

    def _journal_path(self, session_id: str) -> pathlib.Path:
        base = self.journal_dir or os.path.join(
            os.environ.get("ROS_HOME", os.path.expanduser("~/.ros")), "evalstop")
        directory = pathlib.Path(base).expanduser()
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{session_id}.db"

    def start_session(self, session_id: str, config_path: str) -> tuple[bool, str]:
        """Start (or resume from its journal) a session; returns ``(ok, message)``."""
        if self._active():
            assert self.session is not None
            return False, f"session {self.session.session_id!r} is {self.session.state.value}; abort it first"
        if not config_path:
            return False, "no config: set `config_path` or the `config_file` parameter"
        try:
            config = self._load_config(config_path)
        except ConfigError as err:
            self.get_logger().error(f"session not started: invalid config {err}")
            return False, f"invalid config {err}"
        session_id = session_id or (
            f"{pathlib.Path(config_path).stem}-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}")
        path = self._journal_path(session_id)
        resumed = path.exists()
        try:
            session = EvaluationSession.open(path, config, session_id, durable=self.journal_fsync)
        except SessionError as err:
            self.get_logger().error(f"session {session_id!r} not started: {err}")
            return False, str(err)
        if self.session is not None:
            self.session.close()
        self.session, self._ended, self._faults = session, False, 0
        self._published_request, self._published_comparisons = None, []
        self._held_score, self._operator_trial = None, 0
        self._runner_name = self.runner_action or config.runner.action_name
        if self._runner is not None:
            self._runner.destroy()
        self._runner = ActionClient(self, RunTrial, self._runner_name)
        self._open_journal_reader(path)
        config_msg = SessionConfigMsg(session_id=session_id, config_json=config.canonical_json(),
                                   config_hash=config.config_hash, version=__version__)
        config_msg.header.stamp = self.get_clock().now().to_msg()
        self._config_pub.publish(config_msg)
        if session.state == SessionState.IDLE:
            session.start()
        status = session.status()
        verb = "resumed from its journal" if resumed else "opened"
        message = (f"session {session_id} {verb} ({status.state.value}, {status.trials_scored} trials scored): "
                   f"runner '{self._runner_name}', scoring {config.scoring}, journal {path}")
        self.get_logger().info(message)
        self._advance()
        return True, message

    # -- the trial loop ---------------------------------------------------------------------
    def _advance(self) -> None:
        """Move the session on: issue/run the pending trial, or wrap up a finished session."""
        session = self.session
        if session is None:
            return
        if session.state == SessionState.RUNNING and self._goal_trial is None:
            try:
                trial = session.next_trial()
            except SessionError as err:  # not expected while RUNNING; keep the node alive
                self.get_logger().error(f"cannot issue a trial: {err}")
                trial = None
            if trial is not None:
                self._publish_request(trial)
                status = session.status()
                if status.awaiting == "run":
                    self._send_goal(trial)
                elif session.config.scoring == "auto" and trial.trial_id != self._operator_trial:
                    # A recorded run but no score: a crash lost the automatic score. Run it again
                    # (journaled as a second runner result); the decision to re-run ignores the outcome.
                    self.get_logger().info(f"trial {trial.trial_id}: automatic score missing; running it again")
                    self._send_goal(trial)
        self._publish_status()
        if session.state in FINAL and not self._ended:
            self._end()

    def _publish_request(self, trial: SessionTrial) -> None:
        key = (trial.trial_id, trial.attempt)
        if key == self._published_request:
            return
        msg = TrialRequest(
            session_id=trial.session_id, trial_id=trial.trial_id, round=trial.round, attempt=trial.attempt,
            label=trial.label, task=trial.task, task_description=trial.task_description,
            initial_condition=trial.initial_condition, reset_instructions=trial.reset_instructions, token=trial.token)
        msg.header.stamp = self.get_clock().now().to_msg()
        self._request_pub.publish(msg)
        self._published_request = key

    def _send_goal(self, trial: SessionTrial) -> None:
        assert self._runner is not None
        if not self._runner.server_is_ready():
            if not self._waiting_logged:
                self.get_logger().warning(f"trial {trial.trial_id}: waiting for runner action server '{self._runner_name}'")
                self._waiting_logged = True
            self._schedule_retry()
            return
        self._waiting_logged = False
        goal = RunTrial.Goal(session_id=trial.session_id, trial_id=trial.trial_id, policy_id=trial.policy_id,
                             task=trial.task, initial_condition=trial.initial_condition)
        self._goal_trial = (trial.trial_id, trial.attempt)
        self.get_logger().info(f"trial {trial.trial_id} (label {trial.label}, attempt {trial.attempt}): runner goal sent")
        future = self._runner.send_goal_async(goal)
        future.add_done_callback(lambda f, t=trial: self._on_goal_response(t, f))

    def _schedule_retry(self) -> None:
        if self._retry_timer is None:
            def retry() -> None:
                self.destroy_timer(self._retry_timer)
                self._retry_timer = None
                self._advance()
            self._retry_timer = self.create_timer(0.5, retry)

    def _on_goal_response(self, trial: SessionTrial, future: Future) -> None:
        handle = future.result()
        if handle is None or not handle.accepted:
            self._on_run_done(trial, ok=False, duration=0.0, message="goal rejected by the runner", result=None)
            return
        self._goal_handle = handle
        assert self.session is not None
        timeout = self.session.config.runner.timeout_s
        self._goal_timer = self.create_timer(timeout, lambda: self._on_goal_timeout(trial, handle))
        handle.get_result_async().add_done_callback(lambda f, t=trial: self._on_goal_result(t, f))

    def _on_goal_timeout(self, trial: SessionTrial, handle: Any) -> None:
        self._cancel_goal_timer()
        self.get_logger().error(f"trial {trial.trial_id}: runner timed out; canceling the goal")
        handle.cancel_goal_async()
        self._on_run_done(trial, ok=False, duration=float("nan"), message="runner timed out", result=None)

    def _cancel_goal_timer(self) -> None:
        if self._goal_timer is not None:
            self.destroy_timer(self._goal_timer)
            self._goal_timer = None

    def _on_goal_result(self, trial: SessionTrial, future: Future) -> None:
        if self._goal_trial != (trial.trial_id, trial.attempt):
            return  # timed out (already recorded) or superseded
        self._cancel_goal_timer()
        response = future.result()
        result: RunTrial.Result = response.result
        ok = response.status == GoalStatus.STATUS_SUCCEEDED and result.ok
        message = result.message or ("" if ok else f"goal ended with status {response.status}")
        self._on_run_done(trial, ok=ok, duration=result.duration, message=message, result=result)

    def _on_run_done(self, trial: SessionTrial, *, ok: bool, duration: float, message: str,
                     result: RunTrial.Result | None) -> None:
        self._goal_trial, self._goal_handle = None, None
        session = self.session
        if session is None:
            return
        pending = session.pending_trial()
        if pending is None or pending.trial_id != trial.trial_id or session.state in FINAL:
            self.get_logger().info(f"trial {trial.trial_id}: runner result ignored (the trial is no longer pending)")
            self._advance()
            return
        duration = duration if math.isfinite(duration) and duration >= 0 else 0.0
        retry = session.record_runner_result(trial.trial_id, ok, duration, message)
        if not ok:
            self._faults += 1
            if self._faults >= self.max_attempts and session.state == SessionState.RUNNING:
                session.pause(f"runner failed {self._faults} times in a row on trial {trial.trial_id}: {message}")
                self.get_logger().error(
                    f"session paused: runner failed {self._faults} times on trial {trial.trial_id}; "
                    "fix the robot, then resume (session_control) or void the trial (correct_score)")
                self._faults = 0
            self._publish_status()
            if retry is not None:
                self._advance()
            return
        self._faults = 0
        if session.config.scoring == "auto":
            if result is not None and result.auto_scored and session.state == SessionState.PAUSED:
                self._held_score = (trial, result.auto_success, result.auto_progress)
                self.get_logger().info(f"trial {trial.trial_id}: automatic score held until the session resumes")
            elif result is not None and result.auto_scored:
                self._submit(trial.trial_id, trial.token, result.auto_success, result.auto_progress,
                             scorer=f"auto:{self._runner_name}", notes="", preference="")
            else:
                self._operator_trial = trial.trial_id
                self.get_logger().warning(
                    f"trial {trial.trial_id}: scoring is 'auto' but the runner returned no score; waiting for trial_score")
        self._advance()

    # -- scores -----------------------------------------------------------------------------
    def _submit_held_score(self) -> None:
        """Submit the automatic score that arrived while the session was paused (if still pending)."""
        held, self._held_score = self._held_score, None
        pending = self.session.pending_trial() if self.session is not None else None
        if held is not None and pending is not None and pending.trial_id == held[0].trial_id:
            trial, success, progress = held
            self._submit(trial.trial_id, trial.token, success, progress, scorer=f"auto:{self._runner_name}",
                         notes="", preference="")

    def _on_score(self, msg: TrialScore) -> None:
        self._submit(msg.trial_id, msg.token, msg.success, msg.progress, scorer=msg.scorer, notes=msg.notes,
                     preference=msg.preference)
        self._advance()

    def _submit(self, trial_id: int, token: str, success: bool, progress: float, *, scorer: str, notes: str,
                preference: str) -> None:
        ack = ScoreAck(session_id=self.session.session_id if self.session else "", trial_id=trial_id)
        ack.header.stamp = self.get_clock().now().to_msg()
        if self.session is None:
            ack.accepted, ack.reason = False, "no session is running"
            self.get_logger().warning(f"score for trial {trial_id} rejected: {ack.reason}")
        else:
            outcome = self.session.submit_score(int(trial_id), token, bool(success), float(progress), scorer, notes,
                                                preference=preference)
            ack.accepted, ack.duplicate = outcome.accepted, outcome.duplicate
            ack.reason = "" if outcome.accepted and not outcome.duplicate and not outcome.post_decision \
                else outcome.reason
            if not outcome.accepted:  # the same reason as on score_ack
                self.get_logger().warning(f"score for trial {trial_id} (scorer {scorer!r}) rejected: {outcome.reason}")
        self._ack_pub.publish(ack)

    # -- services ---------------------------------------------------------------------------
    def _on_start_session(self, request: StartSession.Request, response: StartSession.Response
                          ) -> StartSession.Response:
        response.ok, response.message = self.start_session(request.session_id or self.session_id,
                                                           request.config_path or self.config_file)
        return response

    def _on_session_control(self, request: SessionControl.Request, response: SessionControl.Response
                            ) -> SessionControl.Response:
        session = self.session
        names = {SessionControl.Request.COMMAND_PAUSE: "pause", SessionControl.Request.COMMAND_RESUME: "resume",
                 SessionControl.Request.COMMAND_ABORT: "abort"}
        command = names.get(request.command)
        if command is None:
            response.ok, response.message = False, f"unknown command {request.command} (1 pause, 2 resume, 3 abort)"
        elif session is None:
            response.ok, response.message = False, "no session"
        else:
            try:
                if command == "pause":
                    session.pause(request.reason)
                elif command == "resume":
                    self._faults = 0
                    session.resume()
                    self._submit_held_score()
                else:
                    session.abort(request.reason)
                    if self._goal_handle is not None:
                        self._goal_handle.cancel_goal_async()
            except SessionError as err:
                response.ok, response.message = False, str(err)
            else:
                response.ok, response.message = True, f"session {session.session_id} {session.state.value}"
        if not response.ok:
            self.get_logger().warning(f"session_control {command or request.command} refused: {response.message}")
        self._advance()
        return response

    def _on_correct_score(self, request: CorrectScore.Request, response: CorrectScore.Response
                          ) -> CorrectScore.Response:
        session = self.session
        reason = request.reason.strip()
        if reason and request.scorer:
            reason = f"{reason} (by {request.scorer})"
        if session is None:
            response.ok, response.message = False, "no session"
        elif request.action == CorrectScore.Request.ACTION_CORRECT:
            outcome = session.correct_score(int(request.trial_id), bool(request.success), float(request.progress), reason)
            response.ok, response.message = outcome.applied, outcome.reason
        elif request.action == CorrectScore.Request.ACTION_VOID:
            outcome = session.void_score(int(request.trial_id), reason)
            response.ok, response.message = outcome.applied, outcome.reason
        elif request.action == CorrectScore.Request.ACTION_UNDO:
            if request.trial_id:
                response.ok = False
                response.message = ("ACTION_UNDO takes trial_id 0 (it voids the latest score); "
                                    "use ACTION_VOID for a given trial")
            else:
                outcome = session.undo_last(reason)
                response.ok, response.message = outcome.applied, outcome.reason
        else:
            response.ok, response.message = False, f"unknown action {request.action} (1 correct, 2 void, 3 undo)"
        if not response.ok:
            self.get_logger().warning(f"correct_score refused for trial {request.trial_id}: {response.message}")
        elif self._goal_trial is not None and session is not None:
            pending = session.pending_trial()
            if pending is None or pending.trial_id != self._goal_trial[0]:
                # the trial being run was voided: stop the rollout, move on
                if self._goal_handle is not None:
                    self._goal_handle.cancel_goal_async()
                self._cancel_goal_timer()
                self._goal_trial, self._goal_handle = None, None
        self._advance()
        return response

    # -- status -----------------------------------------------------------------------------
    def _comparison_msg(self, c: SessionComparison) -> ComparisonStatus:
        return ComparisonStatus(
            policy_a=c.policy_a, policy_b=c.policy_b, metric=c.metric, method=c.method, alpha=c.alpha, n=c.n,
            decision=int(c.decision), pvalue=_nan(c.pvalue), evalue=_nan(c.evalue), mean_a=_nan(c.mean_a),
            mean_b=_nan(c.mean_b), stopping_trial=c.stopping_trial or 0, task=c.task)

    def _open_journal_reader(self, path: pathlib.Path) -> None:
        """A read-only connection to the journal, to publish its events (schema: session/journal.py)."""
        if self._journal_reader is not None:
            self._journal_reader.close()
        self._journal_reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._published_seq = 0

    def _publish_events(self) -> None:
        """Publish the journal events committed since the last call (all of them after a (re)start)."""
        if self._journal_reader is None or self.session is None:
            return
        rows = self._journal_reader.execute(
            "SELECT seq, stamp_ns, kind, trial_id, payload FROM events WHERE seq > ? ORDER BY seq",
            (self._published_seq,)).fetchall()
        for seq, stamp_ns, kind, trial_id, payload in rows:
            msg = SessionEvent(session_id=self.session.session_id, seq=int(seq), kind=str(kind),
                               trial_id=int(trial_id or 0), payload_json=str(payload))
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
            self._event_pub.publish(msg)
            self._published_seq = int(seq)

    def _publish_status(self) -> None:
        self._publish_events()
        msg = SessionStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        session = self.session
        if session is None:
            msg.state, msg.state_name = SessionStatus.STATE_IDLE, "idle"
            self._status_pub.publish(msg)
            return
        status = session.status()
        # the tests, then (multi-task claims) one combined claim row per pair x metric, task "*"
        comparisons = [self._comparison_msg(c) for c in
                       [*session.comparisons(), *(claim.as_comparison() for claim in session.claims())]]
        msg.session_id = session.session_id
        msg.state = STATE_CODES[status.state]
        msg.state_name = f"{status.state.value}:awaiting_{status.awaiting}" if status.awaiting and \
            status.state == SessionState.RUNNING else status.state.value
        msg.trials_done = status.trials_scored
        msg.budget_left = status.max_trials_left
        msg.pending_trial_id = status.pending_trial_id or 0
        msg.active_policies = list(status.active_policies)
        msg.active_tasks = list(status.active_tasks)
        msg.comparisons = comparisons
        letters = session.letters()
        msg.letter_policies, msg.letters = list(letters), list(letters.values())
        self._status_pub.publish(msg)
        # one comparison_status message per comparison whose pair count or decision changed
        keys = [(c.n, c.decision) for c in comparisons]
        for index, (comparison, key) in enumerate(zip(comparisons, keys)):
            before = self._published_comparisons[index] if index < len(self._published_comparisons) else None
            if key != before:  # (the session itself logs each decision)
                self._comparison_pub.publish(comparison)
        self._published_comparisons = keys

    def _publish_diagnostics(self) -> None:
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        session = self.session
        if session is None:
            array.status = [DiagnosticStatus(level=DiagnosticStatus.OK, name="evalstop: session",
                                             message="idle", hardware_id="")]
            self._diagnostics_pub.publish(array)
            return
        status = session.status()
        level = {SessionState.PAUSED: DiagnosticStatus.WARN, SessionState.ABORTED: DiagnosticStatus.WARN}.get(
            status.state, DiagnosticStatus.OK)
        array.status.append(DiagnosticStatus(
            level=level, name="evalstop: session", hardware_id=session.session_id,
            message=f"{status.state.value}, {status.trials_scored} trials scored",
            values=[KeyValue(key=k, value=str(v)) for k, v in (
                ("state", status.state.value), ("trials_scored", status.trials_scored),
                ("trials_voided", status.trials_voided), ("pending_trial_id", status.pending_trial_id or 0),
                ("awaiting", status.awaiting or ""), ("max_trials_left", status.max_trials_left),
                ("comparisons_decided", f"{status.comparisons_decided}/{status.comparisons_total}"))]))
        for c in session.comparisons():
            array.status.append(DiagnosticStatus(
                level=DiagnosticStatus.WARN if c.decision == 3 else DiagnosticStatus.OK,
                name=f"evalstop: {c.policy_a} vs {c.policy_b} ({c.metric}{', task ' + c.task if c.task else ''})",
                hardware_id=session.session_id,
                message=f"{c.decision.name} after {c.n} pairs",
                values=[KeyValue(key=k, value=str(v)) for k, v in (
                    ("method", c.method), ("alpha", c.alpha), ("n", c.n), ("decision", c.decision.name),
                    ("pvalue", c.pvalue), ("evalue", c.evalue), ("mean_a", c.mean_a), ("mean_b", c.mean_b),
                    ("stopping_trial", c.stopping_trial or 0))]))
        self._diagnostics_pub.publish(array)

    def _end(self) -> None:
        """The session is over: clear the pending request, log a summary, maybe exit."""
        assert self.session is not None
        self._ended = True
        status = self.session.status()
        done = TrialRequest(session_id=self.session.session_id, trial_id=0)
        done.header.stamp = self.get_clock().now().to_msg()
        self._request_pub.publish(done)
        self._published_request = (0, 0)
        self._publish_diagnostics()
        letters = self.session.letters()
        self.get_logger().info(
            f"session {self.session.session_id} {status.state.value}: {status.trials_scored} trials scored, "
            f"{status.comparisons_decided}/{status.comparisons_total} tests decided"
            + (f"; letters {' '.join(f'{p}={l}' for p, l in letters.items())}" if letters else ""))
        if self.exit_on_finish and not self.done.done():
            def finish() -> None:
                self.destroy_timer(timer)
                if not self.done.done():
                    self.done.set_result(EXIT_OK)
            timer = self.create_timer(max(self.exit_linger, 0.001), finish)

    def flush(self, timeout: float = 2.0) -> None:
        """Wait until subscribers acknowledged the reliable messages already published."""
        for pub in (self._status_pub, self._request_pub, self._comparison_pub, self._ack_pub, self._config_pub,
                    self._event_pub):
            pub.wait_for_all_acked(Duration(seconds=timeout))

    def destroy_node(self) -> None:
        """Close the session journal, then destroy the node."""
        # (getattr: also called by rclpy's shutdown when __init__ failed half-way)
        if getattr(self, "_log_handler", None) is not None:
            logging.getLogger("evalstop_ros.session").removeHandler(self._log_handler)
        if getattr(self, "_journal_reader", None) is not None:
            self._journal_reader.close()
            self._journal_reader = None
        if getattr(self, "session", None) is not None:
            self.session.close()
            self.session = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the manager until Ctrl-C, or until the session ends with ``exit_on_finish``.

    Exit status: 0 normally, 1 if the session cannot start (bad config, journal of another
    config), 2 for invalid parameters.
    """
    try:
        with ros_context(args):
            try:
                node = EvaluationManager(latched_qos=qos.LATCHED_QOS, comparison_qos=qos.COMPARISON_QOS,
                                         event_qos=qos.EVENT_QOS, journal_qos=qos.JOURNAL_EVENT_QOS,
                                         diagnostics_qos=qos.DIAGNOSTICS_QOS)
            except SessionError as err:
                rclpy.logging.get_logger("evaluation_manager").fatal(f"cannot start: {err}")
                return EXIT_FAILURE
            except (ValueError, TypeError) as err:
                rclpy.logging.get_logger("evaluation_manager").fatal(f"invalid parameters: {err}")
                return EXIT_USAGE
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                executor.spin_until_future_complete(node.done)
                node.flush()
            finally:
                node.destroy_node()
            return int(node.done.result()) if node.done.done() else EXIT_OK
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return EXIT_OK
