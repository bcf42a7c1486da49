"""``teleop_scorer``: the operator's scoring terminal (plain lines: works over SSH, in tmux, in a pipe).

Its one-key commands are listed by ``h`` and in docs/nodes.md; it never prints a policy id.
"""

from __future__ import annotations

import contextlib
import getpass
import math
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

import rclpy
from evalstop.msg import ScoreAck, SessionStatus, TrialRequest, TrialScore
from evalstop.srv import CorrectScore, SessionControl
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import QoSProfile
from std_srvs.srv import SetBool, Trigger

from .. import qos
from ..operator_input import decode_input, printable
from ..ros_context import ros_context
from ..session import auth
from ._common import EXIT_USAGE, declare, parameter_error
from .quick_log import QuickNode
from .realtime import declare_thread_priority

__all__ = ["TeleopScorer", "main"]

HELP = """\
  Enter        the scene is reset: start the robot (when asked "scene reset for trial N?")
  s            success (progress 1), send         f [P]   failure with progress P, send
  p P          progress 0-1 or 0-100% for next f  n TEXT  note for the next score
  r LABEL      preferred label this round ('=')   u [WHY] undo the last recorded score
  i TEXT       A/B: the instruction you gave      v no    A/B: this pair is not valid (v yes)
  d            task done: end the episode now     x       EMERGENCY STOP (x off: release)
  t N          score trial N next, whatever trial arrives meanwhile (several arms: every open
               trial's request is shown)
  h            this help                          q       quit"""
STATES = {SessionStatus.STATE_IDLE: "idle", SessionStatus.STATE_RUNNING: "running",
          SessionStatus.STATE_PAUSED: "PAUSED", SessionStatus.STATE_FINISHED: "FINISHED",
          SessionStatus.STATE_ABORTED: "ABORTED"}


