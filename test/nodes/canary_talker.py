"""Test peer: publishes its first argument on ``canary`` (``std_msgs/String``) twenty times a second.

Run as ``python canary_talker.py TEXT --ros-args ...`` (the ``start_node`` fixture does so for a
``.py`` path).  A process of its own, so that what it publishes to a subscriber in another process
travels through Fast DDS's shared memory: the positive control of a test that reads ``/dev/shm``.
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from std_msgs.msg import String


def main() -> int:
    args = rclpy.utilities.remove_ros_args(sys.argv)
    rclpy.init()
    node = rclpy.create_node("canary_talker")
    publisher = node.create_publisher(String, "canary", 10)
    node.create_timer(0.05, lambda: publisher.publish(String(data=args[1])))
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
