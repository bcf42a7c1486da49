"""Small helpers shared by the evalstop nodes (parameters, process exit codes)."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from ..ros_context import ros_context

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "declare", "ignore_further_interrupts", "parameter_error",
           "spin_node"]

#: Process exit codes of the node executables.
EXIT_OK = 0
#: The node ran but its job failed (e.g. the session could not start).
EXIT_FAILURE = 1
#: Invalid parameters or arguments.
EXIT_USAGE = 2


def declare(node: Node, name: str, default: Any, description: str, *, read_only: bool = False,
            int_range: tuple[int, int] | None = None, float_range: tuple[float, float] | None = None) -> Any:
    """Declare parameter ``name`` with a typed ``default``, a description and a range; return its value.

    rclpy checks the type and the range of a value given at start-up (``-p n_max:=1.5`` raises
    :class:`~rclpy.exceptions.ParameterException`; see :func:`parameter_error`) and of every later
    change; ``ros2 param describe`` shows both.

    :param node: The node that owns the parameter.
    :param name: Parameter name.
    :param default: Default value; its type is the parameter's type (``[""]``-style lists
        give string arrays, ``[0.0]`` double arrays).
    :param description: What the parameter means, with its unit (shown by ``ros2 param describe``).
    :param read_only: Refuse every change after start-up.
    :param int_range: Inclusive ``(from, to)`` of an integer parameter.
    :param float_range: Inclusive ``(from, to)`` of a floating-point parameter.
    :returns: The value in effect (the default, or an override from the command line/launch).
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    if int_range is not None:
        descriptor.integer_range = [IntegerRange(from_value=int_range[0], to_value=int_range[1], step=0)]
    if float_range is not None:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=float(float_range[0]), to_value=float(float_range[1]), step=0.0)]
    return node.declare_parameter(name, default, descriptor).value


def parameter_error(err: Exception) -> str:
    """One line for a bad parameter at start-up: rclpy's message (it names the parameter), or ours.

    >>> parameter_error(ValueError("`alpha` must lie in (0, 1); found 2.0"))
    '`alpha` must lie in (0, 1); found 2.0'
    >>> parameter_error(ValueError("Invalid parameter value (2.0) for parameter. Reason: Parameter alpha out "
    ...                            "of range Min: 0.0, Max: 1.0, value: 2.0: alpha"))
    '`alpha` must lie in [0.0, 1.0]; found 2.0'
    >>> parameter_error(ValueError("Invalid parameter value (100) for parameter. Reason: Parameter thread_priority "
    ...                            "out of range. Min: 0, Max: 99, value: 100: thread_priority"))
    '`thread_priority` must lie in [0, 99]; found 100'
    """
    text = str(err.args[0]) if isinstance(err, ParameterException) and err.args else str(err)
    # rclpy's range check: "Invalid parameter value (2.0) for parameter. Reason: Parameter alpha
    # out of range Min: 0.0, Max: 1.0, value: 2.0: alpha" -> "`alpha` must lie in [0.0, 1.0]; found 2.0"
    # (an integer range says "out of range. Min: ...")
    found = re.search(r"Parameter (\w+) out of range\.? Min: (\S+), Max: (\S+), value: (\S+?):", text)
    if found:
        name, low, high, value = found.groups()
        return f"`{name}` must lie in [{low}, {high}]; found {value}"
    return text


def spin_node(name: str, factory: Callable[[], Node], args: list[str] | None, *, threads: int = 2,
              on_exit: Callable[[Node], None] | None = None) -> int:
    """Run the node ``factory()`` builds until Ctrl-C or an external shutdown (a node's ``main``).

    Exit status 0, or 2 with one FATAL line naming the parameter when its parameters are
    invalid.  ``on_exit(node)`` runs when spinning ends (e.g. stop the robot).
    """
    try:
        with ros_context(args):
            try:
                node = factory()
            except (ParameterException, ValueError, TypeError) as err:
                rclpy.logging.get_logger(name).fatal(f"invalid parameters: {parameter_error(err)}")
                return EXIT_USAGE
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            try:
                executor.spin()
            finally:
                ignore_further_interrupts()
                if on_exit is not None:
                    on_exit(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    ignore_further_interrupts()  # again: rclpy's shutdown put its predecessor back
    return EXIT_OK


def ignore_further_interrupts() -> None:
    """Ignore SIGINT from now on, in a node process that is shutting down.

    Ctrl-C in a terminal sends SIGINT to every process of ``ros2 launch``, and launch sends its own
    right after: the second one, arriving while the process exits, would kill it by the signal
    (exit code -2, which launch reports as an ERROR "process has died"). Main thread only.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
