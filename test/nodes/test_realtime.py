"""``thread_priority`` (nodes/realtime.py): every thread of a node's process under SCHED_FIFO, or
one warning and normal scheduling where the scheduler refuses."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from evalstop_ros.nodes.realtime import set_thread_priority

#: Sets the priority with a second thread running, then prints every thread's (policy, priority).
SCRIPT = """
import os, resource, sys, threading
from evalstop_ros.nodes.realtime import set_thread_priority

if sys.argv[2] == "unprivileged":  # no rtprio allowance, and no root to override it
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    if os.getuid() == 0:
        os.setuid(65534)
stop = threading.Event()
threading.Thread(target=stop.wait).start()
print(repr(set_thread_priority(int(sys.argv[1]))))
print(sorted({(os.sched_getscheduler(int(t)), os.sched_getparam(int(t)).sched_priority)
              for t in os.listdir("/proc/self/task")}))
stop.set()
"""


def _threads(pid: int) -> set[tuple[int, int]]:
    """(policy, real-time priority) of every thread of process ``pid`` (``/proc/<pid>/task/*/stat``
    fields 41 and 40)."""
    out = set()
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        fields = task.joinpath("stat").read_text().rsplit(")", 1)[1].split()  # fields 3 ...
        out.add((int(fields[41 - 3]), int(fields[40 - 3])))
    return out


def _run(tmp_path: pathlib.Path, priority: int, mode: str) -> list[str]:
    script = tmp_path / "rt.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(priority), mode], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return done.stdout.splitlines()


def test_every_thread_runs_under_sched_fifo(tmp_path: pathlib.Path) -> None:
    assert _run(tmp_path, 7, "privileged") == ["''", f"[({os.SCHED_FIFO}, 7)]"]
    assert _run(tmp_path, 0, "privileged") == ["''", f"[({os.SCHED_OTHER}, 0)]"]


def test_a_refusal_changes_no_thread_and_says_how_to_allow_it(tmp_path: pathlib.Path) -> None:
    reason, threads = _run(tmp_path, 7, "unprivileged")
    assert "cannot run under SCHED_FIFO priority 7 (Operation not permitted)" in reason
    assert "rtprio" in reason and "thread_priority to 0" in reason
    assert threads == f"[({os.SCHED_OTHER}, 0)]"


def test_the_priority_range_is_checked() -> None:
    for bad in (-1, 100):
        with pytest.raises(ValueError, match=r"`thread_priority` must lie in \[0, 99\]"):
            set_thread_priority(bad)


def test_a_node_with_thread_priority_runs_all_its_threads_under_sched_fifo(
        start_node: Callable[..., Any], probe: Any) -> None:
    """The manager's DDS threads and its executor; a node without the parameter keeps the normal
    scheduler; an out-of-range value is one FATAL line and exit 2."""
    manager = start_node("evaluation_manager", params={"thread_priority": 5})
    robot = start_node("sim_robot")
    manager.wait_for(r"thread_priority 5: all threads run under SCHED_FIFO", 60)
    probe.hear()  # the manager is up and spinning (its idle status arrived)
    threads = _threads(manager.proc.pid)
    assert threads == {(os.SCHED_FIFO, 5)}, threads
    robot.wait_for(r"serving RunTrial on", 60)
    assert _threads(robot.proc.pid) == {(os.SCHED_OTHER, 0)}
    bad = start_node("evaluation_manager", params={"thread_priority": 100})
    assert bad.wait(60) == 2
    bad.wait_for(r"\[FATAL\] .*invalid parameters: `thread_priority` must lie in \[0, 99\]; found 100")
