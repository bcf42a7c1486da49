"""Write the recorded example session that ships in ``examples/``: ``session_bag/`` (a rosbag2,
MCAP) and ``session.db`` (its journal), of ``examples/multitask_session.yaml`` run through a
simulated lab (policy_a succeeds 30 %, policy_b 85 %), as evaluation_manager and ``evalstop
record`` would have written them. The help texts' and README's examples audit and report them.

Usage: python tools/example_session.py [DIR]   (default: examples/; replaces both)
"""

from __future__ import annotations

import pathlib
import shutil
import sys

import yaml

from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.session import parse_config

SESSION_ID = "session"
RATES = {"policy_a": 0.3, "policy_b": 0.85}


def main(argv: list[str]) -> int:
    out = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parents[1] / "examples")
    config = parse_config(yaml.safe_load((out / "multitask_session.yaml").read_text(encoding="utf-8")))
    bag, journal = out / "session_bag", out / f"{SESSION_ID}.db"
    shutil.rmtree(bag, ignore_errors=True)
    for stale in out.glob(f"{SESSION_ID}.db*"):
        stale.unlink()
    messages = simulate_recording(config, SimulatedLab(RATES), session_id=SESSION_ID, workdir=out)
    write_bag(bag, messages)
    for extra in out.glob(f"{SESSION_ID}.db?*"):  # the journal's head file and the like stay beside it
        print(f"also written: {extra}")
    print(f"{len(messages)} messages: {bag}; journal: {journal}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
