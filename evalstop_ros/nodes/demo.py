"""``evalstop_demo``: a complete simulated evaluation as separate ROS processes, start to decision.

Exit status: 0 when the session finished and the offline re-analysis agrees, 1 otherwise, 2 for
usage errors (docs/nodes.md).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import pathlib
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

import rclpy
from ament_index_python.packages import PackageNotFoundError, get_package_prefix, get_package_share_directory
from diagnostic_msgs.msg import DiagnosticArray
from evalstop.msg import ComparisonStatus, SessionStatus
from evalstop.srv import SessionControl
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.utilities import remove_ros_args

from .. import qos
from ..ros_context import ros_context
from ..runner.scripted_physics import KINDS as PHYSICS_KINDS
from ..session import ConfigError, SessionConfig, load_config, offline_claims, offline_decisions
from ..session.auth import Signer, new_keys, write_keys
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

__all__ = ["DemoMonitor", "add_arguments", "main"]

DECISIONS = {ComparisonStatus.DECISION_CONTINUE: "CONTINUE", ComparisonStatus.DECISION_B_BETTER: "B_BETTER",
             ComparisonStatus.DECISION_A_BETTER: "A_BETTER",
             ComparisonStatus.DECISION_BUDGET_EXHAUSTED: "BUDGET_EXHAUSTED"}
FINAL_STATES = (SessionStatus.STATE_FINISHED, SessionStatus.STATE_ABORTED)
EPILOG = """\
example:
  evalstop_demo --rates 0.5,0.8 --seed 3

