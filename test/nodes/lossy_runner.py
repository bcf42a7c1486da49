"""Test peer: ``sim_robot`` behind a link that loses the first goal request of every trial.

Run as ``python lossy_runner.py --ros-args ...`` (the ``start_node`` fixture does so for a
``.py`` path).  The goal request is taken from DDS and then ignored, exactly what the manager
sees when Fast DDS drops a goal response: no answer at all.  Everything else is the real
``sim_robot`` node over the real rclpy action server.
"""

from __future__ import annotations

import sys
from typing import Any

from rclpy.action import ActionServer

from evalstop_ros.nodes import sim_robot


class LossyActionServer(ActionServer):  # type: ignore[misc]
    """Ignores the first goal request of each trial (re-sent requests are served)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dropped: set[int] = set()

    async def _execute_goal_request(self, request_header_and_message: Any) -> None:
        _, goal_request = request_header_and_message
        trial_id = goal_request.goal.trial_id
        if trial_id not in self._dropped:
            self._dropped.add(trial_id)
            self._node.get_logger().info(f"trial {trial_id}: goal request dropped")
            return
        await super()._execute_goal_request(request_header_and_message)


if __name__ == "__main__":
    sim_robot.ActionServer = LossyActionServer  # type: ignore[misc]
    sys.exit(sim_robot.main())
