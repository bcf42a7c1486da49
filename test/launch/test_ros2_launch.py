"""Every launch file run for real with ``ros2 launch``, and the nodes driven with the ``ros2`` CLI (issue 21).

``make test`` runs this under ROS 2 Jazzy (launch 3.4.3, ros2cli 0.32: the unmodified upstream wheels of
``shared/ros2-jazzy``, installed into ``build/<distro>/tools`` by ``make ros-tools`` / ``make ros-jazzy``)
and again under Kilted, so a launch file that needs a newer ``launch`` fails here. What a lab does:

* ``eval.launch.py robot:=sim`` and ``robot:=sim_policy``: a session to ``finished`` whose journal
  ``evalstop audit`` verifies; meanwhile ``ros2 param describe``, ``ros2 topic echo``, ``ros2 service
  call`` and ``ros2 action send_goal`` against the running nodes;
* ``robot:=droid`` and ``robot:=widowx``: up to the first trial waiting for the operator's scene reset,
  the robot's runner serving its action (DROID's ``RobotEnv`` and Bridge's ``WidowXClient`` are fakes:
  the hardware cannot exist here);
* ``station.launch.py`` against a hub (SQLite), ``demo.launch.py`` to its exit, and the
  ``launch_testing`` test ``test_demo_launch.py`` under ``launch_test`` (as ``colcon test`` runs it).

Without the tools (a plain ``pytest`` outside ``make test``) the tests are skipped, unless
``EVALSTOP_LAUNCH_REQUIRED`` is set (``make test``): then that is a failure.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import socket
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from nodes_support import NodeProcess, operator_keys

from evalstop_ros.session.auth import new_keys, write_keys

REPO = pathlib.Path(__file__).resolve().parents[2]
#: The launch_testing test (``add_launch_test`` in CMakeLists.txt), run with ``launch_test``.
LAUNCH_TEST = REPO / "test" / "launch" / "test_demo_launch.py"  # (conftest.py: not collected by pytest)


@pytest.fixture(scope="module")
def ros2(ros_env: dict[str, str]) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``ros2(*args, timeout=90)``: run the ``ros2`` CLI in the test's ROS environment."""
    found = shutil.which("ros2", path=ros_env.get("PATH"))
    if found is None:
        why = "no `ros2` on PATH: `make ros-tools` (Kilted) or `make ros-jazzy` installs launch and ros2cli"
        if os.environ.get("EVALSTOP_LAUNCH_REQUIRED"):
            pytest.fail(why)
        pytest.skip(why)

    def run(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([found, *args], env=ros_env, capture_output=True, text=True, timeout=timeout,
                              check=False)

    yield run
    run("daemon", "stop")  # the daemon some verbs start on this test process's domain


@pytest.fixture
def launch(ros2: Any, ros_env: dict[str, str], tmp_path: pathlib.Path) -> Iterator[Callable[..., NodeProcess]]:
    """Factory: ``launch("eval.launch.py", robot="sim", ...)`` -> the ``ros2 launch`` process (Ctrl-C'd at the end)."""
    started: list[NodeProcess] = []

    def start(file: str, *, env: dict[str, str] | None = None, **arguments: str) -> NodeProcess:
        cmd = [shutil.which("ros2", path=ros_env["PATH"]) or "ros2", "launch", "evalstop", file,
               *(f"{k}:={v}" for k, v in arguments.items())]
        process = NodeProcess(f"ros2 launch {file}", cmd, {**ros_env, **(env or {})},
                              tmp_path / f"launch-{len(started) + 1}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(timeout=60)


def _audit(journal: pathlib.Path) -> str:
    """``evalstop audit JOURNAL``: must exit 0 and say VERIFIED; returns its output."""
    evalstop = shutil.which("evalstop", path=os.environ["PATH"])
    assert evalstop, "the evalstop CLI is not on PATH"
    done = subprocess.run([evalstop, "audit", str(journal)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "audit: VERIFIED" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _short_session(tmp_path: pathlib.Path, n_max: int = 8) -> str:
    """``config_file:=`` for ``robot:=sim``: the installed preset (config/eval.yaml) with a budget of
    ``n_max`` rounds, so that the session ends within ``2 n_max`` trials (sim_robot's 0.5 vs 0.8 took
    about 45 pairs to STEP's decision, what ``make demo`` shows; these tests check the launch, the
    nodes it starts and their ends, not the statistics)."""
    config = yaml.safe_load((REPO / "config" / "eval.yaml").read_text())
    config["n_max"] = n_max
    path = tmp_path / "eval_short.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


#: demo.launch.py's ``success_rates`` here: far apart, so that its session decides in a few pairs
DEMO_RATES = "[0.05, 0.95]"


def _field(text: str, name: str) -> str:
    """The value of a top-level ``name: value`` line in ``ros2 topic echo`` YAML output."""
    match = re.search(rf"^{name}: (.*)$", text, re.MULTILINE)
    assert match, f"no {name!r} in:\n{text}"
    return match.group(1).strip()


def _echo_status(ros2: Any, namespace: str) -> str:
    """One ``session_status`` (latched: transient_local, reliable) as ``ros2 topic echo --once`` prints it."""
    done = ros2("topic", "echo", "--once", "--qos-durability", "transient_local", "--qos-reliability", "reliable",
                f"{namespace}/session_status", "evalstop/msg/SessionStatus")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_eval_launch_sim_runs_a_session_that_audits_and_answers_the_ros2_cli(
        launch: Any, ros2: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    """``ros2 launch evalstop eval.launch.py robot:=sim`` to ``finished``; the CLI; the audit of the journal."""
    journals = tmp_path / "journals"
    process = launch("eval.launch.py", robot="sim", namespace=namespace, session_id="launch-sim",
                     journal_dir=str(journals), exit_on_finish="false", config_file=_short_session(tmp_path))
    process.wait_for(r"session launch-sim finished: \d+ trials scored, 2/2 tests decided", 300.0)

    # exit_on_finish:=false: the manager stays up after the session (a dashboard can still read
    # it): ask it as a user would
    # (without the daemon each of the verb's two throw-away nodes spins the whole --spin-time before it
    # looks; --timeout is how long it then waits for the manager to appear)
    described = ros2("param", "describe", "--no-daemon", "--spin-time", "2", "--timeout", "30",
                     f"{namespace}/evaluation_manager", "goal_response_timeout")
    assert described.returncode == 0, described.stdout + described.stderr
    assert "Type: double" in described.stdout and "Min value: 0.05" in described.stdout, described.stdout
    status = _echo_status(ros2, namespace)
    assert (_field(status, "session_id"), _field(status, "state_name")) == ("launch-sim", "finished")
    assert int(_field(status, "trials_done")) > 0 and _field(status, "pending_trial_id") == "0"
    # a finished session cannot be paused: the service answers why
    called = ros2("service", "call", f"{namespace}/session_control", "evalstop/srv/SessionControl",
                  "{command: 1, reason: from the ros2 CLI}")
    assert called.returncode == 0, called.stdout + called.stderr
    assert re.search(r"ok=False, message=\"cannot pause: session 'launch-sim' is finished\"", called.stdout), \
        called.stdout
    process.wait_for(r"session_control pause refused: cannot pause: session 'launch-sim' is finished", 30.0)
    # the runner the launch started: one rollout by hand
    goal = ros2("action", "send_goal", f"{namespace}/run_trial", "evalstop/action/RunTrial",
                "{session_id: by-hand, trial_id: 1, policy_id: policy_b, task: push_block, "
                "initial_condition: block_left, attempt: 1}")
    assert goal.returncode == 0, goal.stdout + goal.stderr
    assert "Goal finished with status: SUCCEEDED" in goal.stdout and "auto_scored: true" in goal.stdout, goal.stdout

    assert process.stop(timeout=60) == 0, process.tail()
    audit = _audit(journals / "launch-sim.db")
    assert "2 decision(s)" in audit


def _sim_policy_servers(tmp_path: pathlib.Path) -> dict[str, str]:
    """Launch arguments of ``robot:=sim_policy`` on two free ports (the Kilted and the Jazzy suite run
    at once: the default ports 8101/8102 would be taken by the other's launch)."""
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    servers = tmp_path / "sim_policy_servers.yaml"
    servers.write_text(yaml.safe_dump({"policy_servers": {
        "good_vla": {"host": "127.0.0.1", "port": ports[0]}, "bad_vla": {"host": "127.0.0.1", "port": ports[1]}}}))
    return {"good_port": str(ports[0]), "bad_port": str(ports[1]), "servers_file": str(servers)}


def _errors(output: str) -> list[str]:
    """The lines of ``ros2 launch`` output a user would read as a failure (a traceback with the 30
    lines after it, so that a failing assertion shows what was raised)."""
    lines = output.splitlines()
    found: list[str] = []
    for i, line in enumerate(lines):
        if "[ERROR]" in line or "process has died" in line:
            found.append(line)
        elif "Traceback" in line:
            found.append("\n".join(lines[i:i + 30]))
    return found


def test_eval_launch_two_arms_serve_one_session_each_with_its_diagnostics(
        launch: Any, probe: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    """``eval.launch.py robot:=sim arms:=2``: a sim_robot in ``arm_1`` and one in ``arm_2`` run the session's
    trials at once; the launch ends by itself with status 0 once the session is finished (exit_on_finish),
    the manager and every other process clean, and the journal audits VERIFIED. ``/diagnostics``
    has one status per arm (its action as hardware id): running trial k, then idle, its trials run and
    faults, no policy named."""
    from diagnostic_msgs.msg import DiagnosticArray

    from evalstop_ros import qos
    from evalstop_ros.session import read_journal

    journals = tmp_path / "journals"
    arrays = probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
    process = launch("eval.launch.py", robot="sim", arms="2", namespace=namespace, session_id="launch-arms",
                     journal_dir=str(journals))
    probe.spin_until(lambda: process.proc.poll() is not None, 300.0, "the launch's end")
    assert process.wait(60.0) == 0, process.tail()
    assert re.search(r"session launch-arms finished: \d+ trials scored, 2/2 tests decided", process.output)
    assert re.search(r"\[evaluation_manager-1\]: process has finished cleanly", process.output), process.tail()
    assert _errors(process.output) == [], _errors(process.output)
    events = read_journal(journals / "launch-arms.db").events
    arms = {f"arm_{k}/run_trial": f"{namespace}/arm_{k}/run_trial" for k in (1, 2)}
    runs = {name: [e.trial_id for e in events if e.kind == "trial_dispatched" and e.payload["runner"] == name]
            for name in arms}
    assert all(runs.values()), runs
    first, last = (min(e.stamp_ns for e in events if e.kind == "trial_dispatched" and e.payload["runner"] == name)
                   for name in arms), max(e.stamp_ns for e in events if e.kind == "runner_result")
    assert max(first) < last  # the second arm began before the last run ended: both worked at once
    _audit(journals / "launch-arms.db")
    # one status per arm, named by its action in the arm's namespace
    per_arm = {name: [s for a in arrays for s in a.status if s.hardware_id == action] for name, action in arms.items()}
    faults = 0
    for name, seen in per_arm.items():
        assert seen, f"no /diagnostics status of {name}"
        assert any(re.fullmatch(r"running trial \d+", s.message) for s in seen), {s.message for s in seen}
        values = dict((v.key, v.value) for v in seen[-1].values)  # at the end: idle, or its run cancelled at the stop
        assert seen[-1].level == b"\x00" and values["state"] in ("idle", "cancelling"), (
            seen[-1].level, seen[-1].message, values, process.tail())
        assert 0 < int(values["trials_run"]) <= len(runs[name]), (values, runs)
        faults += int(values["faults"])
        text = " ".join([s.name + s.message + " ".join(v.value for v in s.values) for s in seen])
        assert "policy" not in text, text
    # (sim_robot fails no run; a goal DDS lost three times over, on a loaded machine, is a fault of its arm)
    assert faults == sum(e.kind == "runner_result" and not e.payload["ok"] for e in events)


def test_eval_launch_refuses_several_real_arms_before_any_node_starts(launch: Any, namespace: str) -> None:
    """``arms:=2`` of a real robot: one line saying why (each arm needs its own hardware settings), status 1;
    the other refusals (``arms:=0``, ``arms:=two``) are :func:`~evalstop_ros.launch_parts.arm_namespaces`'s doctests."""
    process = launch("eval.launch.py", namespace=namespace, robot="widowx", arms="2")
    assert process.wait(60.0) == 1, process.tail()
    assert ("[ERROR] [launch]: Caught exception in launch (see debug for traceback): `arms:=2` needs a simulated "
            "robot (sim, sim_policy); found robot:=widowx") in process.output, process.tail()
    assert "process started" not in process.output, process.tail()


# One CI run in many showed a traceback here (not reproduced in 65 runs at load 20-30; the assertion now
# prints it; one cause found since: the servers' fixed ports, taken by the other distribution's launch):
# one rerun, docs/testing.md.
@pytest.mark.flaky(reruns=1)
def test_ctrl_c_in_the_terminal_stops_the_launch_without_an_error_line(ros_env: dict[str, str], namespace: str,
                                                                     tmp_path: pathlib.Path) -> None:
    """Ctrl-C in the launch's terminal mid-session (SIGINT to the whole process group: ``ros2 launch``,
    the manager, policy_runner and the two policy servers each get it, then again from launch):
    status 0, every process finished cleanly, no ERROR line (policy_server used to outlive the 5 s
    and be killed with SIGTERM, policy_runner to report the interrupted rollout as a robot fault)."""
    import signal

    cmd = [shutil.which("ros2", path=ros_env["PATH"]) or "ros2", "launch", "evalstop", "eval.launch.py",
           "robot:=sim_policy", "confirm_reset:=false", f"namespace:={namespace}", "session_id:=launch-ctrl-c",
           f"journal_dir:={tmp_path / 'journals'}", *(f"{k}:={v}" for k, v in _sim_policy_servers(tmp_path).items())]
    log_path = tmp_path / "launch.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, env=ros_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300.0
        while "rollout started" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        assert proc.wait(60) == 0, log_path.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = log_path.read_text(errors="replace")
    assert _errors(output) == [], "\n".join(_errors(output))
    assert output.count("process has finished cleanly") == 4, output[-3000:]  # manager, runner, two servers


def test_eval_launch_sim_policy_runs_its_session_to_the_end_and_audits(launch: Any, namespace: str,
                                                                      tmp_path: pathlib.Path) -> None:
    """``robot:=sim_policy``: two scripted policy servers and policy_runner on its simulated arm, whose
    real-time rollouts end when the task is done; the session runs to ``finished`` and its journal
    audits VERIFIED (no operator here, so ``confirm_reset:=false``).

    The session is the preset's (``config_file:=`` a copy of config/sim_policy.yaml) with a budget of
    3 rounds (``n_max`` 3: 6 rollouts, each policy once per initial condition): the preset's own session
    (``n_max`` 100, rollouts of 1-4 s at 15 Hz) is ``make demo-policy``'s; these rollouts show the
    servers, the runner and its rollouts ended by ``task_done`` (docs/testing.md)."""
    journals = tmp_path / "journals"
    config = yaml.safe_load((REPO / "config" / "sim_policy.yaml").read_text())
    config["n_max"] = 3
    config_file = tmp_path / "sim_policy.yaml"
    config_file.write_text(yaml.safe_dump(config))
    process = launch("eval.launch.py", robot="sim_policy", namespace=namespace, session_id="launch-policy",
                     journal_dir=str(journals), confirm_reset="false", config_file=str(config_file),
                     **_sim_policy_servers(tmp_path))
    found = process.wait_for(r"session launch-policy finished: (\d+) trials scored", 300.0)
    assert 0 < int(found.group(1)) <= 6, process.tail()  # within the budget of 3 rounds
    assert "ended by task_done" in process.output
    assert process.stop(timeout=60) == 0, process.tail()
    _audit(journals / "launch-policy.db")


FAKE_ROBOTS = {
    # DROID's RobotEnv (droid.robot_env): what the droid adapter calls
    "droid/__init__.py": "",
    "droid/robot_env.py": """
        import numpy as np

        class RobotEnv:
            def __init__(self, action_space, gripper_action_space):
                print(f"fake RobotEnv({action_space!r}, {gripper_action_space!r})", flush=True)

            def get_observation(self):
                frame = np.zeros((48, 64, 4), np.uint8)
                return {"robot_state": {"joint_positions": [0.0] * 7, "cartesian_position": [0.0] * 6,
                                        "gripper_position": 0.0}, "image": {"<serial>_left": frame}}

            def step(self, action):
                pass

            def reset(self):
                pass
        """,
    # Bridge's WidowXClient (widowx_envs.widowx_env_service)
    "widowx_envs/__init__.py": "",
    "widowx_envs/widowx_env_service.py": """
        import numpy as np

        class WidowXClient:
            def __init__(self, host, port):
                print(f"fake WidowXClient({host!r}, {port})", flush=True)

            def init(self, params):
                pass

            def get_observation(self):
                return {"full_image": np.zeros((256, 256, 3), np.uint8), "state": np.zeros(7)}

            def step_action(self, action):
                pass

            def reset(self):
                pass
        """,
}


@pytest.mark.parametrize("robot", ["droid", "widowx"])
def test_eval_launch_real_robot_waits_for_the_operator(launch: Any, ros2: Any, namespace: str, robot: str,
                                                       tmp_path: pathlib.Path, ros_env: dict[str, str]) -> None:
    """``robot:=droid`` / ``robot:=widowx``: the manager, and policy_runner with the robot's adapter at
    ``/<robot>/run_trial``; the first trial waits for the operator's scene reset (``confirm_reset``)."""
    fakes = tmp_path / "fakes"
    for name, text in FAKE_ROBOTS.items():
        (fakes / name).parent.mkdir(parents=True, exist_ok=True)
        (fakes / name).write_text(textwrap.dedent(text))
    keys, _ = operator_keys(tmp_path, "alice")  # a real robot's session takes signed scores only
    goal_key = write_keys(tmp_path / "runner.key", new_keys(["runner"]))  # ... and seals its runner goals
    process = launch("eval.launch.py", robot=robot, namespace=namespace, session_id=f"launch-{robot}",
                     journal_dir=str(tmp_path / "journals"), operator_keys_file=str(keys), goal_key_file=str(goal_key),
                     env={"PYTHONPATH": f"{fakes}{os.pathsep}{ros_env['PYTHONPATH']}"})
    process.wait_for(rf"serving RunTrial on '/{robot}/run_trial' with the '{robot}' robot: 2 policies", 120.0)
    process.wait_for(rf"session launch-{robot} opened \(running, 0 trials scored\): runner '/{robot}/run_trial'", 60.0)
    process.wait_for(r"trial 1 \(label [A-Z]\) requested", 60.0)
    status = _echo_status(ros2, namespace)
    assert (_field(status, "state_name"), _field(status, "pending_trial_id")) == ("running:awaiting_reset", "1")
    # a one-shot `ros2 action list` sees what DDS discovery has found so far: ask again until a deadline
    deadline = time.monotonic() + 60.0
    while f"/{robot}/run_trial" not in (listed := ros2("action", "list")).stdout.split():
        assert time.monotonic() < deadline, listed.stdout + listed.stderr
    assert "rollout started" not in process.output, "no rollout before the operator confirms the reset"
    assert process.stop(timeout=60) == 0, process.tail()


def test_station_launch_runs_the_hubs_trials_and_exits(launch: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    """``station.launch.py`` against a hub (``evalstop hub serve`` on SQLite): ``trials:=4`` A/B trials
    on sim_robot, journaled and uploaded; the manager exits and ends the launch."""
    from hub_support import HubProcess, station_records

    from evalstop_ros.hub.store import open_store

    db = str(tmp_path / "hub.sqlite")
    store = open_store(db)
    store.add_policy("heron", "sim://success=0.8")
    store.add_policy("walrus", "sim://success=0.3")
    key = store.add_station("lab-a")
    viewer = store.add_station("viewer", "viewer")
    store.close()
    (tmp_path / "lab-a.key").write_text(key)
    hub = HubProcess(db, viewer, tmp_path, ["--tasks", "towel", "--seed", "0"])
    hub.start()
    try:
        process = launch("station.launch.py", hub_url=hub.url, station_id="lab-a",
                         hub_key_file=str(tmp_path / "lab-a.key"), trials="4", namespace=namespace,
                         journal_dir=str(tmp_path / "stations"), sim_duration="0.05")
        assert process.wait(300.0) == 0, process.tail()
    finally:
        hub.stop()
    assert "station_manager exited" in process.output or "process has finished cleanly" in process.output
    records = station_records(tmp_path / "stations" / "hub-lab-a")  # its journal, station.db
    assert records, "the station journaled nothing"
    assert (records[0]["kind"], records[0]["trials"], records[0]["scoring"]) == ("rules", 4, "auto")  # scoring:=auto
    assert sum(r["kind"] == "ack" for r in records) == 4


def test_demo_launch_reaches_a_decision_and_exits(launch: Any, tmp_path: pathlib.Path) -> None:
    """``ros2 launch evalstop demo.launch.py``: ends by itself (the manager's exit_on_finish) with status 0."""
    journals = tmp_path / "journals"
    process = launch("demo.launch.py", session_id="launch-demo", journal_dir=str(journals), success_rates=DEMO_RATES)
    assert process.wait(300.0) == 0, process.tail()
    assert re.search(r"session launch-demo finished: \d+ trials scored, 2/2 tests decided", process.output)
    _audit(journals / "launch-demo.db")


def test_launch_testing_test_of_the_demo_passes(ros2: Any, ros_env: dict[str, str]) -> None:
    """``launch_test test/launch/test_demo_launch.py`` (what ``add_launch_test`` runs under ``colcon test``)."""
    launch_test = shutil.which("launch_test", path=ros_env["PATH"])
    assert launch_test, "launch_test is installed with ros2cli (make ros-tools)"
    done = subprocess.run([launch_test, str(LAUNCH_TEST)], env=ros_env, capture_output=True, text=True,
                          timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    assert re.search(r"Ran 1 test in .*\n\nOK", output) and re.search(r"Ran 2 tests in .*\n\nOK", output), output[-5000:]
