#!/usr/bin/env python3
"""Where the test time goes: one tier of ``make test`` / ``make check`` run with per-test times.

Runs pytest on one tier (the marker expressions of the Makefile) with a JUnit report, then
prints the tier's wall time, the summed test time and its share per directory, per module and
per marker (``ros``, ``slow``, ``mc``, ...), and the slowest tests, each as a share of the summed
time (a ratio, so the figures compare across machines and loads).  A module whose time is
mostly ``ros`` tests is where moving engine checks below ROS pays (docs/testing.md).

Run: ``.venv/bin/python tools/test_durations.py --tier check`` (``--tier rest|ros|serial``;
``-n 2`` for xdist workers as ``make test``; ``--paths test/stats`` to limit it; ``--top 25``).
ROS tiers need the ROS environment (``tools/ros/env.sh``) and ``EVALSTOP_TEST_DOMAIN_BASE``.

``--junit build/test-logs/*.xml`` reads reports instead of running anything: ``make test`` writes
one per run (test time with set-up and tear-down, so a node fixture's start-up counts), and the
summary adds the time per run and its share of the whole.  ``--before OLD.xml ...`` compares: the
summed time of the tests in both, before and after, per module.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

#: The Makefile's tiers (CHECK_MARKERS and the three runs of `make test`).
TIERS = {
    "check": "not ros and not netns and not slow and not mc and not serial",
    "rest": "not ros and not serial",
    "ros": "ros and not serial",
    "serial": "serial",
}


def run_tier(markers: str, paths: list[str], workers: int, report: pathlib.Path) -> float:
    """Run pytest on ``paths`` with ``-m markers``; the wall time (s).  The JUnit report goes to ``report``."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", markers, f"--junitxml={report}",
            "-o", "junit_duration_report=call", *paths]
    if workers > 1:
        argv += ["-n", str(workers)]
    start = time.perf_counter()
    subprocess.run(argv, check=False)
    return time.perf_counter() - start


