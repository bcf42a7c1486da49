"""What ``evaluation_manager`` and ``station_manager`` share: the node plumbing around a trial loop (docs/nodes.md).
"""

from __future__ import annotations

import gc
import os
import pathlib
from collections.abc import Callable, Iterable
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from evalstop.msg import ComparisonStatus, ScoreAck, SessionEvent, SessionStatus, TrialRequest, TrialScore
from evalstop.msg import SessionConfig as SessionConfigMsg
from evalstop.srv import CorrectScore, SessionControl
from rcl_interfaces.msg import SetParametersResult
from rclpy.duration import Duration
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.task import Future

from .. import qos
from ..ros_context import ros_context
from ..session.driver import TrialDriver
from ..session.goal_sealing import SealError, read_runner_key
from ..session.journal_files import journal_directory
from ..session.publishing import Diagnostic, SessionPublisher
from ._common import EXIT_OK, EXIT_USAGE, ignore_further_interrupts, parameter_error
from .manager_parameters import RunnerParameters, check_parameter, declare_runner_parameters
from .quick_log import QuickNode
from .realtime import declare_thread_priority
from .runner_link import RunnerLink

__all__ = ["ManagerNode", "run_manager"]


class ManagerNode(RunnerParameters, QuickNode):
    """A node that runs trials on a runner and takes the operator's scores (see the module docstring).

    The subclass declares its own parameters after ``super().__init__``, then calls
    :meth:`open_interfaces` (from then on every parameter change is checked).
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        declare_thread_priority(self)
        declare_runner_parameters(self)
        #: The runner key (``goal_key_file``): goals are sealed for the runner; ``None``: they are not.
        self.runner_key = self._runner_key()
        #: Set (to the exit status) when the node should exit: the work is over and exit_on_finish.
        self.done: Future = Future()
        self._outputs: dict[str, tuple[type, Any]] = {}

    def _runner_key(self) -> bytes | None:
        """The key of ``goal_key_file``; without it, a refusal (``allow_unsealed`` false) or a warning."""
        if self.goal_key_file:
            try:
                key = read_runner_key(self.goal_key_file)
            except SealError as err:
                raise ValueError(str(err)) from err
            self.get_logger().info("runner goals sealed: only a runner holding the runner key learns their policy")
            return key
        if not self.allow_unsealed:
            raise ValueError("no `goal_key_file`, and `allow_unsealed` is false (the default of the launch files on "
                             "a real robot): make a runner key with `evalstop keys new runner` and give its file to "
                             "the manager and the runner (goal_key_file:=FILE), or run with allow_unsealed:=true")
        self.get_logger().warning(
            "no goal_key_file: runner goals carry the policy in clear (any node on the domain, and any local user "
            "reading /dev/shm, can read them); see docs/deploying.md")
        return None

    def open_interfaces(self, *, latched_qos: QoSProfile, comparison_qos: QoSProfile, event_qos: QoSProfile,
                        journal_qos: QoSProfile, diagnostics_qos: QoSProfile,
                        request_qos: QoSProfile = qos.TRIAL_REQUEST_QOS) -> None:
        """Check every later parameter change; create the publishers, the ``trial_score`` subscription, the
        services and the diagnostics timer (after the subclass declared its parameters).  ``trial_request`` keeps
        every open trial's request for a late terminal (``request_qos``, docs/nodes.md)."""
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.get_logger().info(
            f"QoS: trial_request {qos.describe(request_qos)}, session_status/session_config "
            f"{qos.describe(latched_qos)}, comparison_status "
            f"{qos.describe(comparison_qos)}, session_event {qos.describe(journal_qos)}, trial_score/score_ack "
            f"{qos.describe(event_qos)}")
        self._outputs = {
            "trial_request": (TrialRequest, self.create_publisher(TrialRequest, "trial_request", request_qos)),
            "session_status": (SessionStatus, self.create_publisher(SessionStatus, "session_status", latched_qos)),
            "comparison_status": (ComparisonStatus,
                                  self.create_publisher(ComparisonStatus, "comparison_status", comparison_qos)),
            "score_ack": (ScoreAck, self.create_publisher(ScoreAck, "score_ack", event_qos)),
            "session_config": (SessionConfigMsg, self.create_publisher(SessionConfigMsg, "session_config", latched_qos)),
            "session_event": (SessionEvent, self.create_publisher(SessionEvent, "session_event", journal_qos)),
        }
        self._publisher = SessionPublisher(self._send)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", diagnostics_qos)
        self.create_subscription(TrialScore, "trial_score", self._on_score, event_qos)
        self.create_service(SessionControl, "session_control",
                            self._service_callback("session_control", self._on_session_control))
        self.create_service(CorrectScore, "correct_score",
                            self._service_callback("correct_score", self._on_correct_score))
        self.create_timer(1.0, self._publish_diagnostics)

    # -- what the subclass does with the inputs ---------------------------------------------
    def _on_score(self, msg: TrialScore) -> None:
        raise NotImplementedError

    def _on_session_control(self, request: SessionControl.Request, response: SessionControl.Response) -> None:
        raise NotImplementedError

    def _on_correct_score(self, request: CorrectScore.Request, response: CorrectScore.Response) -> None:
        raise NotImplementedError

    def _publish_diagnostics(self) -> None:
        raise NotImplementedError

    def _service_callback(self, kind: str, handler: Callable[[Any, Any], None]) -> Callable[[Any, Any], Any]:
        """The service callback of ``handler`` (which fills the response in); a subclass may check the request."""
        def callback(request: Any, response: Any) -> Any:
            handler(request, response)
            return response
        return callback

    def _parameter_refused(self, name: str) -> str:
        """Why ``name`` may not change now ("" if it may); the values are checked in any case."""
        return ""

    # -- parameters -------------------------------------------------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Check every changed value (:func:`~.manager_parameters.check_parameter`), and ask the subclass."""
        for param in params:
            reason = check_parameter(param.name, param.value) or self._parameter_refused(param.name)
            if reason:
                self.get_logger().warning(f"parameter change refused: {reason}")
                return SetParametersResult(successful=False, reason=reason)
        for param in params:
            if hasattr(self, param.name):
                setattr(self, param.name, param.value)
        return SetParametersResult(successful=True)

    # -- publishing -------------------------------------------------------------------------
    @property
    def publisher(self) -> SessionPublisher:
        """What this node publishes about its session (a station: about its work)."""
        return self._publisher

    def _outward(self, topic: str, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` as they may go out on ``topic`` (a subclass may blind them)."""
        return fields

    def _send(self, topic: str, fields: dict[str, Any], stamp_ns: int | None) -> None:
        """Publish ``fields`` (from :class:`SessionPublisher`) on ``topic``."""
        cls, publisher = self._outputs[topic]
        fields = self._outward(topic, fields)
        if "comparisons" in fields:
            fields = {**fields, "comparisons": [ComparisonStatus(**c) for c in fields["comparisons"]]}
        msg = cls(**fields)
        if hasattr(msg, "header"):
            if stamp_ns is None:
                msg.header.stamp = self.get_clock().now().to_msg()
            else:
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        publisher.publish(msg)

    def send_diagnostics(self, entries: Iterable[Diagnostic], text: Callable[[str], str] = str) -> None:
        """Publish ``entries`` on ``/diagnostics``, their name, message and values (the session id
        aside) passed through ``text`` (the session's blinding, before its key is revealed)."""
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        for d in entries:
            array.status.append(DiagnosticStatus(
                level=bytes([d.level]), name=text(d.name), message=text(d.message), hardware_id=d.hardware_id,
                values=[KeyValue(key=k, value=v if k == "session_id" else text(v)) for k, v in d.values]))
        self._diagnostics_pub.publish(array)

    @staticmethod
    def runner_state(link: RunnerLink | None, runner: str) -> str:
        """The runner link's state as ``/diagnostics`` says it: why goals are held (a WARN), else what the link
        waits for (``waiting``: for which action server)."""
        state = "" if link is None else link.held or link.state
        return f"waiting for the runner action server '{runner}'" if state == "waiting" else state

    def watch_runners(self, driver: TrialDriver, link: RunnerLink, runner: str = "") -> bool:
        """The one-runner rule on what the graph shows now (:meth:`TrialDriver.watch_runners`, the same for
        both managers): goals are held while it holds, a running session pauses on a second runner (logged;
        ``/diagnostics`` says why, WARN). Whether the session was paused now."""
        before = link.held
        paused = driver.watch_runners(link.graph(), runner)  # runner: one of several (docs/parallel.md)
        link.held = driver.check(runner).state
        if link.held and link.held != before:
            self.get_logger().warning(f"runner action '{link.resolved}': {link.held}")
        if paused:
            self.get_logger().warning(f"session paused: {paused}; then resume (session_control)")
        return bool(paused)

    def flush(self, timeout: float = 2.0) -> None:
        """Wait until subscribers acknowledged the reliable messages already published."""
        for _, publisher in self._outputs.values():
            publisher.wait_for_all_acked(Duration(seconds=timeout))

    # -- runner, journal, exit --------------------------------------------------------------
    def runner_limits(self) -> tuple[float, int]:
        """``(goal_response_timeout, max_attempts)``: the limits of this node's :class:`~.runner_link.RunnerLink`
        (as set now; a subclass may take the fault limit from its journal)."""
        return self.goal_response_timeout, self.max_attempts

    def journal_path(self, name: str) -> pathlib.Path:
        """The journal file ``name``.db under ``journal_dir`` (a directory only the user may write)."""
        base = self.journal_dir or os.path.join(
            os.environ.get("ROS_HOME", os.path.expanduser("~/.ros")), "evalstop")
        return journal_directory(base) / f"{name}.db"  # 0700, refused if others can write it

    def exit_when_lingered(self) -> None:
        """The work is over: with ``exit_on_finish``, exit (status 0) after ``exit_linger`` seconds of
        serving the final latched status (subscribers still being discovered receive it)."""
        if not self.exit_on_finish or self.done.done():
            return
        timer: Any = None

        def finish() -> None:
            self.destroy_timer(timer)
            if not self.done.done():
                self.done.set_result(EXIT_OK)
        timer = self.create_timer(max(self.exit_linger, 0.001), finish)


#: ``(exception types, FATAL prefix, exit status)`` of a node that cannot start.
Failure = tuple[tuple[type[Exception], ...], str, int]


def run_manager(name: str, build: Callable[[], ManagerNode], args: list[str] | None,
                failures: tuple[Failure, ...] = ()) -> int:
    """Build the node and spin it until Ctrl-C, or until it sets :attr:`ManagerNode.done`.

    A node that cannot start logs one FATAL line and returns the status of the first of ``failures``
    its exception matches, else 2 (``invalid parameters: ...``) for a bad parameter.
    """
    status = EXIT_OK
    try:
        with ros_context(args):
            try:
                node = build()
            except Exception as err:
                for types, prefix, status in failures:
                    if isinstance(err, types):
                        rclpy.logging.get_logger(name).fatal(f"{prefix}{err}")
                        return status
                if not isinstance(err, (ParameterException, ValueError, TypeError)):
                    raise
                rclpy.logging.get_logger(name).fatal(f"invalid parameters: {parameter_error(err)}")
                return EXIT_USAGE
            # Everything built so far (rclpy, numpy, the session, its tables) lives as long as the
            # process: move it out of the collector's reach, or every full collection walks it
            # (~0.1 s under load, between a score and its status).
            gc.freeze()
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                executor.spin_until_future_complete(node.done)
                node.flush()
            finally:
                ignore_further_interrupts()
                node.destroy_node()
            status = int(node.done.result()) if node.done.done() else EXIT_OK
    except (KeyboardInterrupt, ExternalShutdownException):
        status = EXIT_OK
    ignore_further_interrupts()  # again: rclpy's shutdown put its predecessor back
    return status
