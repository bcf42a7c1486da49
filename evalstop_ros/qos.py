"""The QoS profiles of every evalstop topic, named once (per topic: docs/nodes.md)."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

__all__ = [
    "COMPARISON_QOS",
    "CONFIG_QOS",
    "DIAGNOSTICS_QOS",
    "JOURNAL_EVENT_QOS",
    "EVENT_QOS",
    "LATCHED_QOS",
    "SCORE_ACK_QOS",
    "SCORE_QOS",
    "STATUS_QOS",
    "TRIAL_REQUEST_QOS",
    "describe",
]


def _reliable(durability: DurabilityPolicy, depth: int | None = None) -> QoSProfile:
    """A reliable profile with ``durability``, keeping the last ``depth`` messages (``None``: keep all)."""
    if depth is None:
        return QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE, durability=durability)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=durability)


#: Late joiners get the last message (the pending trial, the latest status).
LATCHED_QOS = _reliable(DurabilityPolicy.TRANSIENT_LOCAL, 1)
#: Every message matters and none is replayed: scores and acks. KEEP_ALL, so a burst that
#: outruns the reader is throttled by reliable flow control instead of overwriting unread
#: scores (with KEEP_LAST 100, bench/latency.py lost 760 of 1000 back-to-back scores).
EVENT_QOS = _reliable(DurabilityPolicy.VOLATILE)

#: ``trial_request``: every open trial's request, latched for a late operator terminal: with several
#: arms several trials are open at once (at most ``runner.max_ahead``, 128, plus a round), so the last
#: 256 requests are kept (retries included), both by the manager and by a terminal.
TRIAL_REQUEST_QOS = _reliable(DurabilityPolicy.TRANSIENT_LOCAL, 256)
#: ``session_status``: the latest session status, latched.
STATUS_QOS = LATCHED_QOS
#: ``comparison_status``: per-pair updates, latched deep enough for 66 pairs (12 policies).
COMPARISON_QOS = _reliable(DurabilityPolicy.TRANSIENT_LOCAL, 66)
#: ``session_config``: the pre-registered design of the running session, latched.
CONFIG_QOS = LATCHED_QOS
#: ``session_event``: every journal event as committed; a late recorder gets the last 1000.
JOURNAL_EVENT_QOS = _reliable(DurabilityPolicy.TRANSIENT_LOCAL, 1000)
#: ``trial_score``: operator and automatic scores.
SCORE_QOS = EVENT_QOS
#: ``score_ack``: the manager's answer to each score.
SCORE_ACK_QOS = EVENT_QOS
#: ``/diagnostics``: as diagnostic_aggregator and rqt_robot_monitor expect.
DIAGNOSTICS_QOS = _reliable(DurabilityPolicy.VOLATILE, 10)


def describe(profile: QoSProfile) -> str:
    """One-word-per-policy summary of ``profile`` for the nodes' start-up log line.

    :param profile: The profile to describe.
    :returns: e.g. ``"reliable transient_local depth=1"``.

    >>> describe(LATCHED_QOS)
    'reliable transient_local depth=1'
    >>> describe(EVENT_QOS)
    'reliable volatile keep_all'
    """
    history = "keep_all" if profile.history == HistoryPolicy.KEEP_ALL else f"depth={profile.depth}"
    return f"{profile.reliability.name.lower()} {profile.durability.name.lower()} {history}"
