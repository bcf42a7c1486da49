"""The evalstop topics, their QoS, and the message definitions as a rosbags typestore (where the ``.msg`` files are found: docs/audit.md).
"""

from __future__ import annotations

import functools
import os
import pathlib
from typing import NamedTuple

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from .errors import AuditError

__all__ = [
    "EVALSTOP_PACKAGE",
    "TOPICS",
    "Topic",
    "message_definitions",
    "msg_dir",
    "rosbags_qos",
    "typestore",
]

#: ROS package (and message namespace) of the interfaces.
EVALSTOP_PACKAGE = "evalstop"


class Topic(NamedTuple):
    """One recorded topic.

    Attributes
    ----------
    name:
        Name relative to the manager's namespace (``session_status`` is ``/ns/session_status``).
    msgtype:
        ROS type name, e.g. ``evalstop/msg/SessionStatus``.
    durability:
        ``"transient_local"`` (latched: a late subscriber gets the history) or ``"volatile"``.
    depth:
        History depth the publisher keeps (and a recorder must ask for); 0 with ``keep_all``.
    history:
        ``"keep_last"`` (``depth`` messages) or ``"keep_all"`` (reliable flow control instead
        of dropping: the score topics).
    """

    name: str
    msgtype: str
    durability: str
    depth: int
    history: str = "keep_last"


#: Every topic ``evalstop record`` records and ``evalstop audit`` reads, with the publisher's QoS
#: (all reliable; evalstop_ros/qos.py for the existing ones).
TOPICS: tuple[Topic, ...] = (
    Topic("session_config", "evalstop/msg/SessionConfig", "transient_local", 1),
    Topic("session_event", "evalstop/msg/SessionEvent", "transient_local", 1000),
    Topic("trial_request", "evalstop/msg/TrialRequest", "transient_local", 256),
    Topic("trial_score", "evalstop/msg/TrialScore", "volatile", 0, "keep_all"),
    Topic("score_ack", "evalstop/msg/ScoreAck", "volatile", 0, "keep_all"),
    Topic("session_status", "evalstop/msg/SessionStatus", "transient_local", 1),
    Topic("comparison_status", "evalstop/msg/ComparisonStatus", "transient_local", 66),
)

def msg_dir() -> pathlib.Path | None:
    """The directory holding the evalstop ``.msg`` files (module docstring), or ``None``."""
    candidates = []
    if os.environ.get("EVALSTOP_MSG_DIR"):
        candidates.append(pathlib.Path(os.environ["EVALSTOP_MSG_DIR"]))
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        candidates.append(pathlib.Path(prefix) / "share" / EVALSTOP_PACKAGE / "msg")
    candidates.append(pathlib.Path(__file__).resolve().parents[2] / "msg")  # source checkout
    return next((c for c in candidates if (c / "TrialRequest.msg").is_file()), None)


def message_definitions(directory: pathlib.Path | None = None) -> dict[str, str]:
    """``{"evalstop/msg/Name": text}`` for every evalstop message.

    :param directory: Where the ``.msg`` files are (default :func:`msg_dir`).
    :returns: The definitions.
    :raises AuditError: If no ``.msg`` directory can be found.
    """
    directory = directory or msg_dir()
    if directory is None:
        msg = ("cannot find the evalstop .msg files: set EVALSTOP_MSG_DIR, or run inside "
               "tools/ros/env.sh (share/evalstop/msg), or from a source checkout")
        raise AuditError(msg)
    found = {f"{EVALSTOP_PACKAGE}/msg/{path.stem}": path.read_text(encoding="utf-8")
             for path in sorted(directory.glob("*.msg"))}
    return found


@functools.cache
def typestore() -> Typestore:
    """A Kilted typestore with every evalstop message registered (cached).

    >>> store = typestore()
    >>> store.types["evalstop/msg/ScoreAck"].__msgtype__
    'evalstop/msg/ScoreAck'
    """
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name, text in message_definitions().items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


#: rosbag2's encoding of "not set" for deadline / lifespan / lease duration.
_INFINITE = QosTime(0x7FFFFFFF, 0xFFFFFFFF)


def rosbags_qos(topic: Topic) -> Qos:
    """The publisher's QoS of ``topic`` as bag metadata (``offered_qos_profiles``).

    ``ros2 bag play`` offers the recorded profile again, so a latched topic stays latched.
    """
    return Qos(
        history=QosHistory.KEEP_ALL if topic.history == "keep_all" else QosHistory.KEEP_LAST,
        depth=topic.depth,
        reliability=QosReliability.RELIABLE,
        durability=QosDurability.TRANSIENT_LOCAL if topic.durability == "transient_local" else QosDurability.VOLATILE,
        deadline=_INFINITE,
        lifespan=_INFINITE,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=_INFINITE,
        avoid_ros_namespace_conventions=False,
    )
