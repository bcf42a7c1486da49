"""Entry point of the ``evalstop`` console script: the parser and the dispatch to the verbs."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from .. import __version__
from ..operator_input import decode_input
from ..stats.errors import StatsInputError
from . import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE
from ._common import CliError

#: The verbs and their one-line help, in the order ``evalstop --help`` lists them.  Each verb is
#: a module of this package, imported only when its verb is on the command line, so that
#: ``evalstop --help`` and every verb load only what they need (no scipy for ``--help``).
VERBS = {
    "adastop": "compare several agents with AdaStop on a CSV of scores (one column per agent)",
    "analyze": "run a sequential test over recorded paired scores (CSV)",
    "simulate": "estimate power, false-claim rate and mean stopping time by Monte Carlo",
    "step": "synthesize, check and characterise STEP decision tables",
    "record": "record evalstop's topics to a rosbag2 bag (mcap or sqlite3), where rosbag2 is missing",
    "audit": "verify a recorded session (rosbag or journal): decisions, p-values, protocol",
    "report": "write an HTML report (figures, decisions, letters, savings) and CSV exports of a session",
    "sim-eval": "run a session of served policies on robosuite tasks, rollouts on Ray workers (local or a cluster)",
    "rank": "rank policies from pairwise A/B comparisons (BT, Davidson, Elo, PROG, task-aware)",
    "hub": "evaluation hub for many stations (serve, add-policy, add-station, revoke, export, analyze, station)",
    "keys": "create operator key files for authenticated scores and session control",
}
EPILOG = """\
examples (the files under examples/ ship with evalstop; examples/session_bag/ is a recorded session,
examples/session.db its journal):
  evalstop analyze examples/towel_like.csv --method step --alpha 0.05 --n-max 200
  evalstop simulate --method step --p0 0.45 --p1 0.55 --n-max 100 --alpha 0.05 --reps 2000
  evalstop step check --n-max 100 --alpha 0.05
  evalstop adastop examples/adastop_scores.csv --n-per-interim 5 --interims 6 --alpha 0.05
  evalstop audit examples/session_bag/ --json
  evalstop report examples/session.db -o session_report
  evalstop rank examples/arena_ab.csv --model task --json
  evalstop hub serve --db hub.sqlite --port 8765

exit status (every verb; `evalstop VERB --help` says which apply):
  0    done
  1    a check failed (step check: Type-I error above alpha; audit: a published decision not
       reproduced or the protocol broken)
  2    usage or input error (one line on stderr naming the file, line and value)
  3    a service cannot start (hub serve: the port is in use or cannot be bound)
  130  interrupted (Ctrl-C)
  141  stdout closed early (e.g. `--json | head`): the output was cut, nothing else is wrong"""


def verb_module(name: str) -> ModuleType:
    """The module implementing verb ``name`` (``add_arguments``, ``run``, ``DESCRIPTION``, ``EPILOG``)."""
    return importlib.import_module(f".{name.replace('-', '_')}", __package__)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``evalstop VERB: error: MESSAGE (see ... --help)``, status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``evalstop`` parser; only the verb named in ``argv`` gets its options (all if ``None``).

    The verb is the first argument that is not an option (the top level has only ``--help``
    and ``--version``).  The other verbs still appear in the verb list, so ``evalstop --help``
    and usage errors read the same, but their modules are not imported.
    """
    chosen = next((arg for arg in argv if not arg.startswith("-")), None) if argv is not None else None
    wanted = set(VERBS) if argv is None else {chosen}
    parser = _Parser(
        prog="evalstop",
        description="Sequential policy comparison with anytime-valid stopping (STEP, N-SCORE, ...).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="{" + ",".join(VERBS) + "}", required=True)
    for name, help_line in VERBS.items():
        if name not in wanted:
            verbs.add_parser(name, help=help_line)
            continue
        module = verb_module(name)
        verb = verbs.add_parser(
            name, help=help_line, description=module.DESCRIPTION, epilog=module.EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(verb)
        verb.set_defaults(run=module.run, prog=verb.prog)
    return parser


def _undecodable(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evalstop`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    Input errors from the verbs (:class:`CliError`) and from the core
    (:class:`~evalstop_ros.stats.errors.StatsInputError`) are printed as one line,
    ``evalstop VERB: error: MESSAGE``, on stderr, and give status 2 (argparse's own status for
    usage errors); see :mod:`evalstop_ros.cli` for all exit codes.
    """
    for stream in (sys.stdout, sys.stderr):  # any text, any locale: what a stream cannot encode is escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    # an argument that is not UTF-8 (lone surrogates from the OS) as valid text: a clear error, not a crash
    arguments = [decode_input(a) if _undecodable(a) else a for a in (sys.argv[1:] if argv is None else argv)]
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as done:  # --help, --version (0) or a usage error (2), already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    try:
        status = int(args.run(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except (CliError, StatsInputError) as err:
        print(f"{args.prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except UnicodeDecodeError as err:  # an input file a verb read as text is not UTF-8
        print(f"{args.prog}: error: an input is not UTF-8 text ({err.reason} at byte {err.start})", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader (e.g. `head`) closed stdout early: stop quietly, as a command in a pipe should;
        # stdout goes to /dev/null so that the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
