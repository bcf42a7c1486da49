#!/usr/bin/env python3
"""Run every benchmark in bench/ in turn (``make bench``); each prints its own ratios and goals."""

import pathlib
import subprocess
import sys

BENCHES = ["nscore_speed.py", "step_synthesis.py", "step_reference.py", "table1_bernoulli.py"]

if __name__ == "__main__":
    here = pathlib.Path(__file__).resolve().parent
    extra = sorted(p.name for p in here.glob("*.py") if p.name not in [*BENCHES, "run_all.py"] and not p.name.startswith("_"))
    failed = []
    for name in BENCHES + extra:
        print(f"\n=== bench/{name}", flush=True)
        if subprocess.run([sys.executable, str(here / name)], check=False).returncode != 0:
            failed.append(name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
