"""``evalstop_ros/ros_context.py``: the one ``rclpy.init`` ... ``try_shutdown`` of every node's ``main``.

A Ctrl-C (``SIGINT``) that arrives while rclpy's C++ code converts a message (for instance an
action client taking feedback) reaches Python as a ``TypeError`` caused by ``KeyboardInterrupt``,
before rclpy's signal handler thread has shut the context down: a node stopped by Ctrl-C then
died with a traceback and exit status 1.  The block ends quietly for that, and only for that.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from evalstop_ros.ros_context import ros_context

def convert():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as err:  # what pybind11 does with an exception of a conversion
        raise TypeError("Unable to convert function return value to a Python type!") from err

with ros_context([]):
    if sys.argv[1] == "interrupted":
        convert()
    else:
        raise TypeError("a real bug")
print("ended quietly")
"""


def _run(ros_env, tmp_path, case: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "context.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), case], env=ros_env, capture_output=True, text=True,
                          timeout=60)


def test_an_error_caused_by_ctrl_c_inside_rclpy_ends_the_context_quietly(ros_env, tmp_path):
    done = _run(ros_env, tmp_path, "interrupted")
    assert (done.returncode, done.stdout.strip()) == (0, "ended quietly"), done.stderr


def test_any_other_error_while_ros_is_up_propagates(ros_env, tmp_path):
    done = _run(ros_env, tmp_path, "bug")
    assert done.returncode == 1
    assert "TypeError: a real bug" in done.stderr and "ended quietly" not in done.stdout
