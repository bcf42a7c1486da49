"""``evalstop report``: an HTML page, figures (PNG, SVG, PDF) and data exports of a recorded session.

A thin layer over :func:`evalstop_ros.audit.audit` and :func:`evalstop_ros.report.write_report`;
the page shows the audit's verdict at the top.
"""

from __future__ import annotations

import argparse

from ._common import CliError, print_json
from .audit import add_source_arguments, load

DESCRIPTION = """\
Audit a session (a rosbag or its journal; see `evalstop audit`) and write a static report into
DIR: index.html with the audit verdict, the family-wise error statement (each method's
guarantee as it holds: STEP at its planned looks up to n_max, N-SCORE/WSR anytime-valid, AdaStop
at its interims), the decisions (means at each test's stop) and multi-task claims, an A/B
session's ranking with intervals, the compact letter display and the trials saved against the
design's own fixed-N plan (per task, A/B pair or AdaStop agent); figures of each comparison's
evidence (anytime p-values against alpha; STEP's success gap against its randomised boundary;
AdaStop's interims), the progress distribution per policy, success rates with anytime-valid
confidence sequences, the letter display and the savings, as PNG at 300 dpi and as SVG and PDF
(vector, for papers); trials.csv (every trial), decisions.csv (and ranking.csv for A/B) with
ISO 8601 UTC time stamps (and .parquet twins when pyarrow is installed; columns in
docs/report.md).  For a session whose runs policy_runner recorded (record_dir), the page also
shows each trial's videos, copied into DIR/videos/ (the folder is self-contained).  Open
DIR/index.html in a browser."""
EPILOG = """\
Progress goes to stderr, a line per step (audit, each figure with the time left, the page);
--json keeps stderr quiet.

examples (examples/ ships a recorded session: its bag and its journal):
  evalstop report examples/session_bag/ -o session_report
  evalstop report examples/session.db -o session_report --format pdf --json

exit status: 0 report written (whatever the audit found: the page shows it),
2 usage or input error (unreadable source, no configuration, unknown format)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop report``."""
    add_source_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (created if needed)")
    parser.add_argument("--format", default="png,svg,pdf", metavar="LIST", type=_formats,
                        help="figure formats, comma-separated, among png, svg, pdf (default %(default)s); the page "
                             "shows the first of png or svg (a pdf-only report links its figures)")
    parser.add_argument("--json", action="store_true", help="print the written paths as one JSON object")


def _formats(text: str) -> tuple[str, ...]:
    from ..report.style import FORMATS

    formats = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(f"formats must be among {', '.join(FORMATS)}; found {text!r}")
    return formats


def run(args: argparse.Namespace) -> int:
    """Audit the source and write the report, a progress line per step on stderr (not with
    ``--json``); 0 when written."""
    import pathlib
    import sys
    import time

    if pathlib.Path(args.source).suffix.lower() in (".csv", ".tsv", ".jsonl"):
        raise CliError(f"{args.source} is a table of outcomes, not a recorded session: analyze it with `evalstop "
                       f"analyze {args.source} --method ...` (paired outcomes), `evalstop rank {args.source}` (A/B "
                       f"comparisons, hub exports) or `evalstop adastop {args.source} --n-per-interim N --interims K` "
                       "(AdaStop scores); `evalstop report` takes a session's rosbag or journal (.db)")
    started = time.monotonic()

    def progress(line: str) -> None:
        if not args.json:
            print(f"evalstop report: [{time.monotonic() - started:5.1f} s] {line}", file=sys.stderr, flush=True)

    report = load(args)  # an input error ends here with its one line, no progress before it
    progress(f"audit of {args.source} {'verified' if report.verified else 'FAILED'}: {len(report.trials)} trials, "
             f"{len(report.tests)} tests; drawing the figures")
    from ..report import write_report

    files = write_report(report, args.output, args.format, progress=progress)
    if args.json:
        print_json({**files.to_dict(), "verified": report.verified})
    else:
        verdict = "verified" if report.verified else f"FAILED ({len(report.violations)} violations)"
        print(f"evalstop report: {files.page} ({len(files.figures)} figures, {', '.join(p.name for p in files.csv)}); "
              f"audit {verdict}")
    return 0
