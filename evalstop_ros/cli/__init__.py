"""The ``evalstop`` command line: one module per verb, each a thin layer over the core.

Every verb module has ``add_arguments(parser)`` and ``run(args) -> int``; :mod:`.main` wires them
into one argparse parser.  With ``--json`` a verb prints exactly one JSON object (sorted keys) to
stdout; diagnostics, progress bars and errors go to stderr.

Exit codes
----------
0
    Success (for ``analyze``, whatever the decision).
1
    A check failed (``evalstop step check``: the exact Type-I error exceeds ``alpha + 1e-4``;
    ``evalstop audit``: a protocol violation or a published decision not reproduced).
2
    Usage or input error: a bad option, or a data file that cannot be read; the one-line message
    names the file, line and value.  Nothing is printed to stdout.
3
    A service cannot start: ``evalstop hub serve`` cannot listen on its port (in use, or not
    allowed); one line on stderr says which port and why.
130
    Interrupted (Ctrl-C).
141
    Standard output was closed early (``evalstop analyze ... --json | head``): the output is cut
    where the reader stopped; no traceback (128 + SIGPIPE, as a shell reports it).
"""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_CHECK_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE"]
