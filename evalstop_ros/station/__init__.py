"""A station of an evaluation hub, without ROS: its session, its traffic with the hub, a simulated station.

* :mod:`.session` the station's trials on the session's state machine (:class:`StationSession`);
* :mod:`.work` the hub thread that supplies it and uploads its results (:class:`StationWork`);
* :mod:`.client` the HTTP client and the local journal (:class:`StationClient`);
* :mod:`.sim` a simulated station (``evalstop hub station``).

See docs/hub.md.
"""

from .client import StationClient
from .session import StationSession
from .work import StationWork

__all__ = ["StationClient", "StationSession", "StationWork"]
