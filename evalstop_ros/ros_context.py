"""The one ``rclpy.init`` ... ``rclpy.try_shutdown`` of every evalstop process that joins ROS.

Its own module (rclpy only) so that the nodes and the audit's recorder share it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import rclpy

__all__ = ["interrupted", "ros_context"]


@contextlib.contextmanager
def ros_context(args: list[str] | None) -> Iterator[None]:
    """``rclpy.init(args=args)`` ... ``rclpy.try_shutdown()``, on every distribution.

    Jazzy and later also accept ``with rclpy.init(args=args):``; Humble's ``rclpy.init`` returns
    ``None``, so the nodes use this instead.

    Ctrl-C shuts the context down from rclpy's signal handler while a callback may still be
    running; its next publish then fails ("publisher's context is invalid").  Such errors,
    raised once the context is down, are part of the shutdown and end the block quietly, as do
    errors a Ctrl-C caused before rclpy's handler thread shut the context down (a
    ``KeyboardInterrupt`` raised inside rclpy's C++ code reaches Python as the cause of a
    ``TypeError``); anything else raised while ROS is up propagates.
    """
    rclpy.init(args=args)
    try:
        yield
    except Exception as err:
        if rclpy.ok() and not interrupted(err):
            raise
    finally:
        rclpy.try_shutdown()


def interrupted(err: BaseException) -> bool:
    """Whether ``err`` is, or was caused by, a ``KeyboardInterrupt`` (Ctrl-C or ``SIGINT``)."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
