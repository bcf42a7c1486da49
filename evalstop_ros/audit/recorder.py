"""``evalstop record``: record evalstop's topics to a rosbag2 bag where rosbag2 is not installed (raw subscriptions; docs/audit.md).
"""

from __future__ import annotations

import importlib
import pathlib
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError

from ..ros_context import ros_context
from .errors import AuditError
from .interfaces import TOPICS, Topic, rosbags_qos, typestore

__all__ = ["SessionRecorder", "record", "topic_qos"]

#: SessionStatus states after which nothing more happens.
_FINAL_STATES = (3, 4)


def topic_qos(topic: Topic) -> QoSProfile:
    """The publisher's QoS of ``topic`` (evalstop_ros/qos.py), as a recorder must request it."""
    if topic.history == "keep_all":
        return QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL if topic.durability == "transient_local"
                          else DurabilityPolicy.VOLATILE)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=topic.depth, reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if topic.durability == "transient_local"
        else DurabilityPolicy.VOLATILE,
    )


def _message_class(msgtype: str) -> Any:
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name, None)


class SessionRecorder(Node):
    """Subscribes to the evalstop topics and writes what arrives to a bag (module docstring).

    :param bag: The bag directory to create (must not exist).
    :param storage: ``"mcap"`` or ``"sqlite3"``.
    :param namespace: Namespace of the manager's topics (``""``: the root namespace).
    :param until_finished: Note when a ``session_status`` reports the end (see :attr:`finished_at`).
    :param log: Where progress lines go.
    """

    def __init__(self, bag: pathlib.Path, *, storage: str, namespace: str = "", until_finished: bool = False,
                 log: TextIO = sys.stderr) -> None:
        super().__init__("evalstop_recorder", namespace=namespace or "/")
        self.log = log
        self.until_finished = until_finished
        #: ``time.monotonic()`` when the session was seen finished or aborted.
        self.finished_at: float | None = None
        self.counts: Counter[str] = Counter()
        self._last_ns = 0
        self._store = typestore()
        self._status_class = _message_class("evalstop/msg/SessionStatus")
        plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
        self.writer = Writer(bag, version=Writer.VERSION_LATEST, storage_plugin=plugin)
        self.writer.open()
        self.topics: list[str] = []
        for topic in TOPICS:
            cls = _message_class(topic.msgtype)
            name = self.resolve_topic_name(topic.name)
            if cls is None:
                print(f"evalstop record: {topic.msgtype} is not in this ROS install; not recording {name}",
                      file=log, flush=True)
                continue
            connection = self.writer.add_connection(name, topic.msgtype, typestore=self._store,
                                                    offered_qos_profiles=[rosbags_qos(topic)])
            self.create_subscription(cls, topic.name, lambda raw, t=topic, c=connection: self._on_message(t, c, raw),
                                     topic_qos(topic), raw=True)
            self.topics.append(name)

    def _on_message(self, topic: Topic, connection: Any, raw: bytes) -> None:
        stamp = max(time.time_ns(), self._last_ns + 1)  # strictly increasing: every storage orders alike
        self._last_ns = stamp
        self.writer.write(connection, stamp, raw)
        self.counts[topic.name] += 1
        if topic.name == "session_status" and self.until_finished and self.finished_at is None:
            status = deserialize_message(raw, self._status_class)
            if status.state in _FINAL_STATES:
                self.finished_at = time.monotonic()
                print(f"evalstop record: session {status.session_id} {status.state_name}", file=self.log, flush=True)

    def close(self) -> None:
        """Write the bag's metadata and close it (idempotent)."""
        if self.writer.storage is not None:
            self.writer.close()


def record(bag: str | pathlib.Path, *, storage: str = "mcap", namespace: str = "", until_finished: bool = False,
           linger: float = 1.0, duration: float | None = None, ros_args: Sequence[str] = (),
           log: TextIO = sys.stderr) -> Counter[str]:
    """Record until Ctrl-C / SIGTERM, ``duration`` seconds, or the end of the session.

    :param bag: The bag directory to create.
    :param storage: ``"mcap"`` or ``"sqlite3"``.
    :param namespace: Namespace of the manager's topics.
    :param until_finished: Stop ``linger`` seconds after the session is finished or aborted.
    :param linger: Seconds to keep recording after the end (the last acks and statuses).
    :param duration: Stop after this many seconds, if given.
    :param ros_args: Extra ROS arguments for ``rclpy.init``.
    :param log: Where progress lines go.
    :returns: Messages recorded per topic.
    :raises AuditError: If the bag cannot be created.
    """
    path = pathlib.Path(bag)
    started = time.monotonic()
    try:
        with ros_context(["evalstop_record", *ros_args]):
            try:
                node = SessionRecorder(path, storage=storage, namespace=namespace, until_finished=until_finished,
                                       log=log)
            except WriterError as err:
                raise AuditError(f"cannot create bag {str(path)!r}: {err}") from err
            print(f"evalstop record: recording {len(node.topics)} topics ({', '.join(node.topics)}) to {path} "
                  f"({storage})", file=log, flush=True)
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                while True:
                    executor.spin_once(timeout_sec=0.05)
                    now = time.monotonic()
                    if node.finished_at is not None and now - node.finished_at >= linger:
                        break
                    if duration is not None and now - started >= duration:
                        break
            except (KeyboardInterrupt, ExternalShutdownException):
                pass
            finally:
                node.close()
                counts = node.counts
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        counts = Counter()
    total = sum(counts.values())
    print(f"evalstop record: wrote {total} messages to {path}: "
          + (", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"), file=log, flush=True)
    return counts
