"""Entry point of the ``evalstop`` console script: the parser and the dispatch to the verbs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..stats.errors import StatsInputError
from . import EXIT_USAGE, adastop, analyze, audit, rank, record, report, simulate, step
from ._common import CliError

#: The verbs, in the order ``evalstop --help`` lists them.
VERBS = {"adastop": adastop, "analyze": analyze, "simulate": simulate, "step": step, "record": record,
         "audit": audit, "report": report, "rank": rank}
EPILOG = """\
examples:
  evalstop analyze towel.csv --method nscore --alpha 0.05
  evalstop simulate --method step --p0 0.45 --p1 0.55 --n-max 100 --alpha 0.05 --reps 2000
  evalstop step check --n-max 100 --alpha 0.05
  evalstop adastop mujoco.csv --n-per-interim 5 --interims 6 --alpha 0.05
  evalstop audit session_bag/ --json
  evalstop report session_bag/ -o session_report
  evalstop rank arena.csv --model task --json

exit status: 0 done, 1 a check failed (step check), 2 usage or input error.
(evalstop audit: 1 when a published decision is not reproduced or the protocol was broken.)"""


def build_parser() -> argparse.ArgumentParser:
    """The ``evalstop`` parser with every verb's options."""
    parser = argparse.ArgumentParser(
        prog="evalstop",
        description="Sequential policy comparison with anytime-valid stopping (STEP, N-SCORE, ...).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="{" + ",".join(VERBS) + "}", required=True)
    for name, module in VERBS.items():
        verb = verbs.add_parser(
            name, help=module.HELP, description=module.DESCRIPTION, epilog=module.EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(verb)
        verb.set_defaults(run=module.run, prog=verb.prog)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evalstop`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    Input errors from the verbs (:class:`CliError`) and from the core
    (:class:`~evalstop_ros.stats.errors.StatsInputError`) are printed as one line,
    ``evalstop VERB: error: MESSAGE``, on stderr, and give status 2 (argparse's own status for
    usage errors); see :mod:`evalstop_ros.cli` for all exit codes.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version (0) or a usage error (2), already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    try:
        return int(args.run(args))
    except (CliError, StatsInputError) as err:
        print(f"{args.prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
