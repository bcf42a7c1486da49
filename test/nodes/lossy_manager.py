"""Test peer: ``evaluation_manager`` whose first answer to each reset confirmation is lost.

Run as ``python lossy_manager.py --ros-args ...`` (the ``start_node`` fixture does so for a
``.py`` path).  The confirmation is applied (journaled, the robot starts) and its response is
then not sent, exactly what a client sees when Fast DDS drops a service response.  Everything
else is the real ``evaluation_manager`` node over real rclpy services.
"""

from __future__ import annotations

import sys
from typing import Any

import rclpy.node
from rclpy.service import Service

from evalstop_ros.nodes import evaluation_manager


class LossyService(Service):  # type: ignore[misc]
    """Drops the first response that confirms a trial's reset (later answers are sent)."""

    dropped: set[str] = set()

    def send_response(self, response: Any, header: Any) -> None:
        message = str(getattr(response, "message", ""))
        if self.srv_name.endswith("session_control") and message.endswith(": reset confirmed") \
                and message not in self.dropped:
            self.dropped.add(message)
            print(f"lossy_manager: response dropped: {message}", flush=True)
            return
        super().send_response(response, header)


if __name__ == "__main__":
    rclpy.node.Service = LossyService  # type: ignore[misc]
    sys.exit(evaluation_manager.main())
