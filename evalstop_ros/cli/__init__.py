"""The ``evalstop`` command line: one module per verb, each a thin layer over the core.

Exit codes: 0 success, 1 a check failed, 2 usage or input error, 3 a service cannot start,
130 interrupted, 141 standard output closed early (docs/cli.md).
"""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_CHECK_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE"]
