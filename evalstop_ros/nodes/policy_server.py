"""``policy_server``: a scripted policy served over the openpi protocol (not a ROS node).

The executable of ``robot:=sim_policy`` (eval.launch.py) and of the policy demo; the server
itself is :mod:`evalstop_ros.runner.server`. ROS arguments added by ``ros2 launch`` are ignored.
"""

from __future__ import annotations

from ..runner import server

__all__ = ["main"]


def main(args: list[str] | None = None) -> int:
    """Serve until Ctrl-C (``--policy good|bad|..., --port N, --api-key KEY``); exit code 0."""
    return server.main(args)
