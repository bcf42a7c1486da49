"""``policy_runner``: a ``RunTrial`` action server that runs served policies on a robot.

Every action passes the command guard; nothing a policy server says reaches the result, the log
or the feedback.  docs/policy_runner.md and docs/nodes.md.
"""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Any

import rclpy
from evalstop.action import RunTrial
from evalstop.srv import SessionControl
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool, Trigger

from ..runner.adapters import ADAPTERS, RobotAdapter, make_adapter
from ..runner.adapters.base import EpisodeInfo
from ..runner.adapters.droid import parse_cameras
from ..runner.client import MAX_FRAME_SIZE, MAX_METADATA_SIZE, PolicyClient, ServerAddress
from ..runner.episode import EpisodeControl, EpisodeSettings, Progress, run_episode
from ..runner.errors import Category, ErrorLog, RunnerError, default_error_dir, operator_message
from ..runner.guard import GUARD_MODES, CommandLimits
from ..runner.recorder import EpisodeRecorder, with_recording
from ..runner.stream import CommandStream, StreamSettings
from ..runner.trials import GoalOpener, RunLedger, load_servers
from ..session import auth
from ._common import declare, spin_node
from .quick_log import QuickNode
from .realtime import declare_thread_priority

__all__ = ["PolicyRunner", "main"]


