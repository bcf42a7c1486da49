"""The evaluation hub: one service coordinating many stations (``evalstop hub``; docs/hub.md).

A station's side (client, session, hub thread) is :mod:`evalstop_ros.station`.
"""
