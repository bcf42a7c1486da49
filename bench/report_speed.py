#!/usr/bin/env python3
"""Report speed: ``evalstop report`` of the demo, a multi-task, an A/B and an AdaStop session
(goals: no more CPU than the baseline measured in the same run, 1.1 at most; where the cores are
free, at most 0.7 of its wall time and the demo's report in at most 5 s end to end).

The sessions are those of the report tests (``test/report/report_sessions.py``: the demo's
preset at its default rates, two tasks with per-task claims, RoboArena's A/B design over three
policies, AdaStop over three agents), each simulated through a real EvaluationSession and
written as a bag.  For each, in the same run and alternating (so both see the same load):

* ``report``: the console script as a user runs it, ``evalstop report BAG -o DIR --json``
  (interpreter start, imports, the audit, six figures in PNG, SVG and PDF, the page, the data);
* ``baseline``: the same audit, figures, page and data drawn as before this bench existed, in one
  process: each figure laid out again at every save, the figures one after another.

Prints the wall and CPU seconds of each (CPU includes the worker processes; the best of
``--repeat`` runs), their ratios and the machine's load; the wall-time goals are judged only
where the load average stays below the core count (on a machine shared with other work the
wall time measures the other work).
Run: ``nice -n 10 .venv/bin/python bench/report_speed.py``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from _common import goal_verdicts

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "report"))
from report_sessions import SESSIONS  # noqa: E402  (the sessions the report tests render)

from evalstop_ros.audit.synthetic import simulate_recording, write_bag  # noqa: E402

NAMES = ("demo", "multitask", "ab", "adastop")
GOAL_DEMO_S = 5.0
GOAL_RATIO = 0.7
GOAL_CPU = 1.1
BASELINE = """
import pathlib, sys
from evalstop_ros.audit import audit
from evalstop_ros.report.drawing import figure_specs
from evalstop_ros.report.exports import write_exports
from evalstop_ros.report.page import PageFigure, write_page
from evalstop_ros.report.savings import savings
from evalstop_ros.report.style import RC, save
import matplotlib
report = audit(sys.argv[1])
out = pathlib.Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
shown = []
with matplotlib.rc_context(RC):
    for spec in figure_specs(report):
        paths = save(spec.build(report), out / spec.stem, ("png", "svg", "pdf"))
        shown.append(PageFigure(paths[0].name, spec.alt, spec.caption, tuple(p.name for p in paths)))
exports = write_exports(report, out)
write_page(report, shown, out / "index.html", savings(report), "", [p.name for p in exports])
"""


def _timed(command: list[str]) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``command``; cpu counts its worker processes too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, the best counts (default %(default)s)")
    args = parser.parse_args()
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    load_start = os.getloadavg()[0]
    print(f"evalstop report vs the baseline, best of {args.repeat}; load average {load_start:.1f} on "
          f"{os.cpu_count()} cores at the start", flush=True)
    results: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        work = pathlib.Path(tmp)
        for name in NAMES:
            config, lab = SESSIONS[name]()
            bag = write_bag(work / f"{name}-bag", simulate_recording(config, lab, session_id=name))
            new, old = [], []
            for k in range(args.repeat):
                new.append(_timed([script, "report", str(bag), "-o", str(work / f"{name}-new-{k}"), "--json"]))
                old.append(_timed([sys.executable, "-c", BASELINE, str(bag), str(work / f"{name}-old-{k}")]))
            results[name] = (min(new), min(old))
            (wall, cpu), (wall0, cpu0) = results[name]
            print(f"{name:>10}: report {wall:6.2f} s ({cpu:5.2f} s CPU), baseline {wall0:6.2f} s ({cpu0:5.2f} s CPU), "
                  f"ratio {wall / wall0:.2f} ({cpu / cpu0:.2f} CPU)", flush=True)
    load = max(os.getloadavg()[0], load_start)
    cores = os.cpu_count() or 1
    print(f"load average {load_start:.1f} -> {os.getloadavg()[0]:.1f} at the end")
    goals = {f"every report's CPU at most {GOAL_CPU} of its baseline's (no extra work)":
             all(new[1] <= GOAL_CPU * old[1] for new, old in results.values())}
    if load < cores:  # wall times mean something only where the cores are free
        goals[f"every report's wall time at most {GOAL_RATIO} of its baseline's"] = all(
            new[0] <= GOAL_RATIO * old[0] for new, old in results.values())
        goals[f"the demo's report in at most {GOAL_DEMO_S:g} s"] = results["demo"][0][0] <= GOAL_DEMO_S
    else:
        print(f"(wall-time goals not judged: load {load:.1f} on {cores} cores; the demo's report took "
              f"{results['demo'][0][0]:.2f} s)")
    return goal_verdicts(goals)


if __name__ == "__main__":
    sys.exit(main())
