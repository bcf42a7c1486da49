"""QuickLogger (nodes/quick_log.py): rclpy's node logger output, without its caller search."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import rclpy
from evalstop_ros.nodes.quick_log import QuickNode

def report(node):
    node.get_logger().info("plain")  # line 6

rclpy.init()
node = QuickNode("quick")
report(node)
node.get_logger().warning("careful")  # line 11
for _ in range(3):
    node.get_logger().info("only once", once=True)  # rclpy's own path, filter keyed by caller
node.get_logger().debug("hidden")  # below the default level
node.get_logger().set_level(rclpy.logging.LoggingSeverity.DEBUG)
node.get_logger().debug("shown")
node.destroy_node()
rclpy.shutdown()
"""


def test_quick_logger_prints_what_rclpy_prints_with_the_callers_location(ros_env, tmp_path):
    script = tmp_path / "quick.py"
    script.write_text(SCRIPT)
    env = {**ros_env, "RCUTILS_CONSOLE_OUTPUT_FORMAT": "[{severity}] [{name}] {function_name} {file_name}:{line_number}: "
                                                        "{message}"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)
    lines = [line for line in done.stderr.splitlines() if "[quick]" in line]
    assert lines == [
        f"[INFO] [quick] report {script}:6: plain",
        f"[WARN] [quick] <module> {script}:11: careful",
        f"[INFO] [quick] <module> {script}:13: only once",
        f"[DEBUG] [quick] <module> {script}:16: shown",
    ]