def marker_index(paths: list[str], markers: str) -> dict[str, set[str]]:
    """``nodeid -> markers`` of the tier's tests (from a collection run that prints them)."""
    code = (
        "import sys, json, pytest\n"
        "class P:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        self.marks = {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}\n"
        "p = P()\n"
        "pytest.main(['-p', 'no:cacheprovider', '-q', '--collect-only', '-m', sys.argv[1], *sys.argv[2:]], plugins=[p])\n"
        "print(json.dumps(getattr(p, 'marks', {})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, markers, *paths], capture_output=True, text=True, check=False)
    import json

    return {k: set(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


#: One test case of a JUnit report: ``module.path::name``, seconds, failed.
Case = tuple[str, float, bool]


def read_cases(report: pathlib.Path) -> list[Case]:
    """The test cases of a JUnit report (pytest's ``--junitxml``)."""
    return [(f"{c.get('classname', '')}::{c.get('name', '')}", float(c.get("time", 0.0)),
             c.find("failure") is not None or c.find("error") is not None)
            for c in ET.parse(report).getroot().iter("testcase")]


def module_of(name: str) -> str:
    """``test.stats.test_step::test_x`` -> ``test/stats/test_step.py``."""
    return name.split("::")[0].replace(".", "/") + ".py"


def print_slowest(cases: list[Case], total: float, top: int) -> None:
    """The ``top`` slowest modules and tests of ``cases``, each as a share of ``total``."""
    by_module: collections.Counter[str] = collections.Counter()
    for name, seconds, _ in cases:
        by_module[module_of(name)] += seconds
    print(f"\nslowest {top} modules:")
    for key, seconds in by_module.most_common(top):
        print(f"  {seconds / total:6.1%}  {seconds:8.1f} s  {key}")
    print(f"\nslowest {top} tests:")
    for name, seconds, failed in sorted(cases, key=lambda c: -c[1])[:top]:
        print(f"  {seconds / total:6.1%}  {seconds:8.1f} s  {name}{'  (failed)' if failed else ''}")


def summarize_reports(reports: list[pathlib.Path], before: list[pathlib.Path], top: int) -> None:
    """Per run (one report each: ``make test`` writes one per run), module and test; with ``before``,
    the summed time per module before and after, the largest savings first."""
    runs = {report.stem: read_cases(report) for report in reports}
    total = sum(t for cases in runs.values() for _, t, _ in cases) or 1.0
    print(f"{len(reports)} report(s), {sum(map(len, runs.values()))} tests, summed test time {total:.0f} s "
          f"(set-up and tear-down included where the report has them)")
    print("\nper run:")
    for run, cases in runs.items():
        seconds = sum(t for _, t, _ in cases)
        print(f"  {seconds / total:6.1%}  {seconds:8.1f} s  {run} ({len(cases)} tests)")
    cases = [case for cases in runs.values() for case in cases]
    print_slowest(cases, total, top)
    if not before:
        return
    old: collections.Counter[str] = collections.Counter()
    new: collections.Counter[str] = collections.Counter()
    for report in before:
        for name, seconds, _ in read_cases(report):
            old[module_of(name)] += seconds
    for name, seconds, _ in cases:
        new[module_of(name)] += seconds
    both = sorted(set(old) | set(new), key=lambda m: new[m] - old[m])
    print(f"\nbefore -> after (summed test time): {sum(old.values()):.0f} s -> {sum(new.values()):.0f} s")
    for module in both[:top]:
        print(f"  {old[module]:8.1f} s -> {new[module]:8.1f} s  ({new[module] - old[module]:+8.1f} s)  {module}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=TIERS, default="check")
    parser.add_argument("--paths", nargs="*", default=["test"])
    parser.add_argument("-n", "--workers", type=int, default=1)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--junit", nargs="+", type=pathlib.Path, metavar="REPORT",
                        help="read these JUnit reports (e.g. build/test-logs/*.xml) instead of running a tier")
    parser.add_argument("--before", nargs="+", type=pathlib.Path, default=[], metavar="REPORT",
                        help="with --junit: reports of an earlier run to compare with, per module")
    args = parser.parse_args()
    if args.junit:
        missing = [str(r) for r in [*args.junit, *args.before] if not r.is_file()]
        if missing:
            parser.error(f"no such report: {', '.join(missing)}")
        summarize_reports(args.junit, args.before, args.top)
        return 0
    markers = TIERS[args.tier]
    with tempfile.TemporaryDirectory() as scratch:
        report = pathlib.Path(scratch) / "junit.xml"
        wall = run_tier(markers, args.paths, args.workers, report)
        cases = read_cases(report)
    marks = marker_index(args.paths, markers)
    total = sum(t for _, t, _ in cases) or 1.0

    def marks_of(name: str) -> set[str]:
        module, _, test = name.partition("::")
        path = module.replace(".", "/") + ".py"
        return next((m for nodeid, m in marks.items() if nodeid.startswith(path) and nodeid.endswith(test)), set())

    print(f"tier {args.tier} (-m \"{markers}\"), {len(cases)} tests, {args.workers} worker(s), "
          f"load average {os.getloadavg()[0]:.1f}: wall {wall:.0f} s, summed test time {total:.0f} s "
          f"({total / wall:.2f} x wall); {sum(f for *_, f in cases)} failed")
    by_dir: collections.Counter[str] = collections.Counter()
    by_marker: collections.Counter[str] = collections.Counter()
    for name, seconds, _ in cases:
        by_dir[str(pathlib.Path(module_of(name)).parent)] += seconds
        for mark in marks_of(name) & {"ros", "slow", "mc", "netns", "serial"} or {"(plain)"}:
            by_marker[mark] += seconds
    for title, counter in (("per directory", by_dir), ("per marker", by_marker)):
        print(f"\n{title}:")
        for key, seconds in counter.most_common():
            print(f"  {seconds / total:6.1%}  {seconds:8.1f} s  {key}")
    print_slowest(cases, total, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
