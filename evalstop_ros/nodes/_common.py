"""Small helpers shared by the evalstop nodes (parameters, process exit codes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "declare", "ros_context"]

#: Process exit codes of the node executables.
EXIT_OK = 0
#: The node ran but its job failed (e.g. the session could not start).
EXIT_FAILURE = 1
#: Invalid parameters or arguments.
EXIT_USAGE = 2


def declare(node: Node, name: str, default: Any, description: str, *, read_only: bool = False) -> Any:
    """Declare parameter ``name`` with a typed ``default`` and a description; return its value.

    :param node: The node that owns the parameter.
    :param name: Parameter name.
    :param default: Default value; its type is the parameter's type (``[""]``-style lists
        give string arrays, ``[0.0]`` double arrays).
    :param description: What the parameter means, with its unit (shown by ``ros2 param describe``).
    :param read_only: Refuse every change after start-up.
    :returns: The value in effect (the default, or an override from the command line/launch).
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    return node.declare_parameter(name, default, descriptor).value


@contextlib.contextmanager
def ros_context(args: list[str] | None) -> Iterator[None]:
    """``rclpy.init(args=args)`` ... ``rclpy.try_shutdown()``, on every distribution.

    Jazzy and later also accept ``with rclpy.init(args=args):``; Humble's ``rclpy.init`` returns
    ``None``, so the nodes use this instead.

    Ctrl-C shuts the context down from rclpy's signal handler while a callback may still be
    running; its next publish then fails ("publisher's context is invalid").  Such errors,
    raised once the context is down, are part of the shutdown and end the block quietly;
    anything raised while ROS is up propagates.
    """
    rclpy.init(args=args)
    try:
        yield
    except Exception:
        if rclpy.ok():
            raise
    finally:
        rclpy.try_shutdown()