exit status: 0 finished and verified, 1 failed (a node died, timeout, offline mismatch), 2 usage error."""


def _fmt(value: float) -> str:
    """A p-value or e-value as the report writes it: ``-`` where the method defines none (STEP, AdaStop)."""
    return "-" if math.isnan(value) else f"{value:.4g}"


def comparison_line(c: ComparisonStatus) -> str:
    """One comparison in a progress line, e.g. ``progress/nscore n=12 p=0.0312 B_BETTER``."""
    text = f"{c.metric}/{c.method} n={c.n}"
    if not math.isnan(c.pvalue):
        text += f" p={_fmt(c.pvalue)}"
    return f"{text} {DECISIONS.get(c.decision, c.decision)}"


def eta_text(done: int, left: int, elapsed: float) -> str:
    """Elapsed time and, once a trial is done, the time the budget's remaining ``left`` trials
    would take at the pace so far (an upper bound: the session stops when every test decides),
    e.g. ``12 s, at most 40 s left``.

    >>> eta_text(10, 30, 5.0)
    '5 s, at most 15 s left'
    >>> eta_text(0, 30, 2.0)
    '2 s'
    """
    text = f"{elapsed:.0f} s"
    if done > 0 and left > 0:
        text += f", at most {left * elapsed / done:.0f} s left"
    return text


#: Seconds between two sends of one reset confirmation that got no answer (DDS may drop either).
CONFIRM_RESEND_S = 1.0


class DemoMonitor(Node):
    """Follows ``session_status``, prints a progress line whenever a comparison moves, and confirms
    every scene reset the session waits for (the demo's automatic operator)."""

    def __init__(self, status_qos: QoSProfile, *, signer: Signer | None = None, out: object = sys.stdout) -> None:
        super().__init__("evalstop_demo")
        self.out = out
        self._signer = signer  # the automatic operator's key: the manager accepts signed controls only
        self.status: SessionStatus | None = None
        self._printed: object = None
        self._started = time.monotonic()
        #: The manager's last word on its session in ``/diagnostics`` (why it paused, what the runner said).
        self.diagnosis = ""
        self._waiting: tuple[int, float] = (0, math.inf)  # (trial awaiting a human, since when)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, qos.DIAGNOSTICS_QOS)
        self._control = self.create_client(SessionControl, "session_control")
        self._confirming: tuple[int, float] = (0, -math.inf)  # (trial, when its confirmation was last sent)
        #: Reset confirmations the manager accepted.
        self.resets_confirmed = 0
        self.create_subscription(SessionStatus, "session_status", self._on_status, status_qos)
        self.get_logger().info(f"following session_status ({qos.describe(status_qos)})")

    def confirm_resets(self) -> None:
        """Confirm the pending trial's scene reset when the session waits for it; re-send until answered."""
        status = self.status
        if status is None or status.state != SessionStatus.STATE_RUNNING or \
                not status.state_name.endswith(":awaiting_reset") or not self._control.service_is_ready():
            return
        trial, sent = self._confirming
        now = time.monotonic()
        if trial == status.pending_trial_id and now - sent < CONFIRM_RESEND_S:
            return
        self._confirming = (status.pending_trial_id, now)
        request = SessionControl.Request(command=SessionControl.Request.COMMAND_CONFIRM_RESET,
                                         trial_id=status.pending_trial_id, reason="demo: automatic operator")
        if self._signer is not None:
            self._signer.sign("session_control", status.session_id, request)  # afresh for every send
        self._control.call_async(request).add_done_callback(self._on_confirmed)

    def _on_confirmed(self, future: object) -> None:
        response = future.result()  # type: ignore[attr-defined]
        if response.ok and response.message.endswith("reset confirmed"):
            self.resets_confirmed += 1

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for entry in msg.status:
            if entry.name.endswith(": session"):
                runner = next((kv.value for kv in entry.values if kv.key == "runner"), "ok")
                self.diagnosis = entry.message + ("" if runner in ("", "ok") else f" (runner: {runner})")

    def waits_for_a_human(self, after: float = 5.0) -> str:
        """A line saying that the pending trial has waited over ``after`` s for an operator's
        score (said once per trial), or ""."""
        status = self.status
        if status is None or not status.state_name.endswith(":awaiting_score"):
            self._waiting = (0, math.inf)
            return ""
        trial, since = self._waiting
        now = time.monotonic()
        if trial != status.pending_trial_id:
            self._waiting = (status.pending_trial_id, now)
            return ""
        if now - since < after:
            return ""
        self._waiting = (trial, math.inf)
        return (f"trial {trial} waits for an operator's score (the config's `scoring` is not `auto`): score it "
                "with teleop_scorer, or use a config with `scoring: auto` for an unattended demo")

    def _on_status(self, msg: SessionStatus) -> None:
        self.status = msg
        key = (msg.state, tuple((c.n, c.decision) for c in msg.comparisons))
        if key == self._printed:  # print when a comparison got a pair or a decision
            return
        self._printed = key
        pairs: dict[tuple[str, str], list[str]] = {}
        for c in msg.comparisons:
            pairs.setdefault((c.policy_a, c.policy_b), []).append(comparison_line(c))
        text = "  ".join(f"{a} vs {b}: {', '.join(lines)}" for (a, b), lines in pairs.items())
        print(f"trial {msg.trials_done:3d} | {eta_text(msg.trials_done, msg.budget_left, time.monotonic() - self._started)}"
              f" | {msg.state_name:<22} | {text}", file=self.out, flush=True)

    @property
    def final(self) -> bool:
        """The session reached FINISHED or ABORTED."""
        return self.status is not None and self.status.state in FINAL_STATES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options."""
    parser.add_argument("--config", default="", help="session config (default: the installed config/eval.yaml)")
    parser.add_argument("--session-id", default="", help="session id (default: demo-<UTC time>)")
    parser.add_argument("--journal-dir", default="", help="journal and log directory (default: a new temp dir)")
    parser.add_argument("--policies", default="policy_a,policy_b",
                        help="policy ids served by sim_robot (default %(default)s)")
    parser.add_argument("--rates", default="0.5,0.8", help="their success rates (default %(default)s)")
    parser.add_argument("--progress-means", default="0.4,0.4",
                        help="mean progress of their failed rollouts (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="sim_robot seed (default %(default)s)")
    parser.add_argument("--duration", type=float, default=0.05, help="rollout duration in s (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="give up after this many seconds (default %(default)s)")
    parser.add_argument("--robot", choices=("sim_robot", "sim_policy", "physics"), default="sim_robot",
                        help="sim_robot (default), or sim_policy: two scripted policy servers (openpi protocol) "
                             "run by policy_runner on its simulated arm (config/sim_policy.yaml), or physics: "
                             "scripted grasping policies on a simulated Franka Panda in robosuite/MuJoCo "
                             "(config/physics.yaml: grasp_vla vs sloppy_vla, or a config's own <kind>_<name> "
                             "policies of the kinds grasp, sloppy, exact, high; needs tools/install_physics.sh), "
                             "episode videos in the report")
    parser.add_argument("--server-command", default="",
                        help="sim_policy: command that serves a scripted policy (given --policy and --port), e.g. "
                             "openpi's own server: 'build/openpi-venv/bin/python tools/openpi_policy_server.py'; "
                             "default: the project's server (policy_server)")
    parser.add_argument("--rate", type=float, default=60.0,
                        help="sim_policy: control rate in Hz (default %(default)s; physics: 15, simulated time)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="steps per rollout (default: 30 for sim_policy, 75 (5 s simulated) for physics)")


def _csv(text: str, kind: type) -> list:
    return [kind(item) for item in text.split(",") if item.strip()]


def _executable(name: str) -> str:
    return str(pathlib.Path(get_package_prefix("evalstop")) / "lib" / "evalstop" / name)


def _ros_args(params: dict[str, object]) -> list[str]:
    args = ["--ros-args"]
    for key, value in params.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):
            text = "[" + ",".join(str(v) for v in value) + "]"
        else:
            text = str(value)
        args += ["-p", f"{key}:={text}"]
    return args


def _stop(proc: subprocess.Popen[bytes], timeout: float = 10.0, *, grace: float = 0.0) -> int:
    """Wait ``grace`` s for ``proc`` to exit by itself, then Ctrl-C it (SIGKILL after ``timeout``)."""
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


#: ``--robot physics``: policy_runner's robosuite parameters (Lift, the Panda at 15 Hz of simulated time).
PHYSICS_RUNNER = {"robot": "robosuite", "robosuite.task": "Lift", "robosuite.spread": 0.1, "rate": 15.0,
                  "robosuite.record_resolution": [256, 256]}


def _physics_policies(config: SessionConfig) -> list[str]:
    """The policies ``--robot physics`` serves: the config's when each names a physics kind
    (``<kind>_<name>``, e.g. ``exact_vla``, ``high_vla``), else ``grasp_vla`` and ``sloppy_vla``."""
    if config.policies and all(p.split("_")[0] in PHYSICS_KINDS for p in config.policies):
        return list(config.policies)
    return ["grasp_vla", "sloppy_vla"]


def _policy_robot(args: argparse.Namespace, served: Sequence[str], workdir: pathlib.Path,
                  key_file: pathlib.Path) -> dict[str, list[str]]:
    """Commands of ``--robot sim_policy`` / ``physics``: a scripted policy server per served policy
    (its kind the name's first part), and policy_runner."""
    physics = args.robot == "physics"
    ports = {}
    for policy in served:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports[policy] = sock.getsockname()[1]
    servers = workdir / "servers.yaml"
    servers.write_text("policy_servers:\n" + "".join(
        f"  {policy}: {{host: 127.0.0.1, port: {port}}}\n" for policy, port in ports.items()))
    server = shlex.split(args.server_command) if args.server_command else [_executable("policy_server")]
    commands = {f"server_{p}": [*server, "--policy", p.split("_")[0], "--port", str(port)]
                for p, port in ports.items()}
    robot: dict[str, object] = (
        {**PHYSICS_RUNNER, "max_steps": args.max_steps or 75, "robosuite.seed": args.seed,
         "record_dir": str(workdir / "videos")} if physics else
        {"robot": "sim", "rate": args.rate, "max_steps": args.max_steps or 30, "sim.seed": args.seed})
    commands["policy_runner"] = [_executable("policy_runner"), *_ros_args(
        {"servers_file": str(servers), **robot, "key_file": str(key_file)})]
    return commands


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status (module docstring)."""
    preset = {"sim_policy": "sim_policy.yaml", "physics": "physics.yaml"}.get(args.robot, "eval.yaml")
    try:
        config_path = args.config or str(pathlib.Path(get_package_share_directory("evalstop")) / "config" / preset)
    except PackageNotFoundError:
        print("evalstop_demo: the evalstop package is not installed (run inside tools/ros/env.sh)", file=sys.stderr)
        return EXIT_USAGE
    policies, rates = _csv(args.policies, str), _csv(args.rates, float)
    means = _csv(args.progress_means, float)
    if not (len(policies) == len(rates) == len(means)):
        print(f"evalstop_demo: --policies, --rates and --progress-means need as many values; found "
              f"{len(policies)}, {len(rates)}, {len(means)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(config_path, confirm_reset=args.robot != "sim_robot" or None)
    except ConfigError as err:  # said here, before a node starts, not in the manager's log
        print(f"evalstop_demo: {err}", file=sys.stderr)
        return EXIT_USAGE
    served = {"sim_policy": ["good_vla", "bad_vla"], "physics": _physics_policies(config)}.get(args.robot, policies)
    problem = _unrunnable(config, config_path, args.robot, served)
    if problem:
        print(f"evalstop_demo: {problem}", file=sys.stderr)
        return EXIT_USAGE
    session_id = args.session_id or f"demo-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}"
    workdir = pathlib.Path(args.journal_dir or tempfile.mkdtemp(prefix="evalstop-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))  # not the default 0: other users' nodes
    env.setdefault("ROS_LOG_DIR", str(workdir / "roslog"))
    env.setdefault("RCUTILS_CONSOLE_OUTPUT_FORMAT", "[{severity}] [{name}]: {message}")
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")})
    robot_line = {"sim_policy": "policy_runner (sim arm) with policy servers good_vla, bad_vla",
                  "physics": "policy_runner (robosuite Lift, simulated Franka Panda) with policy servers "
                             + ", ".join(served)}.get(args.robot, "sim_robot: " + ", ".join(
                      f"{p} success rate {r:g}" for p, r in zip(policies, rates)))
    print(f"evalstop demo: session {session_id}, config {config_path}\n"
          f"  {robot_line}\n"
          f"  ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}, discovery {env['ROS_AUTOMATIC_DISCOVERY_RANGE']}; "
          f"journal and node logs in {workdir}", flush=True)

    # throw-away operator keys (docs/integrity.md): the manager accepts only signed scores and controls
    keys = new_keys(["operator", "auto:policy_runner", "auto:demo"])
    manager_keys = write_keys(workdir / "operators.keys", keys)
    runner_key = write_keys(workdir / "policy_runner.key", {"auto:policy_runner": keys["auto:policy_runner"]})
    write_keys(workdir / "operator.key", {"operator": keys["operator"]})
    print(f"  authentication: throw-away operator keys in {manager_keys} (teleop_scorer: "
          f"-p key_file:={workdir / 'operator.key'})", flush=True)
    if config.scoring != "auto":
        print(f"  scoring: {config.scoring} ({config_path}): every trial waits for a human's score "
              f"(teleop_scorer -p key_file:={workdir / 'operator.key'}); nothing scores it automatically", flush=True)
    sim_params = {"policies": policies, "success_rates": rates, "progress_means": means, "seed": args.seed,
                  "duration": args.duration, "auto_score": True}
    manager_params = {"config_file": config_path, "session_id": session_id, "journal_dir": str(workdir),
                      "exit_on_finish": True, "journal_fsync": False, "operator_keys_file": str(manager_keys),
                      # as `ros2 launch evalstop eval.launch.py robot:=sim_policy`: the (automatic) operator
                      # confirms each scene reset before the robot starts
                      "confirm_reset": args.robot != "sim_robot"}
    robot = (_policy_robot(args, served, workdir, runner_key) if args.robot != "sim_robot"
             else {"sim_robot": [_executable("sim_robot"), *_ros_args(sim_params)]})
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: (workdir / f"{name}.log").open("wb") for name in (*robot, "evaluation_manager")}
    status = EXIT_FAILURE
    started = time.monotonic()
    try:
        with ros_context([]):
            monitor = DemoMonitor(qos.STATUS_QOS, signer=Signer("auto:demo", keys["auto:demo"]))
            procs["evaluation_manager"] = subprocess.Popen(
                [_executable("evaluation_manager"), *_ros_args(manager_params)], env=env,
                stdout=logs["evaluation_manager"], stderr=subprocess.STDOUT)
            # The robot starts once the monitor follows the manager (its first status came): a
            # simulated session can end within a second, before a loaded machine's DDS discovery.
            while monitor.status is None and procs["evaluation_manager"].poll() is None:
                rclpy.spin_once(monitor, timeout_sec=0.1)
                if time.monotonic() - started > args.timeout:
                    print(f"evalstop demo: no status from evaluation_manager within {args.timeout:g} s; see "
                          f"{workdir}", file=sys.stderr)
                    return EXIT_FAILURE
            for name, command in robot.items():
                procs[name] = subprocess.Popen(command, env=env, stdout=logs[name], stderr=subprocess.STDOUT)
            while not monitor.final:
                rclpy.spin_once(monitor, timeout_sec=0.1)
                monitor.confirm_resets()
                waiting = monitor.waits_for_a_human()
                if waiting:
                    print(f"evalstop demo: {waiting}", file=sys.stderr, flush=True)
                dead = [n for n, p in procs.items() if p.poll() is not None]
                if dead and not monitor.final:
                    rclpy.spin_once(monitor, timeout_sec=0.5)  # a last status may still be in flight
                    if not monitor.final:
                        for name in dead:
                            print(f"evalstop demo: {name} exited early (exit code {procs[name].returncode}): "
                                  f"{_last_error(workdir / f'{name}.log')}", file=sys.stderr)
                        print(f"evalstop demo: node logs in {workdir}", file=sys.stderr)
                        return EXIT_FAILURE
                if monitor.status is not None and monitor.status.state == SessionStatus.STATE_PAUSED:
                    end = time.monotonic() + 3.0  # the manager's diagnostics (every second) say why
                    while not monitor.diagnosis.startswith("paused") and time.monotonic() < end:
                        rclpy.spin_once(monitor, timeout_sec=0.1)
                    print(f"evalstop demo: the session {monitor.diagnosis or 'paused'}; the demo has no operator "
                          f"to resume it (node logs in {workdir})", file=sys.stderr)
                    return EXIT_FAILURE
                if time.monotonic() - started > args.timeout:
                    done = 0 if monitor.status is None else monitor.status.trials_done
                    print(f"evalstop demo: no decision within {args.timeout:g} s (--timeout) after {done} scored "
                          f"trials; the session was stopped unfinished (its journal and node logs: {workdir})",
                          file=sys.stderr)
                    return EXIT_FAILURE
            final = monitor.status
            if monitor.resets_confirmed:
                print(f"evalstop demo: the automatic operator confirmed {monitor.resets_confirmed} scene resets",
                      flush=True)
            monitor.destroy_node()
        assert final is not None
        # the manager exits by itself (exit_on_finish) once its last messages are acknowledged
        codes = {"evaluation_manager": _stop(procs["evaluation_manager"], grace=15.0)}
        codes.update({name: _stop(procs[name]) for name in robot})
        journal = workdir / f"{session_id}.db"
        status = _report(final, config_path, journal, codes, time.monotonic() - started,
                         confirm_reset=bool(manager_params["confirm_reset"]))
        if args.robot == "physics" and not _video_report(journal, workdir / "report", keys):
            status = EXIT_FAILURE
        print(f"\njournal: {journal}\nreport:  evalstop report {shlex.quote(str(journal))} -o "
              f"{shlex.quote(str(workdir / 'report'))}    (then open {workdir / 'report' / 'index.html'})", flush=True)
    except (KeyboardInterrupt, ExternalShutdownException):
        print("evalstop demo: interrupted", file=sys.stderr)
    finally:
        for proc in procs.values():
            _stop(proc)
        for log in logs.values():
            log.close()
    return status


def _unrunnable(config: SessionConfig, path: str, robot: str, served: Sequence[str]) -> str:
    """Why the demo's robot cannot run the session of ``config`` (policies it does not serve), or ""."""
    missing = [p for p in config.policies if p not in served]
    if not missing:
        return ""
    fix = (f"; run e.g. evalstop_demo --config {path} --policies {','.join(config.policies)} --rates "
           f"{','.join(['0.5'] * len(config.policies))} --progress-means {','.join(['0.4'] * len(config.policies))}"
           if robot == "sim_robot" else "")
    return (f"{path} compares {', '.join(config.policies)}, but {robot} serves only {', '.join(served)} "
            f"(not {', '.join(missing)}){fix}")


def _last_error(log: pathlib.Path, lines: int = 3) -> str:
    """The last error lines of a node's log (its last lines if none says ERROR or Error)."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {log})"
    errors = [line for line in text if "ERROR" in line or "Error" in line]
    return " | ".join((errors or text)[-lines:]).strip() or "(its log is empty)"


def _video_report(journal: pathlib.Path, out: pathlib.Path, keys: dict[str, bytes]) -> bool:
    """Audit the journal (signed scores checked) and write the HTML report with the episode videos."""
    from ..audit import audit
    from ..report import write_report

    report = audit(journal, operator_keys=keys)
    files = write_report(report, out)
    print(f"audit of the journal: {'VERIFIED' if report.verified else 'FAILED'}; report with "
          f"{len(files.videos)} episode videos: {files.page}", flush=True)
    return bool(report.verified) and bool(files.videos)


def _report(final: SessionStatus, config_path: str, journal: pathlib.Path, codes: dict[str, int],
            seconds: float, *, confirm_reset: bool = False) -> int:
    """Print the final decisions and check them against the offline re-analysis."""
    print(f"\nsession {final.session_id} {final.state_name} after {final.trials_done} scored trials "
          f"({seconds:.1f} s); node exit codes {codes}")
    print(f"{'comparison':<34} {'metric':<9} {'method':<7} {'alpha':>7} {'pairs':>5} {'decision':<17} "
          f"{'anytime p':>9} {'e-value':>9} {'mean a':>7} {'mean b':>7}")
    # the tests ("" pooled / AdaStop, or a task id), then the multi-task claim rows (task "*")
    tests = [c for c in final.comparisons if c.task != "*"]
    claims = [c for c in final.comparisons if c.task == "*"]
    for c in [*tests, *claims]:
        pair = c.policy_a + " vs " + c.policy_b + (" (claim)" if c.task == "*" else f" @{c.task}" if c.task else "")
        print(f"{pair:<34} {c.metric:<9} {c.method:<7} {c.alpha:>7.4g} {c.n:>5} "
              f"{DECISIONS[c.decision]:<17} {_fmt(c.pvalue):>9} {_fmt(c.evalue):>9} {c.mean_a:>7.3f} {c.mean_b:>7.3f}")
    if final.letters:
        print("compact letter display: " + ", ".join(f"{p}={l}" for p, l in zip(final.letter_policies, final.letters)))
    config = load_config(config_path, confirm_reset=confirm_reset or None)  # the manager's configuration
    offline = offline_decisions(config, journal)
    mismatches = [
        f"{o.policy_a} vs {o.policy_b}{' @' + o.task if o.task else ''} {o.metric}: live {DECISIONS[c.decision]} at "
        f"{c.stopping_trial}, offline {o.result.decision.name} at {o.result.stopping_trial or 0}"
        for o, c in zip(offline, tests)
        if (int(o.result.decision), o.result.stopping_trial or 0, o.task) != (c.decision, c.stopping_trial, c.task)
    ]
    offline_claimed = offline_claims(config, journal)
    mismatches += [
        f"{o.policy_a} vs {o.policy_b} {o.metric} claim: live {DECISIONS[c.decision]}, offline "
        f"{'established' if o.result.established else 'not established'}"
        for o, c in zip(offline_claimed, claims)
        if o.result.established != (c.decision in (ComparisonStatus.DECISION_A_BETTER,
                                                   ComparisonStatus.DECISION_B_BETTER))
    ]
    if len(offline) != len(tests) or len(offline_claimed) != len(claims) or mismatches:
        print("offline re-analysis DISAGREES: " + "; ".join(mismatches), file=sys.stderr)
        return EXIT_FAILURE
    print(f"offline re-analysis of the journal ({journal}) agrees with every live decision.")
    failed = {n: c for n, c in codes.items() if c != 0}
    return EXIT_FAILURE if failed or final.state != SessionStatus.STATE_FINISHED else EXIT_OK


def main(args: Sequence[str] | None = None) -> int:
    """Parse the command line (ROS arguments removed) and run the demo."""
    parser = argparse.ArgumentParser(prog="evalstop_demo", description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    try:
        # remove_ros_args keeps argv[0], the program name
        options = parser.parse_args(remove_ros_args(["evalstop_demo", *(sys.argv[1:] if args is None else args)])[1:])
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    return run(options)
