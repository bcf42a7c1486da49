"""``evalstop record``: record evalstop's topics to a rosbag2 bag without rosbag2.

rclpy is imported only when the verb runs (:mod:`evalstop_ros.audit.recorder`), so the rest of
the CLI works without ROS.
"""

from __future__ import annotations

import argparse
import pathlib

from ._common import CliError

DESCRIPTION = """\
Subscribe to the evaluation manager's topics (session_config, session_event, trial_request,
trial_score, score_ack, session_status, comparison_status) with the publishers' QoS and write
every message as received to a rosbag2 bag with the message definitions embedded: readable by
`ros2 bag info`, `ros2 bag play`, rosbags and `evalstop audit`.  Needs the ROS environment
(tools/ros/env.sh).  Start it before the session; stop it with Ctrl-C, or let it stop by
itself with --until-finished."""
EPILOG = """\
examples:
  evalstop record -o session_bag --storage mcap --until-finished
  evalstop record -o quiet_bag --duration 5

exit status: 0 recorded, 2 usage error (no ROS environment, bag already exists)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop record``."""
    parser.add_argument("-o", "--output", required=True, help="bag directory to create (must not exist)")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                        help="storage format (default %(default)s)")
    parser.add_argument("--namespace", default="", help="namespace of the manager's topics (default: the root)")
    parser.add_argument("--until-finished", action="store_true",
                        help="stop once session_status reports the session finished or aborted")
    parser.add_argument("--linger", type=float, default=1.0,
                        help="seconds to keep recording after the end, for the last messages (default %(default)s)")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: never)")


def run(args: argparse.Namespace) -> int:
    """Record until stopped; 0 when the bag was written."""
    if pathlib.Path(args.output).exists():
        raise CliError(f"{args.output}: exists already; a bag is never overwritten")
    try:
        from ..audit import recorder
    except ImportError as err:
        raise CliError(f"recording needs ROS 2 (rclpy and the evalstop interfaces): {err}; run inside "
                       "`. tools/ros/env.sh .venv build/ros/install`") from err
    from ..audit.errors import AuditError

    try:
        recorder.record(args.output, storage=args.storage, namespace=args.namespace,
                        until_finished=args.until_finished, linger=args.linger, duration=args.duration)
    except AuditError as err:
        raise CliError(str(err)) from err
    return 0
