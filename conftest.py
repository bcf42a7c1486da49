"""pytest set-up of the whole tree: the doctests under evalstop_ros (kept out of the installed
package) and the markers of the test tiers (``ros``, ``netns``; docs/testing.md).

``evalstop_ros/qos.py``, ``evalstop_ros/nodes/`` and ``evalstop_ros/audit/recorder.py`` import rclpy and the generated ``evalstop`` interfaces, which load
only inside the ROS environment (``tools/ros/env.sh``, as ``make test`` runs pytest). In a
plain ``pytest`` run without it, their doctests are left out instead of failing to import;
``make test`` sets ``EVALSTOP_ROS_REQUIRED=1`` so that a broken ROS set-up fails loudly.
"""

import os
import pathlib

import pytest

try:
    import rclpy  # noqa: F401
    from evalstop.msg import SessionStatus  # noqa: F401
except ImportError:
    if os.environ.get("EVALSTOP_ROS_REQUIRED"):
        raise
    collect_ignore = ["evalstop_ros/qos.py", "evalstop_ros/nodes", "evalstop_ros/audit/recorder.py"]


# -- tiers: markers from where a test lives and what it needs (docs/testing.md) ----------------------
#: doctests of modules that import rclpy (left out above without the ROS environment)
_ROS_DOCTESTS = ("evalstop_ros/qos.py", "evalstop_ros/nodes/", "evalstop_ros/audit/recorder.py")
#: every test here runs node executables or ``ros2 launch``
_ROS_DIRS = ("test/nodes/", "test/launch/")
#: per-test timeout (pytest-timeout, a hang guard, not a speed goal) where the default of
#: pyproject.toml (300 s) is too short on a loaded machine: the ROS and network-namespace tests
#: wait for node processes with deadlines of their own of up to 400 s (test_demo); building
#: the separate openpi venv on first use (tools/openpi_venv.sh, up to 900 s) and the real-time
#: robot:=sim_policy launch (minutes of 15 Hz rollouts) take longer still.
_ROS_TIMEOUT = 900
_LONG_TIMEOUTS = {"test/runner/test_openpi_compat.py": 1500, "test/nodes/test_robosuite_session.py": 1500,
                  "test/launch/test_ros2_launch.py::test_eval_launch_sim_policy_finishes_within_ten_minutes": 1800}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``ros`` every test that needs the ROS environment (its directory, a doctest of a
    module importing rclpy, or the ``ros_env`` fixture, which every node-starting fixture uses)
    and ``netns`` every test that uses the ``netns`` fixture; give the long ones a longer
    timeout unless they set their own."""
    root = pathlib.Path(str(config.rootpath))
    for item in items:
        path = pathlib.Path(str(item.path)).relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        fixtures = getattr(item, "fixturenames", ())
        if path.startswith(_ROS_DIRS) or path.startswith(_ROS_DOCTESTS) or "ros_env" in fixtures:
            item.add_marker(pytest.mark.ros)
        if "netns" in fixtures:
            item.add_marker(pytest.mark.netns)
        if item.get_closest_marker("timeout") is None:
            node = f"{path}::{item.name.split('[')[0]}"
            seconds = _LONG_TIMEOUTS.get(node) or _LONG_TIMEOUTS.get(path)
            if seconds is None and any(item.get_closest_marker(m) for m in ("ros", "netns", "slow")):
                seconds = _ROS_TIMEOUT
            if seconds is not None:
                item.add_marker(pytest.mark.timeout(seconds))
