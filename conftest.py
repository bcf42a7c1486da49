"""pytest set-up for the doctests under evalstop_ros (kept out of the installed package).

``evalstop_ros/qos.py``, ``evalstop_ros/nodes/`` and ``evalstop_ros/audit/recorder.py`` import rclpy and the generated ``evalstop`` interfaces, which load
only inside the ROS environment (``tools/ros/env.sh``, as ``make test`` runs pytest). In a
plain ``pytest`` run without it, their doctests are left out instead of failing to import;
``make test`` sets ``EVALSTOP_ROS_REQUIRED=1`` so that a broken ROS set-up fails loudly.
"""

import os

try:
    import rclpy  # noqa: F401
    from evalstop.msg import SessionStatus  # noqa: F401
except ImportError:
    if os.environ.get("EVALSTOP_ROS_REQUIRED"):
        raise
    collect_ignore = ["evalstop_ros/qos.py", "evalstop_ros/nodes", "evalstop_ros/audit/recorder.py"]
