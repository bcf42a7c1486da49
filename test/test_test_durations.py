"""``tools/test_durations.py --junit``: where the time of ``make test``'s runs went, from their JUnit reports."""

from __future__ import annotations

import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[1] / "tools" / "test_durations.py"


def _report(path: pathlib.Path, cases: dict[str, float]) -> pathlib.Path:
    rows = "".join(f'<testcase classname="{name.split("::")[0]}" name="{name.split("::")[1]}" time="{seconds}"/>'
                   for name, seconds in cases.items())
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{rows}</testsuite></testsuites>')
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_runs_modules_and_tests_are_summed_with_their_shares(tmp_path: pathlib.Path) -> None:
    ros = _report(tmp_path / "kilted-ros.xml", {"test.nodes.test_a::test_one": 30.0, "test.nodes.test_a::test_two": 10.0})
    rest = _report(tmp_path / "kilted-rest.xml", {"test.stats.test_b::test_three": 60.0})
    done = _run("--junit", str(ros), str(rest), "--top", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "2 report(s), 3 tests, summed test time 100 s" in lines[0]
    assert any("40.0%" in line and "40.0 s" in line and "kilted-ros (2 tests)" in line for line in lines)
    assert any("60.0%" in line and "test/stats/test_b.py" in line for line in lines)
    slowest = lines[lines.index("slowest 5 tests:") + 1]
    assert "test.stats.test_b::test_three" in slowest


def test_before_and_after_compare_per_module_largest_saving_first(tmp_path: pathlib.Path) -> None:
    before = _report(tmp_path / "before.xml", {"test.nodes.test_a::test_one": 30.0, "test.nodes.test_c::test_x": 5.0})
    after = _report(tmp_path / "after.xml", {"test.nodes.test_a::test_one": 12.0, "test.nodes.test_c::test_x": 6.0})
    done = _run("--junit", str(after), "--before", str(before))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("before -> after (summed test time): 35 s -> 18 s")
    assert "(   -18.0 s)  test/nodes/test_a.py" in lines[start + 1]
    assert "(    +1.0 s)  test/nodes/test_c.py" in lines[start + 2]


def test_a_missing_report_is_one_line_and_status_2(tmp_path: pathlib.Path) -> None:
    done = _run("--junit", str(tmp_path / "missing.xml"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith(f"error: no such report: {tmp_path / 'missing.xml'}")
