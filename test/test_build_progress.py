"""tools/build_progress.py: the first build's progress lines (make venv / make ros), its log and exit status."""

from __future__ import annotations

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "build_progress.py"


def _run(tmp_path: pathlib.Path, kind: str, shell: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--kind", kind, "--log", str(tmp_path / "step.log"),
                           "--label", "[2/2] the step", "--", "bash", "-c", shell],
                          capture_output=True, text=True, timeout=60, check=False)


def test_colcon_progress_per_tenth_of_each_package_with_the_time_left(tmp_path: pathlib.Path) -> None:
    script = ("for p in composition_interfaces evalstop; do echo \"Starting >>> $p\"; "
              "for i in 3 12 18 47 100; do echo \"[ $i%] Built target x\"; done; echo \"Finished <<< $p [1s]\"; done")
    done = _run(tmp_path, "colcon", script)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"[2/2] the step (log: {tmp_path / 'step.log'})"
    for package in ("composition_interfaces", "evalstop"):  # each package counted from 0 %
        shown = [line.split()[2] for line in lines if line.startswith(f"  colcon: {package} ")]
        assert shown == ["12", "47", "100"], lines
    assert all("s left" in line for line in lines if " % after " in line)
    assert "Finished <<< evalstop" in done.stdout and lines[-1].startswith("  done in ")
    assert (tmp_path / "step.log").read_text().count("Built target") == 10  # the whole output in the log


def test_pip_progress_and_a_failure_with_its_log_tail_and_status(tmp_path: pathlib.Path) -> None:
    done = _run(tmp_path, "pip", "for i in $(seq 23); do echo \"Collecting pkg$i\"; done; "
                "echo 'Installing collected packages: pkg1'; echo 'ERROR: no space left'; exit 3")
    assert done.returncode == 3
    assert "  pip: 10 packages collected" in done.stdout and "  pip: 20 packages collected" in done.stdout
    assert "  pip: installing the 23 packages collected" in done.stdout
    assert "ERROR: no space left" in done.stderr and f"(exit 3); the whole output: {tmp_path / 'step.log'}" in done.stderr


def test_a_tag_names_the_build_on_every_progress_line(tmp_path: pathlib.Path) -> None:
    """Two builds side by side (``make test``'s prerequisites under ``make -j``) tell their lines apart."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--kind", "pip", "--tag", ".venv-jazzy", "--log",
                           str(tmp_path / "step.log"), "--", "bash", "-c",
                           "for i in $(seq 10); do echo \"Collecting pkg$i\"; done"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" after ")[0].split(" in ")[0] for line in lines] == [
        "  .venv-jazzy: pip: 10 packages collected", "  .venv-jazzy: done"], lines
