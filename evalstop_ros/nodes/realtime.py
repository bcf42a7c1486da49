"""Real-time scheduling of a node's threads: the ``thread_priority`` parameter of every evalstop node.

``SCHED_FIFO`` at priority N, given the permission; docs/ros.md and docs/nodes.md.
"""

from __future__ import annotations

import os

from rclpy.node import Node

from ._common import declare

__all__ = ["declare_thread_priority", "schedule_all_threads", "set_thread_priority"]

#: Highest ``SCHED_FIFO`` priority on Linux.
MAX_PRIORITY = 99


def set_thread_priority(priority: int) -> str:
    """Put every thread of this process under ``SCHED_FIFO`` with ``priority`` (0: leave them).

    :returns: ``""`` on success, else why the scheduler refused (no thread is changed then).
    """
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"`thread_priority` must lie in [0, {MAX_PRIORITY}]; found {priority}")
    if priority == 0:
        return ""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))  # this thread first: fails alone if not permitted
    except PermissionError as err:
        return (f"cannot run under SCHED_FIFO priority {priority} ({err.strerror}): grant CAP_SYS_NICE or an rtprio "
                f"limit of at least {priority} (/etc/security/limits.conf), or set thread_priority to 0")
    schedule_all_threads(os.SCHED_FIFO, priority)
    return ""


def schedule_all_threads(policy: int, priority: int) -> None:
    """Put every thread of this process under ``policy`` (``os.SCHED_*``) with ``priority``."""
    param = os.sched_param(priority)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), policy, param)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def declare_thread_priority(node: Node) -> int:
    """Declare ``thread_priority`` on ``node`` and apply it to the process (call once its DDS
    participant exists, i.e. in the node's constructor); the priority in effect."""
    priority: int = declare(node, "thread_priority", 0, "SCHED_FIFO priority of all the node's threads (1-99; "
                            "needs CAP_SYS_NICE or an rtprio limit); 0: normal scheduling.",
                            int_range=(0, MAX_PRIORITY), read_only=True)
    problem = set_thread_priority(priority)
    if problem:
        node.get_logger().warning(f"thread_priority {priority}: {problem}; running with normal scheduling")
        return 0
    if priority:
        node.get_logger().info(f"thread_priority {priority}: all threads run under SCHED_FIFO")
    return priority
