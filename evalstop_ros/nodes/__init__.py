"""ROS 2 nodes of evalstop: thin rclpy layers over :mod:`evalstop_ros.session`.

Each module holds one node class and a ``main(args=None)``; the executables in the ROS
package's ``lib/evalstop/`` call those ``main`` functions.

* :mod:`.evaluation_manager` — runs an :class:`~evalstop_ros.session.EvaluationSession`:
  issues blinded trials, sends ``RunTrial`` goals, records scores, publishes the status.
* :mod:`.sim_robot` — a simulated ``RunTrial`` action server with per-policy success rates.
* :mod:`.teleop_scorer` — the operator's line-based scoring terminal.
* :mod:`.demo` — starts manager + sim_robot as processes and follows the session to its end.

These modules import rclpy and the generated ``evalstop`` interfaces, so they run only in
the ROS environment (``tools/ros/env.sh``); the statistics and session logic do not.
"""

__all__: list[str] = []
