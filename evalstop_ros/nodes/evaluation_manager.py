"""``evaluation_manager``: runs one :class:`~evalstop_ros.session.EvaluationSession` over ROS.

The node turns messages into session calls and the answers back into messages; the trial rules
are :class:`~evalstop_ros.session.driver.TrialDriver`'s, the plumbing :class:`~.manager_base.ManagerNode`'s.
Topics, signing, blinding and exit: docs/nodes.md and docs/ros.md.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import pathlib
from collections.abc import Callable
from typing import Any

from evalstop.msg import TrialScore
from evalstop.srv import CorrectScore, SessionControl, StartSession
from rclpy.qos import QoSProfile

from .. import __version__, qos
from ..session import (
    ConfigError,
    EvaluationSession,
    PendingTrial,
    SessionConfig,
    SessionError,
    SessionState,
    auth,
    load_config,
)
from ..session.driver import Action, TrialDriver, Verdict
from ..session.goal_sealing import GoalSealer, session_seal_key
from ..session.journal import Event, journaled_fault_limit
from ..session.limits import LOG_BURST, LOG_WINDOW_S, RateLimit, bounded
from ..session.public_view import PUBLIC_TOPICS, PublicView
from ..session.publishing import diagnostics
from ..session.runner_status import RunnerNow, RunnerTally, runner_diagnostics
from ..session.values import FINAL, ScoreOutcome
from ._common import EXIT_FAILURE, EXIT_USAGE, declare
from .manager_base import ManagerNode, run_manager
from .manager_parameters import SESSION_PARAMETERS, ManagerParameters, declare_manager_parameters
from .manager_services import apply_control, apply_correction, control_command
from .quick_log import SessionLogHandler
from .runner_link import RunnerLink, RunResult

__all__ = ["EvaluationManager", "main"]

#: How often the watchdog looks at the goal in flight (s).
WATCH_PERIOD = 0.2


class EvaluationManager(ManagerParameters, ManagerNode):
    """Drives an evaluation session: trials out, runner goals, scores in, status out."""

    def __init__(self, *, latched_qos: QoSProfile, comparison_qos: QoSProfile, event_qos: QoSProfile,
                 journal_qos: QoSProfile, diagnostics_qos: QoSProfile) -> None:
        super().__init__("evaluation_manager")
        declare_manager_parameters(self)
        hub_url = declare(self, "hub_url", "", "Not this node's: a station of an evaluation hub is `station_manager` "
                          "(set, this node refuses to start).", read_only=True)
        if hub_url:
            raise ValueError(f"`hub_url` is set ({hub_url}): a station of an evaluation hub is its own node, run "
                             "`ros2 run evalstop station_manager` (or `ros2 launch evalstop station.launch.py`)")
        if not self.operator_keys_file and not self.allow_unsigned:
            raise ValueError("no `operator_keys_file`, and `allow_unsigned` is false (the default of eval.launch.py on "
                             "a real robot): make operator keys with `evalstop keys new` and pass "
                             "operator_keys_file:=FILE, or run unsigned with allow_unsigned:=true")
        self._gate = auth.Gate(auth.read_keys(self.operator_keys_file) if self.operator_keys_file else None)
        if self._gate.enabled:
            self.get_logger().info(f"authentication on: {len(self._gate.operators)} authorized operator(s) "
                                   f"({', '.join(self._gate.operators)})")
        else:
            self.get_logger().warning(
                "no operator_keys_file: scores, corrections and session control are NOT authenticated (any node "
                "on the domain that reads trial_request can score, void, pause or abort); see docs/integrity.md")

        self.open_interfaces(latched_qos=latched_qos, comparison_qos=comparison_qos, event_qos=event_qos,
                             journal_qos=journal_qos, diagnostics_qos=diagnostics_qos)
        self.create_service(StartSession, "start_session", self._on_start_session)
        self.create_timer(WATCH_PERIOD, self._watch)

        #: Policy ids -> stand-ins on every operator channel until the key is revealed (session/public_view.py).
        self._view: PublicView | None = None
        self._revealed = False
        self._log_handler = SessionLogHandler(self, self._public_text)
        session_log = logging.getLogger("evalstop_ros.session")
        session_log.addHandler(self._log_handler)
        session_log.setLevel(logging.INFO)
        session_log.propagate = False

        self.session: EvaluationSession | None = None
        self._link: RunnerLink | None = None  # the session's runner: the goal in flight and its deadlines
        self._runner_name = ""
        self._driver: TrialDriver | None = None  # the session's trial loop (session/driver.py)
        self._links: dict[str, RunnerLink] = {}  # several runners (runner.runners, docs/parallel.md): one link each
        self._tally = RunnerTally()  # their runs and faults, from the journal (/diagnostics)
        self._ended = False
        self._reject_log = RateLimit(LOG_BURST, LOG_WINDOW_S)  # a flood of bad scores cannot flood the log
        self._auth_log = RateLimit(LOG_BURST, LOG_WINDOW_S)  # nor a flood of unauthenticated messages
        if self.auto_start and self.config_file:
            # a bad config raises ConfigError here, before any journal exists: one FATAL line, exit 2 (main)
            self._load_config(self.config_file, self.max_attempts)
            ok, message = self.start_session(self.session_id, self.config_file)
            if not ok:
                raise SessionError(message)
        else:
            self.get_logger().info("idle: waiting for a start_session request")
            self._publisher.idle()

    # -- publishing -------------------------------------------------------------------------
    def _outward(self, topic: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Before the key is revealed: stand-ins on the operator's topics, never policy ids."""
        if self._view is not None and not self._revealed and topic in PUBLIC_TOPICS:
            return self._view.fields(topic, fields)
        return fields

    def _public_text(self, text: str) -> str:
        """``text`` as the operator may read it (policy ids replaced until the key is revealed)."""
        return text if self._view is None or self._revealed else self._view.text(text)

    def _on_commit(self, event: Event) -> None:
        assert self.session is not None
        self._tally.observe(event)
        self._publisher.event(self.session.session_id, event)
        if event.kind == "key_revealed" and not self._revealed:
            # the end: from now on the real names; the latched config again, the comparisons follow (status)
            self._revealed = True
            self._publisher.config(self.session, __version__)

    # -- parameters -------------------------------------------------------------------------
    def _active(self) -> bool:
        session = getattr(self, "session", None)  # (None until __init__ made it)
        return session is not None and session.state not in FINAL

    def _parameter_refused(self, name: str) -> str:
        """Refuse changes to the pre-registered settings while a session is active."""
        if name not in SESSION_PARAMETERS or not self._active():
            return ""
        assert self.session is not None
        return (f"cannot change `{name}` while session {self.session.session_id!r} is "
                f"{self.session.state.value}: the test is pre-registered (config hash "
                f"{self.session.config.config_hash[:12]}); finish or abort the session first")

    # -- starting ---------------------------------------------------------------------------
    def _load_config(self, path: str, max_attempts: int) -> SessionConfig:
        """The config at ``path`` with this node's alpha/method/n_max/confirm_reset/runners overrides applied,
        and ``max_attempts`` where the file sets no ``runner.max_attempts``."""
        return load_config(path, alpha=self.alpha or None, n_max=self.n_max or None, method=self.method or None,
                           confirm_reset=self.confirm_reset or None, max_attempts=max_attempts,
                           runners=self.runners or None)

    def start_session(self, session_id: str, config_path: str) -> tuple[bool, str]:
        """Start (or resume from its journal) a session; returns ``(ok, message)``.

        Every value is validated before the journal is opened: a refused configuration leaves no
        journal, so its session id can be used once the file is fixed.  A file without
        ``runner.max_attempts`` gets the resumed journal's limit, or for a new session the
        ``max_attempts`` parameter.
        """
        if self._active():
            assert self.session is not None
            return False, f"session {self.session.session_id!r} is {self.session.state.value}; abort it first"
        if not config_path:
            return False, "no config: set `config_path` or the `config_file` parameter"
        session_id = session_id or (
            f"{pathlib.Path(config_path).stem}-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}")
        try:
            path = self.journal_path(session_id)
            resumed = path.exists()
            config = self._load_config(config_path, journaled_fault_limit(path) if resumed else self.max_attempts)
        except ConfigError as err:
            self.get_logger().error(f"session not started: invalid config {err}")
            return False, f"invalid config {err}"
        except SessionError as err:
            self.get_logger().error(f"session {session_id!r} not started: {err}")
            return False, str(err)
        try:  # a one-entry runner.runners is the one runner (before the journal opens: nothing to undo)
            one_runner = config.runner.one_action(self.runner_action) if len(config.runner.actions) == 1 else ""
        except ValueError as err:
            self.get_logger().error(f"session {session_id!r} not started: {err}")
            return False, str(err)
        try:
            session = EvaluationSession.open(path, config, session_id, durable=self.journal_fsync)
        except SessionError as err:
            self.get_logger().error(f"session {session_id!r} not started: {err}")
            return False, str(err)
        if self.session is not None:
            self.session.close()
        self.session, self._ended = session, False
        actions = config.runner.actions if len(config.runner.actions) > 1 else ()
        self._runner_name = ", ".join(actions) or one_runner
        self._driver = TrialDriver(session, actions[0] if actions else self._runner_name, runners=actions,
                                   max_ahead=config.runner.max_ahead)
        for link in [*([self._link] if self._link is not None else []), *self._links.values()]:
            link.cancel()
            link.destroy()
        assert session.plan.key is not None  # a live session's plan has the journal's key
        sealer = GoalSealer(self.runner_key, session_seal_key(session.plan.key, session_id), session_id)
        self._links = {action: RunnerLink(self, action, limits=self.runner_limits, sealer=sealer,
                                          on_done=functools.partial(self._parallel_done, action)) for action in actions}
        self._link = None if actions else RunnerLink(self, self._runner_name, limits=self.runner_limits,
                                                     on_done=self._run_done, sealer=sealer)
        self._view, self._revealed = PublicView(config.policies, session.plan.key, session_id), False
        self._publisher.reset()
        self._tally = RunnerTally()
        self._publisher.config(session, __version__)
        for event in session.events():  # the whole journal again after a restart (same seq)
            self._on_commit(event)
        session.on_commit = self._on_commit
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
        """Move the session on (:meth:`TrialDriver.advance`): acknowledge a held automatic score it
        submitted, publish the pending trial, send it to the runner, or wrap up."""
        session, driver = self.session, self._driver
        if session is None or driver is None:
            return
        if self._links:
            self._dispatch(session, driver)
            return
        upcoming = driver.advance(runner_busy=self._running is not None)
        if upcoming.auto is not None:
            self._ack(upcoming.auto.trial.trial_id, upcoming.auto.outcome, scorer=driver.auto_scorer)
        if upcoming.trial is not None:
            self._publisher.request(upcoming.trial)
        if upcoming.action is Action.RUN and upcoming.trial is not None:
            self._start_run(upcoming.trial)
        # RESET: the operator resets the scene, then confirms it (session_control CONFIRM_RESET);
        # SCORE: the operator's trial_score
        self._publisher.status(session)
        if session.state in FINAL and not self._ended:
            self._end()

    def _dispatch(self, session: EvaluationSession, driver: TrialDriver) -> None:
        """Several runners (docs/parallel.md): every free runner whose server is there gets its trial of the
        plan (:meth:`TrialDriver.dispatch`); at the stop what still runs is cancelled, its result journaled
        as after the stop."""
        self._cancel_voided(driver)
        ready = [a for a, link in self._links.items() if link.trial is None and link.client.server_is_ready()]
        for work in driver.dispatch(ready):
            self._publisher.request(work.trial, work.runner)  # the operator learns which arm, never which policy
            if work.action is Action.RUN:
                self._links[work.runner].start(work.trial)
            else:
                self.get_logger().info(f"trial {work.trial.trial_id} (label {work.trial.label}): reset the scene "
                                       f"of runner '{work.runner}', then confirm it")
        for auto in driver.auto_scores:
            self._ack(auto.trial.trial_id, auto.outcome, scorer=driver.auto_scorer)
        driver.auto_scores.clear()
        self._publisher.status(session)
        if session.state in FINAL and not self._ended:
            for work in driver.stop(f"the session is {session.state.value}"):
                self.get_logger().info(f"trial {work.trial.trial_id}: canceled on runner '{work.runner}' at the "
                                       "stop (its result, if it comes, is journaled as after the stop)")
                self._links[work.runner].cancel_and_report()
            self._end()

    def _cancel_voided(self, driver: TrialDriver) -> None:
        """Cancel, on its runner, every run whose trial was voided (:meth:`TrialDriver.cancel_voided`): the
        runner holds the arm; its result, when it comes, frees the runner."""
        for work in driver.cancel_voided():
            self.get_logger().info(f"trial {work.trial.trial_id}: voided during its run; canceled on runner "
                                   f"'{work.runner}'")
            self._links[work.runner].cancel_and_report()

    def _parallel_done(self, runner: str, trial: PendingTrial, result: RunResult) -> None:
        """One runner's result (:meth:`TrialDriver.run_done` with its runner); move on."""
        if self._driver is None:
            return
        verdict = self._driver.run_done(trial, result.ok, result.duration, result.message, runner=runner,
                                        auto_score=result.auto_score, goal_seal=result.goal_seal)
        if verdict.message:
            log = self.get_logger()
            (log.error if verdict.verdict is Verdict.PAUSED else log.info)(verdict.message)
        self._advance()

    @property
    def _running(self) -> PendingTrial | None:
        """The trial on the runner, if any."""
        return None if self._link is None else self._link.trial

    def runner_limits(self) -> tuple[float, int]:
        """``(goal_response_timeout, max_attempts)``: the limits of every :class:`~.runner_link.RunnerLink`
        of this node (the timeout as set now; the session's journaled fault limit, else the parameter)."""
        limit = self._driver.max_attempts if self._driver is not None else self.max_attempts
        return self.goal_response_timeout, limit

    def _start_run(self, trial: PendingTrial) -> None:
        """Send the trial to the runner, or wait for the runner to appear (the watchdog retries)."""
        assert self._link is not None
        self._link.start(trial)

    def _watch(self) -> None:
        """Deadlines of every wait on the runner (:class:`~.runner_link.RunnerLink`); one runner per action."""
        session, link, driver = self.session, self._link, self._driver
        for action, each in self._links.items():  # several runners: each one's rule and deadlines
            if driver is not None:
                self.watch_runners(driver, each, action)
            each.watch(session.config.runner.timeout_s if session is not None else 300.0)
        if self._links and session is not None and session.state == SessionState.RUNNING:
            self._advance()  # a runner that appeared, or came free
        if session is None or link is None or driver is None:
            return
        held = link.held
        if self.watch_runners(driver, link):
            # every goal would reach each runner: stop here, before (or while) a trial runs
            self._advance()
            return
        if link.trial is None:
            if (link.state == "waiting" or held) and session.state == SessionState.RUNNING:
                self._advance()  # is the runner there now (and alone)?
            return
        link.watch(session.config.runner.timeout_s)

    def _run_done(self, trial: PendingTrial, result: RunResult) -> None:
        """Journal the run's result and apply the session's rules (:meth:`TrialDriver.run_done`); move on."""
        if self._driver is None:
            return
        verdict = self._driver.run_done(trial, result.ok, result.duration, result.message,
                                        auto_score=result.auto_score, goal_seal=result.goal_seal)
        if verdict.verdict is Verdict.PAUSED:
            self.get_logger().error(verdict.message)
        elif verdict.verdict is Verdict.OPERATOR:
            self.get_logger().warning(verdict.message)
        elif verdict.message:
            self.get_logger().info(verdict.message)
        self._advance()

    def _cancel_run(self) -> None:
        """Stop the rollout in flight (abort, or its trial was voided)."""
        if self._link is not None:
            self._link.cancel()

    # -- scores -----------------------------------------------------------------------------
    def _on_score(self, msg: TrialScore) -> None:
        check = self._authenticate("trial_score", msg)
        if not check.ok:
            outcome = ScoreOutcome(False, False, check.reason)
            self._publisher.ack(self.session.session_id if self.session else "", msg.trial_id, outcome,
                                scorer=str(msg.scorer)[:64], counter=int(msg.counter))
            return
        with self.session.authenticated(check.record) if self.session else contextlib.nullcontext():
            outcome = self._submit(msg.trial_id, msg.token, msg.success, msg.progress, scorer=msg.scorer,
                                   notes=msg.notes, preference=msg.preference, instruction=msg.instruction,
                                   pair_invalid=msg.pair_invalid, check=check)
        if self.session is not None and outcome.accepted and not outcome.duplicate:
            self._publisher.status(self.session)  # the score counted: say so before the next trial's work
        self._advance()

    def _submit(self, trial_id: int, token: str, success: bool, progress: float, *, scorer: str, notes: str,
                preference: str, instruction: str = "", pair_invalid: bool = False,
                check: auth.Check | None = None) -> ScoreOutcome:
        if self.session is None:
            outcome = ScoreOutcome(False, False, "no session is running")
        else:
            outcome = self.session.submit_score(int(trial_id), token, bool(success), float(progress), scorer, notes,
                                                preference=preference, instruction=instruction,
                                                pair_invalid=bool(pair_invalid))
        self._ack(trial_id, outcome, scorer=scorer, check=check)
        return outcome

    def _ack(self, trial_id: int, outcome: ScoreOutcome, *, scorer: str, check: auth.Check | None = None) -> None:
        """Answer a score on ``score_ack`` (signed for an authenticated operator); log a rejection."""
        if not outcome.accepted and self._reject_log.allow():  # the reason on score_ack; bounded, rate-limited
            self.get_logger().warning(f"score for trial {trial_id} (scorer {bounded(scorer)!r}) rejected: "
                                      f"{outcome.reason}{self._reject_log.suppressed()}")
        session_id = self.session.session_id if self.session else ""
        if check is None:
            self._publisher.ack(session_id, trial_id, outcome)
        else:
            self._publisher.ack(session_id, trial_id, outcome, scorer=check.operator, counter=check.counter,
                                mac=lambda fields: self._gate.sign_answer("trial_score", session_id, check, fields))

    # -- authentication ---------------------------------------------------------------------
    def _authenticate(self, kind: str, msg: Any) -> auth.Check:
        """Check a request's signature and counter; journal, count and log (rate-limited) a refusal."""
        session = self.session
        operator = msg.scorer if isinstance(msg.scorer, str) else ""
        check = self._gate.check(kind, session.session_id if session else "", msg,
                                 last_counter=session.auth_counter(operator) if session else 0)
        if not check.ok:
            if session is not None:
                session.reject_message(kind, check.reason, auth.summary(msg.scorer, msg.counter, auth.message_fields(msg)))
            if self._auth_log.allow():
                self.get_logger().warning(f"{kind} refused: {check.reason}{self._auth_log.suppressed()}")
        return check

    def _service_callback(self, kind: str, handler: Callable[[Any, Any], None]) -> Callable[[Any, Any], Any]:
        """A service callback that runs ``handler`` only for an authenticated request and signs the answer."""
        def callback(request: Any, response: Any) -> Any:
            check = self._authenticate(kind, request)
            session = self.session
            if not check.ok:
                response.ok, response.message = False, check.reason
            elif session is None:
                handler(request, response)
            else:
                with session.authenticated(check.record):
                    handler(request, response)
                response.mac = self._gate.sign_answer(kind, session.session_id, check, response)
            self._advance()
            return response
        return callback

    # -- services ---------------------------------------------------------------------------
    def _on_start_session(self, request: StartSession.Request, response: StartSession.Response
                          ) -> StartSession.Response:
        response.ok, response.message = self.start_session(request.session_id or self.session_id,
                                                           request.config_path or self.config_file)
        return response

    def _on_session_control(self, request: SessionControl.Request, response: SessionControl.Response) -> None:
        """Pause, resume, abort or confirm a reset (:func:`~.manager_services.apply_control`)."""
        command, response.message = control_command(request.command)
        if command is None:
            response.ok = False
        else:
            response.ok, response.message = apply_control(self.session, command, request)
            if response.ok and command == "abort":
                self._cancel_run()
        if not response.ok:
            self.get_logger().warning(f"session_control {command or request.command} refused: {response.message}")

    def _on_correct_score(self, request: CorrectScore.Request, response: CorrectScore.Response) -> None:
        """Correct, void or undo a score (:func:`~.manager_services.apply_correction`)."""
        session = self.session
        response.ok, response.message = apply_correction(session, request)
        if not response.ok:
            self.get_logger().warning(f"correct_score refused for trial {request.trial_id}: {response.message}")
        elif self._links and self._driver is not None:
            self._cancel_voided(self._driver)  # several runners: the voided trial's run, wherever it is
        elif self._running is not None and session is not None:
            pending = session.pending_trial()
            if pending is None or pending.trial_id != self._running.trial_id:
                self._cancel_run()  # the trial being run was voided: stop the rollout, move on

    # -- status -----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        runner = self.runner_state(self._link, self._runner_name)
        gate = self._gate
        authentication = (("authentication", f"on ({len(gate.operators)} operators)" if gate.enabled
                           else "off (unauthenticated)"),
                          ("messages_rejected", str(gate.rejected_total)),
                          *((f"messages_rejected_{cause}", str(n)) for cause, n in gate.rejected.items()))
        entries = diagnostics(self.session, node=self.get_name(), hardware_id=self._runner_name or "runner",
                              runner=runner, max_attempts=self.runner_limits()[1], extra=authentication)
        self.send_diagnostics([*entries, *runner_diagnostics(self._runners_now(), self._tally, node=self.get_name())],
                              self._public_text)

    def _runners_now(self) -> list[RunnerNow]:
        """What each of several runners is doing (docs/parallel.md): one ``/diagnostics`` status each."""
        driver = self._driver
        if driver is None or driver.pool is None:
            return []
        out = []
        for name, link in self._links.items():
            trial = link.trial
            cancelled, reset = driver.runner_work(name, trial)
            out.append(RunnerNow(name, link.resolved, link.client.server_is_ready(), link.held,
                                 trial.trial_id if trial is not None else 0, cancelled, reset))
        return out

    def _end(self) -> None:
        """The session is over: clear the pending request, log a summary, maybe exit."""
        assert self.session is not None
        self._ended = True
        status = self.session.status()
        self._publisher.end(self.session.session_id)
        self._publish_diagnostics()
        letters = self.session.letters()
        self.get_logger().info(
            f"session {self.session.session_id} {status.state.value}: {status.trials_scored} trials scored, "
            f"{status.comparisons_decided}/{status.comparisons_total} tests decided"
            + (f"; letters {' '.join(f'{p}={l}' for p, l in letters.items())}" if letters else ""))
        self.exit_when_lingered()

    def destroy_node(self) -> None:
        """Close the session journal, then destroy the node."""
        # (getattr: also called by rclpy's shutdown when __init__ failed half-way)
        if getattr(self, "_log_handler", None) is not None:
            logging.getLogger("evalstop_ros.session").removeHandler(self._log_handler)
        if getattr(self, "session", None) is not None:
            self.session.close()
            self.session = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the manager until Ctrl-C, or until the session ends with ``exit_on_finish``.

    Exit status: 0 normally, 1 if the session cannot start (e.g. a journal of another config),
    2 for invalid parameters (``hub_url`` among them: that is ``station_manager``'s) or an invalid
    config file (one FATAL line naming the value).
    """
    return run_manager("evaluation_manager", lambda: EvaluationManager(
        latched_qos=qos.LATCHED_QOS, comparison_qos=qos.COMPARISON_QOS, event_qos=qos.EVENT_QOS,
        journal_qos=qos.JOURNAL_EVENT_QOS, diagnostics_qos=qos.DIAGNOSTICS_QOS), args,
        ((ConfigError, "cannot start: invalid config ", EXIT_USAGE), (SessionError, "cannot start: ", EXIT_FAILURE)))
