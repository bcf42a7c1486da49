"""Real-time scheduling of a node's threads: the ``thread_priority`` parameter of every evalstop node.

On a loaded machine each thread wake-up between a score and its status (the DDS receive thread
and the executor, on each side, and the journal's fsync) may wait for a CPU-bound process to
use up its time slice; with the kernel's 4 ms tick (``CONFIG_HZ=250``) a few such waits are
10-15 ms.  ``thread_priority`` N in 1..99 puts every thread of the node's process under
``SCHED_FIFO`` with priority N, as ros2_control's ``controller_manager`` does for its control
loop (its ``thread_priority`` parameter): such a thread runs as soon as it wakes.  Threads the
process starts later inherit the policy.  0 (the default) leaves the normal scheduler.

The node needs the permission: ``CAP_SYS_NICE`` (root) or an ``rtprio`` limit of at least N
(``@realtime - rtprio 99`` in ``/etc/security/limits.conf`` and the user in group
``realtime``, the set-up ros2_control documents).  Without it the node logs one warning and
runs with normal scheduling.  The evalstop nodes never busy-wait, and the kernel keeps 5 % of
every second for other processes (``kernel.sched_rt_runtime_us``) even if one did.
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
