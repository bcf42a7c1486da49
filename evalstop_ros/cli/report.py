"""``evalstop report``: an HTML page, PNG figures and CSV exports of a recorded session.

A thin layer over :func:`evalstop_ros.audit.audit` and :func:`evalstop_ros.report.write_report`;
the page shows the audit's verdict at the top.
"""

from __future__ import annotations

import argparse

from ._common import print_json
from .audit import add_source_arguments, load

DESCRIPTION = """\
Audit a session (a rosbag or its journal; see `evalstop audit`) and write a static report into
DIR: index.html with the audit verdict, the decisions, the compact letter display and the
trials saved against a fixed-N batch evaluation; PNG figures of the anytime p-value
trajectories against alpha per comparison, the progress distribution per policy, success rates
with anytime-valid confidence sequences, the letter display and the savings; trials.csv (every
trial) and decisions.csv.  For a session whose runs policy_runner recorded (record_dir), the
page also shows each trial's videos, linked where they lie (not copied).  Open DIR/index.html in
a browser."""
EPILOG = """\
example:
  evalstop report session_bag/ -o session_report

exit status: 0 report written (whatever the audit found: the page shows it),
2 usage or input error (unreadable source, no configuration)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop report``."""
    add_source_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (created if needed)")
    parser.add_argument("--json", action="store_true", help="print the written paths as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Audit the source and write the report; 0 when written."""
    from ..report import write_report

    report = load(args)
    files = write_report(report, args.output)
    if args.json:
        print_json({**files.to_dict(), "verified": report.verified})
    else:
        verdict = "verified" if report.verified else f"FAILED ({len(report.violations)} violations)"
        print(f"evalstop report: {files.page} ({len(files.figures)} figures, {', '.join(p.name for p in files.csv)}); "
              f"audit {verdict}")
    return 0
