"""What several benches share: goal verdicts, writing a generated table, timing concurrent clients.

Each helper exists once here (issue 22: every piece of logic once); the benches keep only what
they measure.
"""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Callable, Mapping


def goal_verdicts(goals: Mapping[str, bool], indent: str = "") -> int:
    """Print ``PASS: goal`` or ``FAIL: goal`` per goal; the exit status: 0 when every goal passed, else 1."""
    for goal, ok in goals.items():
        print(f"{indent}{'PASS' if ok else 'FAIL'}: {goal}")
    return 0 if all(goals.values()) else 1


def emit_table(text: str, write: str | None) -> int:
    """Print the generated ``text`` and, with ``--write FILE``, also write it (one final newline); exit status 0."""
    print(text)
    if write:
        pathlib.Path(write).write_text(text + "\n", encoding="utf-8")
    return 0


def run_concurrently(target: Callable[[int], None], n: int) -> float:
    """Run ``target(i)`` for ``i < n`` in ``n`` threads started together; the wall time (s) until all end."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start
