"""ROS 2 nodes of evalstop: thin rclpy layers over :mod:`evalstop_ros.session` and :mod:`evalstop_ros.runner`.

Each node module holds one node class and a ``main(args=None)`` (docs/nodes.md, docs/ros.md).
"""

__all__: list[str] = []
