"""The reference packages, installed into a scratch virtualenv beside the benches (never the project's).

``reference_python()`` creates ``$EVALSTOP_REFERENCE_VENV`` (default ``bench/.reference-venv``,
ignored by git) on first use and installs the pinned packages with pip from the ordinary package
index: the STEP authors' ``sequentialized-barnard-tests`` and the N-SCORE authors' ``nscore``.
The benches run them in subprocesses and only time them; none of their code is copied here.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

#: Pinned reference packages (the versions the issue's measurements used).
PACKAGES = ("sequentialized-barnard-tests==0.0.9", "nscore==0.1.2")
VENV = pathlib.Path(os.environ.get("EVALSTOP_REFERENCE_VENV", pathlib.Path(__file__).with_name(".reference-venv")))


def reference_python() -> pathlib.Path:
    """Path of the scratch venv's python, created and filled on first use."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    if not marker.exists() or marker.read_text() != "\n".join(PACKAGES):
        print(f"installing the reference packages into {VENV} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES], check=True)
        marker.write_text("\n".join(PACKAGES))
    return python


def run_json(python: pathlib.Path | str, code: str, *args: str, timeout: float | None = None) -> dict[str, float]:
    """Run ``code`` in ``python`` with ``args``; it prints one JSON object last on stdout."""
    import json

    out = subprocess.run([str(python), "-c", code, *args], check=True, capture_output=True, text=True,
                         timeout=timeout)
    return json.loads(out.stdout.strip().splitlines()[-1])
