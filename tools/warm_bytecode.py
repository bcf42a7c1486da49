"""Byte-compile what the test processes import, once, before they start side by side.

    python tools/warm_bytecode.py [MODULE ...]

``make test`` installs its venvs with ``pip install --no-compile`` (compiling every ``.py`` of both
venvs cost minutes of CPU, most of it for modules no test imports). Python then compiles a module
the first time a process imports it; without this step the test runs' first processes (the
pytest-xdist workers and the nodes they start, a dozen at once) would each compile the same
modules at the same moment. This imports every module of ``evalstop_ros`` (whichever copy comes
first on ``sys.path``: the source tree or the colcon install) and the MODULEs named, so that what
they pull in (rclpy, scipy, pydantic, matplotlib, ...) is compiled once. A module whose optional
dependency is absent, or that cannot be imported here, is counted and skipped: the tests say why.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import warnings


def main(argv: list[str]) -> int:
    start = time.monotonic()
    warnings.simplefilter("ignore")
    imported, skipped = 0, 0
    import evalstop_ros

    names = [info.name for info in pkgutil.walk_packages(evalstop_ros.__path__, "evalstop_ros.",
                                                          onerror=lambda name: None)
             if not info.name.endswith("__main__")]  # a __main__ would run its program
    for name in [*names, *argv]:
        try:
            importlib.import_module(name)
            imported += 1
        except Exception:  # an optional dependency or the ROS build missing: its tests say so
            skipped += 1
    print(f"warm_bytecode: {imported} modules imported from {evalstop_ros.__path__[0]} and {argv or 'nothing else'}"
          f" ({skipped} skipped) in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