class TeleopScorer(QuickNode):
    """Operator terminal: shows blinded trials, publishes scores, shows acknowledgements."""

    def __init__(self, *, latched_qos: QoSProfile, event_qos: QoSProfile, out: TextIO = sys.stdout) -> None:
        super().__init__("teleop_scorer")
        declare_thread_priority(self)
        self.scorer: str = decode_input(declare(self, "scorer", getpass.getuser(),
                                                "Operator name stored with every score."))
        self.ack_timeout: float = declare(
            self, "ack_timeout", 2.0, "Seconds to wait for the manager's ScoreAck before re-sending a score.")
        self.max_sends: int = declare(self, "max_sends", 10, "Sends of one score before giving up.")
        self.key_file: str = declare(
            self, "key_file", "", "This operator's key file (`OPERATOR HEXKEY`): scores and undo requests are "
            "signed and only signed answers count. Empty: unsigned (a manager with keys refuses them).",
            read_only=True)
        self._signer = auth.Signer.from_file(self.key_file) if self.key_file else None
        if self._signer is not None:
            self.scorer = self._signer.operator
        #: Answers on score_ack for this terminal's scores that were not signed for them (ignored).
        self.unauthenticated_acks = 0
        self._ignored_reason = ""
        self._session_id = ""  # the session of the latest trial request or status (signatures bind to it)
        self.out = out
        self._print_lock = threading.Lock()
        self._cond = threading.Condition()
        self.trial: TrialRequest | None = None
        #: Every open trial's latest request (several arms: a late terminal gets them all, latched).
        self.open_requests: dict[int, TrialRequest] = {}
        self._acks: list[ScoreAck] = []
        self._state: int | None = None
        #: what the pending trial waits for: "reset" (the operator's confirmation), "run" (the robot
        #: runs it), "score" (the robot is done); "" when unknown
        self._awaiting = ""
        self._phase: tuple[int, str] = (0, "")  # (pending trial, awaiting) last shown
        #: a phase line (trial id, awaiting) held back until its trial is on the screen
        self._deferred_phase: tuple[int, str] | None = None
        self._sending = False  # a score or an undo is out, waiting for the manager's answer
        self._last_recorded = 0  # the trial whose score this terminal recorded last (what `u` voids)
        self._deferred: TrialRequest | None = None  # a trial that arrived meanwhile, shown after the ack
        #: ``t N``: the trial the operator picked, scored next whatever trial arrives meanwhile; the
        #: latest such arrival, shown once the pick is scored
        self._picked: int | None = None
        self._passed_over: TrialRequest | None = None
        self.progress: float | None = None
        self.note = ""
        self.preference = ""
        self.instruction = ""  # design ab: the round's instruction and validity, kept for the round
        self.pair_invalid = False
        self._score_pub = self.create_publisher(TrialScore, "trial_score", event_qos)
        self.create_subscription(TrialRequest, "trial_request", self._on_request, latched_qos)
        self.create_subscription(ScoreAck, "score_ack", self._on_ack, event_qos)
        self.create_subscription(SessionStatus, "session_status", self._on_status, latched_qos)
        self._correct = self.create_client(CorrectScore, "correct_score")
        self._end_episode = self.create_client(Trigger, "end_episode")
        self._estop = self.create_client(SetBool, "emergency_stop")
        self._control = self.create_client(SessionControl, "session_control")
        # debug, not info: the operator's screen starts without ROS log lines
        self.get_logger().debug(f"operator {self.scorer!r}; trial_request {qos.describe(latched_qos)}, "
                               f"trial_score {qos.describe(event_qos)}")

    def say(self, text: str) -> None:
        """Print ``text`` (thread-safe, flushed)."""
        with self._print_lock:  # in the terminal's encoding, whatever its locale
            print(printable(text, getattr(self.out, "encoding", None)), file=self.out, flush=True)

    # -- subscriptions ----------------------------------------------------------------------
    def _on_request(self, msg: TrialRequest) -> None:
        with self._cond:
            if msg.trial_id == 0:
                self.open_requests.clear()
            else:
                self.open_requests[msg.trial_id] = msg
            if self.trial is not None and (msg.trial_id, msg.attempt) == (self.trial.trial_id, self.trial.attempt):
                return
            passed_over = self._picked is not None and msg.trial_id not in (0, self._picked)
            if passed_over:  # the operator's pick (t N) stays the trial scored next
                self._passed_over = msg
            else:
                self._picked = None
                if self.trial is None or msg.round != self.trial.round:
                    self.instruction, self.pair_invalid = "", False
                self.trial = msg
                self._session_id = msg.session_id or self._session_id
                self.progress, self.note, self.preference = None, "", ""
                self._cond.notify_all()
                if self._sending:  # shown after the answer to the score being sent
                    self._deferred = msg
                    return
        if passed_over:
            self.say(f"trial {msg.trial_id} (label {msg.label}) requested too: t {msg.trial_id} to score it")
        else:
            self._show(msg)

    def _show(self, msg: TrialRequest) -> None:
        if msg.trial_id == 0:
            self.say("\nno trial pending: the session is over.")
            return
        retry = f", attempt {msg.attempt}: the runner failed, reset again" if msg.attempt > 1 else ""
        task = f"{msg.task}: {msg.task_description}" if msg.task_description else msg.task
        labels = ", ".join(msg.round_labels) or msg.label
        self.say(f"\n== trial {msg.trial_id} (round {msg.round}{retry}) -- policy label {msg.label} ==\n"
                 f"round {msg.round}: labels {labels} -- this trial: {msg.label}\n"
                 f"task:              {task}\n"
                 f"initial condition: {msg.initial_condition}\n"
                 f"reset:             {msg.reset_instructions}\n"
                 "score after the rollout: s = success, f [P] = failure (progress P), h = help")
        self._show_phase(msg.trial_id)

    def _show_phase(self, trial_id: int) -> None:
        """Print the held-back phase line of ``trial_id``, if any."""
        with self._cond:
            held, self._deferred_phase = self._deferred_phase, None
        if held is not None and held[0] == trial_id:
            self.say(self._phase_line(*held))
        elif held is not None:
            with self._cond:
                self._deferred_phase = self._deferred_phase or held

    def _phase_line(self, trial_id: int, awaiting: str) -> str:
        """What the operator must do now for the pending trial ``trial_id`` (``awaiting`` its phase)."""
        if awaiting == "reset":
            trial = self.trial
            scene = (f" ({trial.initial_condition}: {trial.reset_instructions})"
                     if trial is not None and trial.trial_id == trial_id else "")
            return f"-- scene reset for trial {trial_id}?{scene} [enter] --"
        if awaiting == "run":
            return f"-- robot running trial {trial_id} (d = task done, x = EMERGENCY STOP) --"
        return f"-- robot done: score trial {trial_id} now (s, or f [P]) --"

    def _on_ack(self, msg: ScoreAck) -> None:
        with self._cond:
            self._acks.append(msg)
            self._cond.notify_all()

    def _on_status(self, msg: SessionStatus) -> None:
        self._session_id = msg.session_id or self._session_id
        awaiting = msg.state_name.partition(":awaiting_")[2] if msg.pending_trial_id else ""
        self._awaiting = awaiting
        if (msg.pending_trial_id, awaiting) != self._phase:
            self._phase = phase = (msg.pending_trial_id, awaiting)
            line = awaiting in ("reset", "run", "score")
            with self._cond:
                shown = self.trial is not None and self.trial.trial_id == msg.pending_trial_id
                if line and (self._sending or not shown):  # shown after the trial it belongs to
                    self._deferred_phase, line = phase, False
            if line:
                self.say(self._phase_line(*phase))
        if msg.state != self._state:
            self._state = msg.state
            self.say(f"[session {msg.session_id or '-'}: {STATES.get(msg.state, msg.state)}, "
                     f"{msg.trials_done} trials scored]")

    # -- commands ---------------------------------------------------------------------------
    def command(self, line: bytes | str) -> bool:
        """Run one command line (any bytes: :func:`~evalstop_ros.operator_input.decode_input`);
        returns False for quit."""
        word, _, rest = decode_input(line).strip().partition(" ")
        rest = rest.strip()
        if not word:
            if self._awaiting == "reset":
                self.confirm_reset()
            return True
        if word in ("q", "quit", "exit"):
            return False
        if word in ("h", "help", "?"):
            self.say(HELP)
        elif word == "t":
            self.select(rest)
        elif word in ("s", "f") and self._awaiting == "reset" and self._at_head():
            self.say("the robot has not run this trial yet: reset the scene, press Enter, and score it once it is done")
        elif word in ("s", "f") and self._awaiting == "run" and self._at_head():
            self.say("the robot is still running this trial: score it once it is done (d ends the episode now)")
        elif word == "s":
            if self.progress is not None and self.progress < 1.0:
                self.say(f"warning: success ignores the progress {self.progress:g} set with p (a success has "
                         "progress 1); sending success")
            self.send(success=True, progress=1.0)
        elif word == "f":
            progress = self._parse_progress(rest) if rest else (self.progress if self.progress is not None else 0.0)
            if progress is not None:
                if progress >= 1.0:
                    self.say("warning: failure with progress 1 (full progress, task not done?); "
                             "use s for a success")
                self.send(success=False, progress=progress)
        elif word == "d":
            self._robot_call(self._end_episode, Trigger.Request(), "task done")
        elif word == "x":
            engage = rest.lower() not in ("off", "release", "0")
            self._robot_call(self._estop, SetBool.Request(data=engage),
                             "EMERGENCY STOP" if engage else "emergency stop release",
                             find_within=2.0)  # an E-stop the runner does not offer: say so at once (the robot's own button)
        elif word == "p":
            progress = self._parse_progress(rest)
            if progress is not None:
                self.progress = progress
                self.say(f"progress {progress:g} for the next failure (f)")
        elif word == "n":
            self.note = rest
            self.say(f"note: {rest!r}")
        elif word == "r":
            self.preference = rest
            self.say(f"preference: {rest!r}")
        elif word == "i":
            self.instruction = rest
            self.say(f"instruction for this round: {rest!r}" if rest else "instruction: the task shown")
        elif word == "v":
            if rest.lower() not in ("no", "n", "yes", "y"):
                self.say("v no: this round's pair is not valid; v yes: it is")
            else:
                self.pair_invalid = rest.lower() in ("no", "n")
                self.say("this round's pair is NOT valid: it will count nowhere (v yes to undo)"
                         if self.pair_invalid else "this round's pair is valid")
        elif word == "u":
            self.undo(rest or "operator undo")
        else:
            self.say(f"unknown command {word!r}; h for help")
        return True

    def _at_head(self) -> bool:
        """The trial on the screen is the session's earliest open one (the phase in ``session_status`` is its)."""
        with self._cond:
            return self.trial is None or self.trial.trial_id == self._phase[0]

    def select(self, text: str) -> None:
        """``t N``: score open trial ``N`` next (its request shown again)."""
        with self._cond:
            chosen = self.open_requests.get(int(text)) if text.isdigit() else None
            if chosen is not None:
                self.trial, self.progress, self.note, self.preference = chosen, None, "", ""
                self._picked, self._passed_over = chosen.trial_id, None
            choices = ", ".join(str(t) for t in sorted(self.open_requests)) or "none"
        if chosen is None:
            self.say(f"t N: N one of the open trials ({choices}); found {text!r}")
            return
        self.say(f"scoring trial {chosen.trial_id} next")
        self._show(chosen)

    def _parse_progress(self, text: str) -> float | None:
        """A progress in [0, 1], or on RoboArena's 0-100 scale with a percent sign (``70%``)."""
        percent = text.endswith("%")
        try:
            value = float(text[:-1] if percent else text) / (100.0 if percent else 1.0)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            self.say(f"progress must be a number in [0, 1] (or 0-100%); found {text!r}")
            return None
        return value

    def send(self, *, success: bool, progress: float) -> None:
        """Publish the score of the pending trial and wait for its acknowledgement (re-sending)."""
        with self._cond:
            trial = self.trial
        if trial is None or trial.trial_id == 0:
            self.say("no trial to score")
            return
        msg = TrialScore(trial_id=trial.trial_id, token=trial.token, success=success, progress=progress,
                         preference=self.preference, notes=self.note, scorer=self.scorer,
                         instruction=self.instruction, pair_invalid=self.pair_invalid)
        msg.header.stamp = self.get_clock().now().to_msg()
        with self._waiting_for_manager():
            self._send(msg, trial.session_id)
            with self._cond:  # the pick is answered: a trial that arrived meanwhile is the next one
                if self._picked == trial.trial_id:
                    self._picked, later, self._passed_over = None, self._passed_over, None
                    if later is not None:
                        self.trial = self._deferred = later
                        self.progress, self.note, self.preference = None, "", ""

    @contextlib.contextmanager
    def _waiting_for_manager(self) -> Iterator[None]:
        """While the manager's answer is awaited, hold back new trials: the answer prints first."""
        with self._cond:
            self._sending = True
        try:
            yield
        finally:
            with self._cond:
                self._sending, deferred, self._deferred = False, self._deferred, None
            if deferred is not None:
                self._show(deferred)
            else:
                self._show_phase(self.trial.trial_id if self.trial is not None else 0)

    def _send(self, msg: TrialScore, session_id: str) -> None:
        trial_id, success, progress = msg.trial_id, msg.success, msg.progress
        for attempt in range(1, self.max_sends + 1):
            with self._cond:
                seen = len(self._acks)
            if self._signer is not None:
                self._signer.sign("trial_score", session_id, msg)  # a fresh counter for every send
            self._score_pub.publish(msg)
            ack = self._wait_ack(msg, session_id, seen)
            if ack is not None:
                break
            self.say(f"no answer from the manager for trial {trial_id} (send {attempt}); sending again")
        else:
            said = f"; the last said: {self._ignored_reason!r}" if self._ignored_reason else ""
            ignored = (f" ({self.unauthenticated_acks} unauthenticated answers ignored so far{said}: check the key "
                       "files)" if self.unauthenticated_acks else "")
            self.say(f"trial {trial_id}: NOT recorded, the manager does not answer; score it again later{ignored}")
            return
        if not ack.accepted:
            self.say(f"trial {trial_id}: REJECTED: {ack.reason}")
        elif ack.duplicate:
            self.say(f"trial {trial_id}: already recorded ({ack.reason})")
        else:
            extra = f" ({ack.reason})" if ack.reason else ""
            self.say(f"trial {trial_id}: recorded: success={int(success)} progress={progress:g}{extra}")
            self._last_recorded = trial_id
            with self._cond:
                self.open_requests.pop(trial_id, None)
                if self.trial is not None and self.trial.trial_id == trial_id:
                    self.progress, self.note, self.preference = None, "", ""

    def _wait_ack(self, msg: TrialScore, session_id: str, seen: int) -> ScoreAck | None:
        """The manager's answer to ``msg`` (signed for it, with a key file), or None after ``ack_timeout``."""
        checked: dict[int, bool] = {}  # ack index -> answers msg

        def answers(index: int, ack: ScoreAck) -> bool:
            if index not in checked:
                ok = ack.trial_id == msg.trial_id
                if ok and self._signer is not None:
                    ok = (ack.scorer == msg.scorer and ack.counter == msg.counter
                          and self._signer.verify_answer("trial_score", session_id, msg, ack))
                    if not ok:
                        self.unauthenticated_acks += 1
                        self._ignored_reason = ack.reason[:200]
                checked[index] = ok
            return checked[index]

        def answered() -> ScoreAck | None:
            return next((a for i, a in enumerate(self._acks[seen:], seen) if answers(i, a)), None)

        with self._cond:
            self._cond.wait_for(lambda: answered() is not None, timeout=self.ack_timeout)
            return answered()

    def undo(self, reason: str) -> None:
        """Void the last recorded score through the manager's ``correct_score`` service."""
        if not self._correct.wait_for_service(timeout_sec=5.0):
            self.say("undo failed: the correct_score service is not available")
            return
        if self._last_recorded:
            self.say(f"undo: voiding the last recorded score (trial {self._last_recorded} from this terminal); "
                     "that trial will be run again")
        request = CorrectScore.Request(trial_id=0, action=CorrectScore.Request.ACTION_UNDO, reason=reason,
                                       scorer=self.scorer)
        session_id = self._session_id
        if self._signer is not None:
            self._signer.sign("correct_score", session_id, request)
        done = threading.Event()
        with self._waiting_for_manager():
            future = self._correct.call_async(request)
            future.add_done_callback(lambda _: done.set())
            if not done.wait(10.0):
                self.say("undo failed: no answer from the manager")
                return
            response = future.result()
            if self._signer is not None and not self._signer.verify_answer("correct_score", session_id, request,
                                                                           response):
                self.say(f"undo: the answer is not signed by the manager for this request, ignored "
                         f"(it said: {response.message[:200]!r}); check the key files")
                return
            self.say(f"undo: {response.message}" if response.ok else f"undo refused: {response.message}")


    def confirm_reset(self) -> None:
        """Tell the manager that the pending trial's scene is reset (it then starts the robot)."""
        with self._cond:
            trial = self.trial
        if trial is None or trial.trial_id == 0 or trial.trial_id != self._phase[0]:
            self.say("no trial waits for a scene reset")
            return
        request = SessionControl.Request(command=SessionControl.Request.COMMAND_CONFIRM_RESET,
                                         trial_id=trial.trial_id, attempt=trial.attempt,
                                         reason=f"scene reset confirmed by {self.scorer}", scorer=self.scorer)
        self._robot_call(self._control, request, "scene reset", server="the manager", signed="session_control")

    def _robot_call(self, client: Any, request: Any, what: str, server: str = "the runner", signed: str = "",
                    find_within: float = 5.0) -> None:
        """Call a service of ``server`` (found within ``find_within`` seconds: discovery is slow on a
        loaded machine), re-sending every second (DDS may drop a request or its answer) for 5 s;
        the services are idempotent, so a re-sent request gets the same answer.

        ``signed``: the request kind to sign it as (afresh for every send) when this terminal has a
        key; the answer then counts only with the manager's signature."""
        if not client.wait_for_service(timeout_sec=find_within):
            self.say(f"{what}: {server} does not offer {client.srv_name} (is it running?)")
            return
        session_id, signer = self._session_id, self._signer if signed else None
        for _ in range(5):
            if signer is not None:
                signer.sign(signed, session_id, request)
            done = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _, answered=done: answered.set())
            if done.wait(1.0):
                result = future.result()
                if signer is not None and not signer.verify_answer(signed, session_id, request, result):
                    self.say(f"{what}: the answer is not signed by the manager for this request, ignored "
                             f"(it said: {result.message[:200]!r}); check the key files")
                    return
                ok = getattr(result, "success", getattr(result, "ok", True))
                self.say(f"{what}: {result.message}" if ok else f"{what} REFUSED: {result.message}")
                return
        self.say(f"{what}: NO ANSWER from {server}")


def main(args: list[str] | None = None) -> int:
    """Run the terminal until ``q``, end of input or Ctrl-C; exit status 0 (2: invalid parameters)."""
    try:
        with ros_context(args):
            try:
                node = TeleopScorer(latched_qos=qos.TRIAL_REQUEST_QOS, event_qos=qos.SCORE_QOS)
            except (ParameterException, ValueError, TypeError) as err:  # e.g. a bad key_file
                rclpy.logging.get_logger("teleop_scorer").fatal(f"invalid parameters: {parameter_error(err)}")
                return EXIT_USAGE
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            spinner = threading.Thread(target=executor.spin, daemon=True)
            spinner.start()
            node.say("evalstop operator terminal: waiting for a trial (h for help, q to quit)")
            try:
                for line in getattr(sys.stdin, "buffer", sys.stdin):  # bytes: decoded by command()
                    if not node.command(line):
                        break
            finally:
                executor.shutdown()  # spin() returns in the other thread
                spinner.join(5.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return 0