class PolicyRunner(QuickNode):
    """``RunTrial`` action server driving a robot adapter with remote policies."""

    def __init__(self) -> None:
        super().__init__("policy_runner")
        declare_thread_priority(self)
        self.action_name: str = declare(self, "action_name", "run_trial", "Name of the RunTrial action served.",
                                        read_only=True)
        servers_file: str = declare(self, "servers_file", "",
                                    "YAML file mapping policy ids to policy servers (policy_servers: ...).",
                                    read_only=True)
        robot: str = declare(self, "robot", "sim", f"Robot adapter: {', '.join(ADAPTERS)}.", read_only=True)
        self.rate: float = declare(self, "rate", 15.0, "Control rate (Hz).", float_range=(0.1, 1000.0))
        self.max_steps: int = declare(self, "max_steps", 400, "Steps per episode.", int_range=(1, 100000))
        self.timeout: float = declare(self, "timeout", 120.0, "Time limit of an episode (s; simulated seconds on a simulator that keeps time).",
                                      float_range=(0.1, 3600.0))
        self.connect_timeout: float = declare(self, "connect_timeout", 10.0,
                                              "Seconds to connect to a policy server and read its metadata.",
                                              float_range=(0.1, 600.0))
        self.infer_timeout: float = declare(self, "infer_timeout", 10.0,
                                            "Seconds to wait for each action chunk.", float_range=(0.01, 600.0))
        self.auto_score: bool = declare(self, "auto_score", True,
                                        "Return the robot's own score (sim only) in the result.")
        self.record_dir: str = declare(self, "record_dir", "",
                                       "Directory of episode recordings (npz + mp4 per camera, one folder per "
                                       "run under <record_dir>/<session>/); empty: no recording.")
        session_control: str = declare(self, "session_control", "session_control",
                                       "The manager's SessionControl service (paused on emergency stop).",
                                       read_only=True)
        self.guard_mode: str = declare(self, "guard_mode", "refuse",
                                       "Command guard: refuse (a chunk with a value outside the robot's limits "
                                       "fails the run) or clamp (such values are clamped into the limits).",
                                       read_only=True)
        if self.guard_mode not in GUARD_MODES:
            raise ValueError(f"`guard_mode` must be one of {', '.join(GUARD_MODES)}; found {self.guard_mode!r}")
        self.watchdog_ticks: int = declare(self, "watchdog_ticks", 10,
                                           "Control ticks without a valid action before the robot is told to hold.",
                                           int_range=(1, 100000))
        stream = StreamSettings(
            period=1.0 / self.rate, guard_mode=self.guard_mode,
            max_state_age=declare(self, "joint_state_max_age", 0.2,
                                  "Freshness bound (s) of the measured joint state the command stream re-syncs to "
                                  "(start of an episode, hold, homing, fault) and a hold publishes; older: nothing "
                                  "is sent and the fault says why.", float_range=(0.001, 10.0), read_only=True),
            home_tolerance=declare(self, "home_tolerance", 0.01,
                                   "Homing is done when every measured joint is this close to home (rad).",
                                   float_range=(1e-5, 1.0), read_only=True),
            home_timeout=declare(self, "home_timeout", 30.0,
                                 "Seconds homing may take before the reset fails with a robot fault.",
                                 float_range=(0.1, 600.0), read_only=True))
        self.max_frame_size: int = declare(self, "max_frame_size", MAX_FRAME_SIZE,
                                           "Largest frame accepted from a policy server (bytes); a larger one "
                                           "fails the run before it is read.", int_range=(1024, 2**31 - 1))
        self.max_metadata_size: int = declare(self, "max_metadata_size", MAX_METADATA_SIZE,
                                              "Largest metadata frame accepted from a policy server (bytes).",
                                              int_range=(256, 2**31 - 1))
        error_log_dir: str = declare(self, "error_log_dir", "",
                                     "Directory of the runner's private error log (errors.jsonl, 0600): the full "
                                     "text of every failure by its error id. Empty: $ROS_HOME/evalstop/runner "
                                     "(~/.ros/evalstop/runner).", read_only=True)
        self.error_log = ErrorLog(error_log_dir or default_error_dir())
        key_file: str = declare(self, "key_file", "",
                                "The runner's key file (`OPERATOR HEXKEY`, docs/integrity.md): its emergency-stop "
                                "pause requests are signed. Empty: unsigned.", read_only=True)
        self._signer = auth.Signer.from_file(key_file) if key_file else None
        goal_key_file: str = declare(self, "goal_key_file", "",
                                       "The runner key file (`NAME HEXKEY`, the manager's goal_key_file): opens the "
                                       "sealed policy of every goal. Empty: only unsealed goals run.", read_only=True)
        self._session_id = ""  # of the latest goal: the pause request is signed for it
        if not servers_file:
            raise ValueError("`servers_file` is required (a YAML map policy_servers: {policy_id: {host, port}})")
        try:
            options = self._adapter_options(robot)
            self.servers: dict[str, ServerAddress] = load_servers(servers_file)
            self.opener = GoalOpener(goal_key_file)
            self.robot: RobotAdapter = make_adapter(robot, **options)
        except (RunnerError, ImportError) as err:
            raise ValueError(str(err)) from err
        #: The robot's one command stream: the only path to the adapter's ``act``.
        self.stream = CommandStream(self.robot, stream)
        self._ledger: RunLedger[RunTrial.Result] = RunLedger()
        self._robot_lock = threading.Lock()
        self._control = EpisodeControl()
        self._estop = threading.Event()
        group = ReentrantCallbackGroup()
        self._server = ActionServer(self, RunTrial, self.action_name, self._execute, goal_callback=self._on_goal,
                                    cancel_callback=self._on_cancel, callback_group=group)
        self.create_service(SetBool, "emergency_stop", self._on_estop, callback_group=group)
        self.create_service(Trigger, "end_episode", self._on_end_episode, callback_group=group)
        self._pause_client = self.create_client(SessionControl, session_control, callback_group=group)
        limits: CommandLimits | None = getattr(self.robot, "limits", None)
        self.get_logger().info(
            f"serving RunTrial on '{self.action_name}' with the '{robot}' robot: {len(self.servers)} policies, "
            f"{self.rate:g} Hz, max {self.max_steps} steps; command guard '{self.guard_mode}': "
            f"{limits.describe() if limits is not None else 'limits from robot_description (pending)'}")

    def _adapter_options(self, robot: str) -> dict[str, Any]:
        """Adapter keyword arguments from the parameters of the selected robot."""
        if robot == "sim":
            return {"seed": declare(self, "sim.seed", 0, "Seed of the simulated scenes."),
                    "dt": declare(self, "sim.dt", 1.0 / 15.0, "Simulated seconds per action.",
                                  float_range=(1e-4, 1.0)),
                    "end_on_success": declare(self, "sim.end_on_success", True,
                                              "End a rollout as soon as the task is done (as an operator "
                                              "would); false: always run max_steps.")}
        if robot == "ros2":
            return {"node": self,
                    "joint_state_topic": declare(self, "ros2.joint_state_topic", "joint_states",
                                                 "sensor_msgs/JointState input.", read_only=True),
                    "cameras": list(declare(self, "ros2.cameras", ["exterior_image_1_left=camera/image_raw"],
                                            "camera_name=sensor_msgs/Image topic, one per camera.",
                                            read_only=True)),
                    "command_topic": declare(self, "ros2.command_topic", "joint_command",
                                             "Command output topic.", read_only=True),
                    "command_type": declare(self, "ros2.command_type", "trajectory",
                                            "trajectory (JointTrajectory) or array (Float64MultiArray).",
                                            read_only=True),
                    "array_space": declare(self, "ros2.array_space", "joint_position",
                                           "With command_type array: the forward controller's command space, "
                                           "joint_position or joint_velocity (policies, holds and homing use it).",
                                           read_only=True),
                    "joint_names": list(declare(self, "ros2.joint_names", [f"joint{i}" for i in range(1, 9)],
                                                "Arm joint names (7), then the gripper.", read_only=True)),
                    "dt": 1.0 / self.rate, **self._ros2_limits()}
        if robot == "droid":
            pairs = list(declare(self, "droid.cameras", ["<serial>_left=exterior_image_1_left"],
                                 "DROID image key = protocol camera name, one per camera, e.g. "
                                 "24259877_left=exterior_image_1_left, 13062452_left=wrist_image_left.",
                                 read_only=True))
            arm = declare(self, "droid.arm", "panda", "The DROID station's arm: panda or fr3 (its published "
                          "joint limits guard every command).", read_only=True)
            return {"cameras": parse_cameras(pairs), "arm": arm}
        if robot == "robosuite":  # the physics extra (tools/install_physics.sh); simulated time, no pacing
            return {"task": declare(self, "robosuite.task", "Lift", "robosuite task: Lift, Stack, PickPlace, Door, ...",
                                    read_only=True),
                    "seed": declare(self, "robosuite.seed", 0, "Seed of the simulated scenes."),
                    "spread": declare(self, "robosuite.spread", 0.1,
                                      "Half-width (m) of the square the object is placed in (0: the task's own).",
                                      float_range=(0.0, 0.3), read_only=True),
                    "record_resolution": self._record_resolution(),
                    "rate": self.rate}
        if robot == "widowx":
            return {"host": declare(self, "widowx.host", "localhost", "WidowX server host.", read_only=True),
                    "port": declare(self, "widowx.port", 5556, "WidowX server port.", read_only=True),
                    "workspace": self._widowx_workspace()}
        return {}

    def _record_resolution(self) -> tuple[int, int] | None:
        """``robosuite.record_resolution`` [height, width] of the episode videos (with record_dir)."""
        size = list(declare(self, "robosuite.record_resolution", [256, 256],
                            "Height and width (px) of the cameras in the episode videos (record_dir), rendered "
                            "beside the policy's images; [0, 0]: the policy's resolution.", read_only=True))
        if len(size) != 2 or any(int(v) < 0 or int(v) > 2048 for v in size):
            raise ValueError(f"`robosuite.record_resolution` must be [height, width] in 0..2048; found {size}")
        return (int(size[0]), int(size[1])) if self.record_dir and all(size) else None

    def _ros2_limits(self) -> dict[str, Any]:
        """``limits`` (from parameters) or the URDF topic of the ros2 adapter."""
        source = declare(self, "ros2.limits_source", "robot_description",
                         "Where the arm's limits come from: robot_description (the <limit> tags of the URDF on "
                         "that topic) or parameters (ros2.position_lower/upper, ros2.velocity_limits, "
                         "ros2.acceleration_limits).", read_only=True)
        topic = declare(self, "ros2.robot_description_topic", "robot_description",
                        "std_msgs/String topic of the URDF (transient local).", read_only=True)
        gripper = list(declare(self, "ros2.gripper_range", [0.0, 1.0], "Gripper command range.", read_only=True))
        home = declare(self, "ros2.home", Parameter.Type.DOUBLE_ARRAY,
                       "Home pose (7 joints + gripper); unset: all zeros.", read_only=True)
        arrays = {name: declare(self, f"ros2.{name}", Parameter.Type.DOUBLE_ARRAY, text, read_only=True)
                  for name, text in (("position_lower", "Lower joint limits (rad, 7)."),
                                     ("position_upper", "Upper joint limits (rad, 7)."),
                                     ("velocity_limits", "Joint speed limits (rad/s, 7)."),
                                     ("acceleration_limits", "Joint acceleration limits (rad/s^2, 7); unset: none."))}
        options: dict[str, Any] = {"robot_description_topic": topic, "home": home,
                                   "gripper_range": (gripper + [0.0, 1.0])[:2] if len(gripper) < 2 else gripper[:2]}
        if source == "robot_description":
            return options
        if source != "parameters":
            raise ValueError(f"`ros2.limits_source` must be robot_description or parameters; found {source!r}")
        missing = [f"ros2.{n}" for n in ("position_lower", "position_upper", "velocity_limits") if arrays[n] is None]
        if missing:
            raise ValueError(f"ros2.limits_source parameters needs {', '.join(missing)}")
        names = tuple(list(self.get_parameter("ros2.joint_names").value)[:7])
        options["limits"] = CommandLimits(
            names, tuple(arrays["position_lower"]), tuple(arrays["position_upper"]), tuple(arrays["velocity_limits"]),
            None if arrays["acceleration_limits"] is None else tuple(arrays["acceleration_limits"]),
            gripper=tuple(options["gripper_range"]), source="ros2.* parameters")
        return options

    def _widowx_workspace(self) -> Any:
        box = declare(self, "widowx.workspace", Parameter.Type.DOUBLE_ARRAY,
                      "End-effector box x y z lower, then x y z upper (m); unset: Bridge's default.", read_only=True)
        if box is None:
            return None
        if len(box) != 6:
            raise ValueError(f"`widowx.workspace` needs 6 values (lower xyz, upper xyz); found {len(box)}")
        return (tuple(box[:3]), tuple(box[3:]))

    def _policy(self, goal: RunTrial.Goal) -> str:
        """The goal's policy ("" when its seal does not open)."""
        try:
            return self.opener.identity(goal)
        except RunnerError:
            return ""

    def _fail(self, err: RunnerError, goal: RunTrial.Goal) -> str:
        """The operator's message of a failure; its full text goes to the private error log only."""
        policy = self._policy(goal)
        address = self.servers.get(policy)
        error_id = self.error_log.record(err, err.category, session=goal.session_id, trial=goal.trial_id,
                                         attempt=goal.attempt, policy=policy, label=goal.label,
                                         server=address.uri if address else "")
        return operator_message(err.category, error_id, err.detail)

    # -- services ---------------------------------------------------------------------------
    def _on_estop(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        if not request.data:
            self._estop.clear()
            self.get_logger().warning("emergency stop released")
            response.success, response.message = True, "emergency stop released"
            return response
        self._estop.set()
        self._control.abort("emergency stop", self.stream)
        self._hold("emergency stop")
        self.get_logger().error("EMERGENCY STOP: robot holding position; session paused")
        self._pause_session("emergency stop at the robot (policy_runner)")
        response.success, response.message = True, "robot stopped; release with data=false"
        return response

    def _pause_session(self, reason: str) -> None:
        """Ask the manager to pause (re-sent while no response arrives: DDS may drop one)."""
        request = SessionControl.Request(command=SessionControl.Request.COMMAND_PAUSE, reason=reason)

        def send(tries: int) -> None:
            if tries == 0 or not rclpy.ok(context=self.context):
                return
            if self._signer is not None:
                self._signer.sign("session_control", self._session_id, request)  # fresh counter per send
            future = self._pause_client.call_async(request)
            timer = None

            def check() -> None:
                assert timer is not None
                timer.cancel()
                self.destroy_timer(timer)
                if future.done():
                    result = future.result()
                    self.get_logger().info(f"session_control pause: {result.message if result else 'no reply'}")
                else:
                    send(tries - 1)

            timer = self.create_timer(2.0, check)

        send(10)

    def _on_end_episode(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._control.finish()
        response.success, response.message = True, "episode will end after this step"
        return response

    # -- action -----------------------------------------------------------------------------
    def _on_goal(self, goal: RunTrial.Goal) -> GoalResponse:
        self._session_id = goal.session_id
        try:
            policy = self.opener.identity(goal)
        except RunnerError as err:  # accepted: its result says why it cannot run
            self.get_logger().error(f"trial {goal.trial_id}: {err.category.value}: {err.detail}; the run fails")
            return GoalResponse.ACCEPT
        if policy not in self.servers:
            self.get_logger().error(f"trial {goal.trial_id}: goal rejected, its policy has no server in servers_file")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        self.get_logger().info(f"trial {goal_handle.request.trial_id}: cancel requested, robot stopping")
        self._control.abort("canceled", self.stream)
        return CancelResponse.ACCEPT

    def _hold(self, why: str) -> None:
        """Hold the robot (its command stream); a hold that could not be sent is logged (runner text only)."""
        problem = self.stream.stop()
        if problem:
            self.get_logger().error(f"{why}: robot not held: {problem}")

    def _execute(self, goal_handle: ServerGoalHandle) -> RunTrial.Result:
        goal: RunTrial.Goal = goal_handle.request
        new, entry = self._ledger.claim((goal.session_id, goal.trial_id, goal.attempt))
        if not new:
            self.get_logger().info(f"trial {goal.trial_id} (attempt {goal.attempt}): goal re-sent, same run")
            result = None
            while result is None and rclpy.ok(context=self.context):
                result = self._ledger.wait(entry, 0.5)
        else:
            try:
                result = self._run(goal_handle)
            except Exception:
                if rclpy.ok(context=self.context):
                    raise
                result = RunTrial.Result(ok=False, message=self._fail(
                    RunnerError("runner shut down mid-rollout", category=Category.SHUTDOWN), goal))
            self._ledger.finish(entry, result)
        result = self.opener.prove(goal, result or RunTrial.Result(ok=False, message=self._fail(
            RunnerError("runner shut down before the run ended", category=Category.SHUTDOWN), goal)))
        try:
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.succeed()
        except Exception:  # rclpy's RCLError: the action server's publishers are gone at Ctrl-C
            if rclpy.ok(context=self.context):
                raise
        return result

    def _run(self, goal_handle: ServerGoalHandle) -> RunTrial.Result:
        goal: RunTrial.Goal = goal_handle.request
        trial = f"trial {goal.trial_id}"
        with self._robot_lock:
            self._control = control = EpisodeControl()
            start = time.monotonic()
            if self._estop.is_set():
                message = self._fail(RunnerError("emergency stop engaged", category=Category.EMERGENCY_STOP,
                                                 detail="engaged (release it with emergency_stop data=false)"), goal)
                self.get_logger().error(f"{trial}: {message}")
                return RunTrial.Result(ok=False, message=message)
            try:
                policy = self.opener.identity(goal)
            except RunnerError as err:
                message = self._fail(err, goal)
                self.get_logger().error(f"{trial}: {message}")
                return RunTrial.Result(ok=False, message=message)
            feedback = RunTrial.Feedback(phase="connecting")
            goal_handle.publish_feedback(feedback)

            def on_step(p: Progress) -> None:
                feedback.phase, feedback.step, feedback.progress = "rollout", p.step, p.step / p.max_steps
                feedback.elapsed, feedback.inference_latency = time.monotonic() - start, p.latency
                goal_handle.publish_feedback(feedback)

            def on_event(event: str) -> None:  # runner text only (the watchdog)
                self.get_logger().warning(f"{trial}: {event}")
                feedback.phase = "holding"
                goal_handle.publish_feedback(feedback)

            settings = EpisodeSettings(prompt=goal.task, rate=self.rate, max_steps=self.max_steps,
                                       timeout=self.timeout, guard_mode=self.guard_mode,
                                       watchdog_ticks=self.watchdog_ticks)
            episode = EpisodeInfo(goal.session_id, goal.trial_id, goal.task, goal.initial_condition)
            self.get_logger().info(f"{trial} (attempt {goal.attempt}): rollout started")
            recorder = None
            if self.record_dir:
                folder = pathlib.Path(self.record_dir) / goal.session_id / f"trial_{goal.trial_id:04d}_attempt_{goal.attempt}"
                recorder = EpisodeRecorder(folder, fps=self.rate)
            try:
                with PolicyClient(self.servers[policy], connect_timeout=self.connect_timeout,
                                  infer_timeout=self.infer_timeout, max_frame_size=self.max_frame_size,
                                  max_metadata_size=self.max_metadata_size) as client:
                    outcome = run_episode(client, self.robot, episode, settings, control=control, on_step=on_step,
                                          policy_session=f"{goal.session_id}-{goal.trial_id}", recorder=recorder,
                                          on_event=on_event, stream=self.stream)
            except Exception as exc:  # any failure: the robot holds, the text stays private
                self._hold(trial)
                err = exc if isinstance(exc, RunnerError) else RunnerError(
                    f"{type(exc).__name__}: {exc}", category=Category.ROBOT)
                if not rclpy.ok(context=self.context):  # Ctrl-C or shutdown: an ending, not a fault
                    err = RunnerError("runner shut down mid-rollout", category=Category.SHUTDOWN)
                message = self._fail(err, goal)
                if rclpy.ok(context=self.context):
                    self.get_logger().error(f"{trial}: rollout failed: {message}; robot stopped")
                else:
                    self.get_logger().info(f"{trial}: rollout stopped, the runner is shutting down; robot stopped")
                if recorder is not None and (recorder.directory / "episode.npz").is_file():
                    message = with_recording(message, recorder.directory)  # failed runs are recorded too
                return RunTrial.Result(ok=False, message=message, duration=time.monotonic() - start)
            result = RunTrial.Result(ok=True, duration=time.monotonic() - start,
                                     message=f"{outcome.steps} steps, ended by {outcome.ended_by}")
            if recorder is not None:
                result.message = with_recording(result.message, recorder.directory)
            if self.auto_score and outcome.score is not None:
                result.auto_scored = True
                result.auto_success, result.auto_progress = outcome.score.success, outcome.score.progress
            if outcome.home_error:  # the runner's own text; the next rollout homes first
                self.get_logger().error(f"{trial}: {outcome.home_error}")
            feedback.phase, feedback.progress, feedback.elapsed = "done", 1.0, result.duration
            goal_handle.publish_feedback(feedback)
            scored = (f", success={int(result.auto_success)} progress={result.auto_progress:.3f}"
                      if result.auto_scored else "")
            self.get_logger().info(f"{trial}: rollout done, {result.message}{scored}")
            return result


def main(args: list[str] | None = None) -> int:
    """Run the node until Ctrl-C or an external shutdown; exit code 0, or 2 on bad parameters."""
    return spin_node("policy_runner", PolicyRunner, args, threads=4,
                     on_exit=lambda node: node.stream.stop())  # type: ignore[attr-defined]
