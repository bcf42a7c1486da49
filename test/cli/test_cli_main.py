"""``evalstop`` itself: version, help, the verb list and the exit status of ``main``."""

from __future__ import annotations

import subprocess
import sys

from evalstop_ros import __version__
from evalstop_ros.cli.main import main


def test_version(evalstop_script):
    proc = evalstop_script("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"evalstop {__version__}\n", "")


def test_help_lists_verbs_and_exit_codes(evalstop):
    proc = evalstop("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    for verb in ("analyze", "simulate", "step"):
        assert f"    {verb}" in proc.stdout
    codes = proc.stdout.split("exit status")[1]
    for code in ("0    done", "1    a check failed", "2    usage or input error", "3    a service cannot start",
                 "130  interrupted", "141  stdout closed early"):
        assert f"\n  {code}" in codes, code


def test_no_verb_is_a_usage_error(evalstop_script):
    proc = evalstop_script()
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the following arguments are required" in proc.stderr


def test_main_returns_the_status_instead_of_exiting(capsys):
    assert main(["--version"]) == 0
    assert main(["analyze"]) == 2  # missing the data file and --method
    assert main(["simulate", "--method", "nscore", "--n-max", "5", "--alpha", "2", "--reps", "3", "--p0", "0.1", "--p1", "0.2"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "evalstop simulate: error: `alpha` must lie in (0, 1); found 2.0"


def _modules_loaded_by(*argv: str) -> set[str]:
    """Top-level packages imported by ``evalstop ARGV`` in a fresh interpreter."""
    code = (
        "import sys, contextlib, io\n"
        "from evalstop_ros.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({list(argv)!r})\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(proc.stdout.split())


def test_help_and_audit_help_import_only_what_they_need():
    """Issue 14: a verb imports only what it needs -- no numpy/scipy/pydantic/rosbags for help."""
    for argv in (("--help",), ("audit", "--help"), ("step", "--help")):
        heavy = _modules_loaded_by(*argv) & {"numpy", "scipy", "pydantic", "rosbags", "tqdm", "matplotlib"}
        if argv[0] == "step":  # the step verb declares numpy-typed options: numpy, never scipy
            heavy -= {"numpy"}
        assert not heavy, (argv, heavy)


def test_line_progress_reports_to_a_log(capsys):
    """Issue 14: without a terminal, long work prints progress lines on stderr (never stdout)."""
    from evalstop_ros.cli._common import LineProgress, step_callback

    progress = LineProgress(total=4, unit="step", interval=0.0)
    update = step_callback(progress)
    for done in range(1, 5):
        update(done)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("evalstop: 4/4 steps (100%)")
