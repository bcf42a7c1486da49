#!/usr/bin/env python3
"""Start-up of every node executable, from process start to "node ready", against a bare rclpy node.

Each executable of ``build/ros/install/lib/evalstop`` runs in a fresh process, ``--repeats`` times,
in turns with a bare rclpy node (``rclpy.init``, one ``Node``, one log line, ``spin``) started the
same way in the same run; the figures are ratios to that baseline, so they compare across loads and
machines.  Ready is the node's first log line once its constructor has run (its interfaces exist);
the CPU time (user + system, from ``/proc/PID/stat``) and the wall time are read at that line.
``--before DIR`` also runs each executable on the package tree under ``DIR`` (e.g. ``git archive``
of main, extracted), in the same turns: before/after side by side.  The load average is printed;
what a node may import at start is a test (``test/nodes/test_node_imports.py``).

Run inside the ROS environment: ``. tools/ros/env.sh .venv build/ros/install &&
ROS_DOMAIN_ID=61 nice -n 10 python bench/node_startup.py --repeats 5``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIB = ROOT / "build" / "ros" / "install" / "lib" / "evalstop"
TICK = os.sysconf("SC_CLK_TCK")

BARE = """import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

try:
    with rclpy.init():
        node = Node("bare_node")
        node.get_logger().info("bare node ready")
        rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
"""


class Start(NamedTuple):
    """One start-up: seconds of wall time and of CPU time (user + system) until the ready line."""

    wall: float
    cpu: float


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time (s) of process ``pid`` so far (``/proc/PID/stat`` fields 14 and 15)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_once(argv: list[str], ready: re.Pattern[str], env: dict[str, str], timeout: float) -> Start:
    """Run ``argv`` until a line of its output matches ``ready``, then stop it (SIGINT, then SIGKILL)."""
    begin = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, text=True, start_new_session=True)
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            deadline = begin + timeout
            while time.perf_counter() < deadline:
                if not selector.select(deadline - time.perf_counter()):
                    continue
                line = proc.stdout.readline()
                if not line:
                    break
                seen.append(line)
                if ready.search(line):
                    wall = time.perf_counter() - begin
                    return Start(wall, _cpu_seconds(proc.pid))
        raise RuntimeError(f"{argv[1]}: no line matching {ready.pattern!r} within {timeout:g} s; "
                           f"exit {proc.poll()}, output:\n{''.join(seen[-20:])}")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def node_commands(work: pathlib.Path) -> dict[str, tuple[list[str], str]]:
    """Each node executable's arguments (the fewest it starts with) and the log line that says it is ready."""
    servers = work / "servers.yaml"
    servers.write_text("policy_servers: {policy_a: {host: 127.0.0.1, port: 9}}\n")
    (work / "hub.key").write_text("bench-key\n")
    journal = ["-p", f"journal_dir:={work / 'journals'}"]
    return {
        "evaluation_manager": (["--ros-args", *journal], r"idle: waiting for a start_session request"),
        "station_manager": (["--ros-args", *journal, "-p", "hub_url:=http://127.0.0.1:9", "-p", "station_id:=bench",
                             "-p", f"hub_key_file:={work / 'hub.key'}"], r"hub mode: station"),
        "sim_robot": ([], r"serving RunTrial on"),
        "policy_runner": (["--ros-args", "-p", f"servers_file:={servers}"], r"serving RunTrial on"),
        "teleop_scorer": ([], r"evalstop operator terminal"),
        "policy_server": (["--port", "0"], r"serving scripted policy"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="starts of each executable (default %(default)s)")
    parser.add_argument("--before", type=pathlib.Path, help="a package tree to compare with (its evalstop_ros/)")
    parser.add_argument("--nodes", nargs="*", help="only these executables")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a ready line")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RCUTILS_CONSOLE_OUTPUT_FORMAT": "{message}",
           "ROS_AUTOMATIC_DISCOVERY_RANGE": os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")}
    trees = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    envs = {name: {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))}
            for name, tree in trees.items()}
    with tempfile.TemporaryDirectory(prefix="node_startup_") as tmp:
        work = pathlib.Path(tmp)
        bare_script = work / "bare_node.py"
        bare_script.write_text(BARE)
        commands = node_commands(work)
        chosen = args.nodes or list(commands)
        runs: dict[tuple[str, str], list[Start]] = {}
        load_before = os.getloadavg()
        for turn in range(args.repeats):
            print(f"turn {turn + 1}/{args.repeats}, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            runs.setdefault(("bare rclpy node", ""), []).append(
                start_once([sys.executable, str(bare_script)], re.compile("bare node ready"), env, args.timeout))
            for node in chosen:
                extra, ready = commands[node]
                for tree in trees:
                    runs.setdefault((node, tree), []).append(
                        start_once([sys.executable, str(LIB / node), *extra], re.compile(ready), envs[tree],
                                   args.timeout))
        load_after = os.getloadavg()
    bare = runs[("bare rclpy node", "")]
    bare_cpu, bare_wall = statistics.median(s.cpu for s in bare), statistics.median(s.wall for s in bare)
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores); "
          f"medians of {args.repeats} starts; bare rclpy node {bare_cpu:.2f} CPU-s, {bare_wall:.2f} s wall")
    print(f"{'executable':<20} {'tree':<7} {'CPU s':>6} {'wall s':>7} {'CPU x bare':>11} {'wall x bare':>12}")
    for (node, tree), starts in runs.items():
        cpu, wall = statistics.median(s.cpu for s in starts), statistics.median(s.wall for s in starts)
        print(f"{node:<20} {tree:<7} {cpu:6.2f} {wall:7.2f} {cpu / bare_cpu:11.2f} {wall / bare_wall:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
