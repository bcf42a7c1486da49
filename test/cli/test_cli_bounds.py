"""Every size an ``evalstop`` verb takes is bounded: one line on stderr, exit 2, no traceback
(issue 19: ``--bins 1000000000`` gave a numpy traceback)."""

from __future__ import annotations

import pytest

CASES = {
    "analyze --bins": (["analyze", "x.csv", "--method", "nscore", "--alpha", "0.05", "--bins", "1000000000"],
                       "argument --bins: must lie in [2, 10000]; found 1000000000"),
    "analyze --seed": (["analyze", "x.csv", "--method", "step", "--alpha", "0.05", "--seed", "-1"],
                       "argument --seed: must lie in [0, 18446744073709551615]; found -1"),
    "analyze --n-max": (["analyze", "x.csv", "--method", "nscore", "--alpha", "0.05", "--n-max", "1e12"],
                        "argument --n-max: expected a whole number of trials; found '1e12'"),
    "simulate --bins": (["simulate", "--method", "nscore", "--alpha", "0.05", "--n-max", "10", "--reps", "5",
                         "--bins", "1000000000"], "argument --bins: must lie in [2, 10000]; found 1000000000"),
    "simulate --reps": (["simulate", "--method", "nscore", "--alpha", "0.05", "--n-max", "10", "--reps",
                         "1000000000000"], "argument --reps: must lie in [1, 10000000]; found 1000000000000"),
    "simulate --chunk": (["simulate", "--method", "nscore", "--alpha", "0.05", "--n-max", "10", "--reps", "5",
                          "--chunk", "0"], "argument --chunk: must lie in [1, 10000000]; found 0"),
    "step --n-max": (["step", "oc", "--n-max", "1000000000"], "argument --n-max: must lie in [1, 100000]"),
    "adastop --interims": (["adastop", "x.csv", "--n-per-interim", "5", "--interims", "100000000", "--alpha", "0.05"],
                           "argument --interims: must lie in [1, 1000]; found 100000000"),
    "adastop --permutations": (["adastop", "x.csv", "--n-per-interim", "5", "--interims", "2", "--alpha", "0.05",
                                "--permutations", "10000000000"], "argument --permutations: must lie in [1, 100000]"),
    "rank --n-boot": (["rank", "x.csv", "--n-boot", "-1"], "argument --n-boot: must lie in [0, 1000000]; found -1"),
    "rank --buckets": (["rank", "x.csv", "--buckets", "100000000"], "argument --buckets: must lie in [1, 1000]"),
    "hub --port": (["hub", "serve", "--port", "70000"], "argument --port: must lie in [0, 65535]; found 70000"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_size_out_of_range_is_one_line_and_exit_2(evalstop, case):
    argv, message = CASES[case]
    proc = evalstop(*argv)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line: no usage block, no traceback
    assert message in proc.stderr and proc.stderr.startswith("evalstop "), proc.stderr
