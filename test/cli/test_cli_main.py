"""``evalstop`` itself: version, help, the verb list and the exit status of ``main``."""

from __future__ import annotations

from evalstop_ros import __version__
from evalstop_ros.cli.main import main


def test_version(evalstop):
    proc = evalstop("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"evalstop {__version__}\n", "")


def test_help_lists_verbs_and_exit_codes(evalstop):
    proc = evalstop("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    for verb in ("analyze", "simulate", "step"):
        assert f"    {verb}" in proc.stdout
    assert "exit status: 0 done, 1 a check failed (step check), 2 usage or input error." in proc.stdout


def test_no_verb_is_a_usage_error(evalstop):
    proc = evalstop()
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the following arguments are required" in proc.stderr


def test_main_returns_the_status_instead_of_exiting(capsys):
    assert main(["--version"]) == 0
    assert main(["analyze"]) == 2  # missing the data file and --method
    assert main(["simulate", "--method", "nscore", "--n-max", "5", "--alpha", "2", "--reps", "3", "--p0", "0.1", "--p1", "0.2"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "evalstop simulate: error: `alpha` must lie in (0, 1); found 2.0"
