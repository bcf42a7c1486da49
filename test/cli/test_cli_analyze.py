"""``evalstop analyze``: the installed console script against the core functions on the same data."""

from __future__ import annotations

import importlib
import pathlib

import numpy as np
import pytest

from evalstop_ros.stats.nscore import nscore_test
from evalstop_ros.stats.step import step_test

RNG = np.random.default_rng(4242)
# 45 Bernoulli pairs, B clearly better; every method decides on them.
A = (RNG.random(45) < 0.25).astype(int)
B = (RNG.random(45) < 0.85).astype(int)


def write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def wide_csv(tmp_path: pathlib.Path, a=A, b=B, header: str = "policy_a,policy_b") -> str:
    return write(tmp_path / "wide.csv", header + "\n" + "".join(f"{x},{y}\n" for x, y in zip(a, b)))


def long_csv(tmp_path: pathlib.Path, a=A, b=B) -> str:
    # trial ids are strings, rows interleaved out of order; pairs follow first appearance of ids
    rows = []
    for i, (x, y) in enumerate(zip(a, b)):
        rows += [f"t{i:03d},base,{x}", f"t{i:03d},new,{y}"] if i % 2 else [f"t{i:03d},new,{y}", f"t{i:03d},base,{x}"]
    return write(tmp_path / "long.csv", "trial,policy,score\n" + "\n".join(rows) + "\n")


# -- results equal the core ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], lambda: nscore_test(A, B, alpha=0.05)),
        (["--alternative", "greater", "--bins", "3"], lambda: nscore_test(A, B, alpha=0.05, alternative="greater", bins=3)),
        (["--n-max", "12"], lambda: nscore_test(A, B, alpha=0.05, n_max=12)),
    ],
)
def test_nscore_json_equals_core(evalstop, tmp_path, options, expected, stdout_json):
    payload = stdout_json(evalstop("analyze", wide_csv(tmp_path), "--method", "nscore", "--alpha", "0.05", *options, "--json"))
    assert payload["result"] == expected().to_dict()
    assert payload["data"] == {
        "path": str(tmp_path / "wide.csv"), "layout": "wide", "policy_a": "policy_a", "policy_b": "policy_b",
        "n_pairs": 45, "mean_a": float(A.mean()), "mean_b": float(B.mean()),
    }
    assert payload["validity"] == "anytime-valid"


def test_step_json_equals_core(evalstop_script, tmp_path, stdout_json):
    args = ("analyze", wide_csv(tmp_path), "--method", "step", "--alpha", "0.05", "--n-max", "45", "--seed", "7", "--json")
    payload = stdout_json(evalstop_script(*args))
    assert payload["result"] == step_test(A, B, alpha=0.05, n_max=45, seed=7).to_dict()
    assert payload["result"]["decision"] == "b_better"
    assert payload["settings"] == {"n_max": 45, "seed": 7, "bins": 2, "c": 0.95}


@pytest.mark.parametrize(
    ("method", "call", "options"),
    [
        ("wsr", lambda m: m.wsr_test(A, B, alpha=0.1, c=0.75), ["--wsr-c", "0.75"]),
        ("savi", lambda m: m.savi_test(A, B, alpha=0.1), []),
        ("lai", lambda m: m.lai_test(A, B, alpha=0.1, n_max=45), ["--n-max", "45"]),
    ],
)
def test_other_methods_json_equal_core(evalstop, tmp_path, method, call, options, stdout_json):
    module = importlib.import_module(f"evalstop_ros.stats.{method}")
    payload = stdout_json(evalstop("analyze", wide_csv(tmp_path), "--method", method, "--alpha", "0.1", *options, "--json"))
    assert payload["result"] == call(module).to_dict()


def test_long_layout_pairs_by_trial_id(evalstop, tmp_path, stdout_json):
    payload = stdout_json(evalstop("analyze", long_csv(tmp_path), "--method", "nscore", "--alpha", "0.05", "--json"))
    # 'new' appears first in the file, so it is policy A; pairs follow the trial ids
    assert (payload["data"]["policy_a"], payload["data"]["policy_b"]) == ("new", "base")
    assert payload["result"] == nscore_test(B, A, alpha=0.05).to_dict()
    assert payload["result"]["decision"] == "a_better"


def test_columns_orient_the_long_layout(evalstop, tmp_path, stdout_json):
    args = ("analyze", long_csv(tmp_path), "--method", "nscore", "--alpha", "0.05", "--columns", "base,new", "--json")
    payload = stdout_json(evalstop(*args))
    assert (payload["data"]["layout"], payload["data"]["policy_a"]) == ("long", "base")
    assert payload["result"] == nscore_test(A, B, alpha=0.05).to_dict()


def test_columns_pick_two_wide_columns(evalstop, tmp_path, stdout_json):
    rows = "".join(f"{i},{x},{y},{x}\n" for i, (x, y) in enumerate(zip(A, B)))
    path = write(tmp_path / "runs.csv", "episode,octo,openvla,copy\n" + rows)
    payload = stdout_json(evalstop("analyze", path, "--method", "nscore", "--alpha", "0.05", "--columns", "octo,openvla", "--json"))
    assert payload["result"] == nscore_test(A, B, alpha=0.05).to_dict()


def test_columns_pick_two_of_three_long_policies(evalstop, tmp_path, stdout_json):
    rows = "".join(f"{i},x,{a}\n{i},y,{b}\n{i},z,0.5\n" for i, (a, b) in enumerate(zip(A, B)))
    path = write(tmp_path / "three.csv", "trial,policy,score\n" + rows)
    payload = stdout_json(evalstop("analyze", path, "--method", "nscore", "--alpha", "0.05", "--columns", "x,y", "--json"))
    assert payload["result"] == nscore_test(A, B, alpha=0.05).to_dict()


# -- human output ------------------------------------------------------------------------------------

def test_human_output_shows_decision_and_sparse_path(evalstop, tmp_path):
    result = nscore_test(A, B, alpha=0.05)
    proc = evalstop("analyze", wide_csv(tmp_path), "--method", "nscore", "--alpha", "0.05")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'wide.csv'}: 45 pairs (wide); A = policy_a")
    assert lines[1] == "test: nscore, alpha 0.05, two-sided (anytime-valid)"
    assert lines[2] == f"decision: B_BETTER at trial {result.stopping_trial}: policy_b is better than policy_a"
    assert lines[3].startswith("guarantee: nscore: anytime-valid")
    rows = [line.split() for line in lines[5:]]
    trials = [int(row[0]) for row in rows]
    assert trials == [*range(10, result.stopping_trial, 10), result.stopping_trial]
    assert rows[-1][-2:] == ["<-", "stop"]
    assert float(rows[-1][1]) == pytest.approx(result.pvalue, rel=1e-3)


def test_human_output_for_step_says_no_pvalue(evalstop, tmp_path):
    proc = evalstop("analyze", wide_csv(tmp_path), "--method", "step", "--alpha", "0.05", "--n-max", "45")
    assert proc.returncode == 0, proc.stderr
    assert "valid within pre-declared N_max" in proc.stdout
    assert "guarantee: STEP: exact level at each of its planned looks, pair 1 to N_max = 45" in proc.stdout
    assert "no anytime p-value" in proc.stdout
    assert proc.stdout.rstrip().endswith("(step defines no p-value or e-value)")


def test_budget_exhausted_and_data_ran_out(evalstop, tmp_path):
    ties = wide_csv(tmp_path, a=[1] * 30, b=[1] * 30)
    budget = evalstop("analyze", ties, "--method", "nscore", "--alpha", "0.05", "--n-max", "20")
    assert "decision: BUDGET_EXHAUSTED: no decision within n_max = 20 trials" in budget.stdout
    ran_out = evalstop("analyze", ties, "--method", "nscore", "--alpha", "0.05")
    assert "decision: CONTINUE: no decision after all 30 pairs (the data ran out)" in ran_out.stdout
    assert ran_out.stdout.splitlines()[-1].split()[0] == "30"  # the last trial is always shown


# -- input errors --------------------------------------------------------------------------------------

def test_missing_file(evalstop, tmp_path, input_error):
    missing = str(tmp_path / "nope.csv")
    input_error(evalstop("analyze", missing, "--method", "nscore", "--alpha", "0.05"), "analyze",
                       f"cannot read {missing}: No such file or directory")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("policy_a,policy_b\n0,1\n1,nan\n", ["line 3, column 'policy_b'", "must be finite; found 'nan'"]),
        ("policy_a,policy_b\n0,1\n1.2,1\n", ["line 3, column 'policy_a'", "must lie in [0, 1]; found '1.2'"]),
        # unequal pairs: a trailing score of one policy only (wide), a trial of one policy (long)
        ("policy_a,policy_b\n0,1\n1,\n", ["line 3, column 'policy_b'", "the score is empty"]),
        ("trial,policy,score\n1,x,0\n1,y,1\n2,x,1\n", ["line 4: trial '2' has a score for 'x' only"]),
    ],
)
def test_bad_data(evalstop, tmp_path, text, fragments, input_error):
    # the loader's other messages are unit-tested in test_cli_data.py
    path = write(tmp_path / "bad.csv", text)
    input_error(evalstop("analyze", path, "--method", "nscore", "--alpha", "0.05"), "analyze", path, *fragments)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--method", "nscore", "--alpha", "1.5"], "`alpha` must lie in (0, 1); found 1.5"),
        (["--method", "step", "--alpha", "0.05"], "`n_max` is required for method 'step'"),
        (["--method", "nscore", "--alpha", "0.05", "--bins", "1"], "argument --bins: must lie in [2, 10000]; found 1"),
        (["--method", "wsr", "--alpha", "0.05", "--wsr-c", "2"], "`c` must lie in (0, 1); found 2.0"),
    ],
)
def test_bad_options_are_reported_by_the_core(evalstop, tmp_path, options, fragment, input_error):
    input_error(evalstop("analyze", wide_csv(tmp_path), *options), "analyze", fragment)


def test_step_refuses_non_binary_scores(evalstop, tmp_path, input_error):
    path = wide_csv(tmp_path, a=[0.5, 1], b=[1, 1])
    input_error(evalstop("analyze", path, "--method", "step", "--alpha", "0.05", "--n-max", "10"), "analyze", "must be 0 or 1")


def test_usage_error_from_argparse(evalstop, tmp_path):
    proc = evalstop("analyze", wide_csv(tmp_path), "--method", "ttest", "--alpha", "0.05")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "invalid choice: 'ttest'" in proc.stderr


def test_help_shows_defaults_and_an_example(evalstop):
    proc = evalstop("analyze", "--help")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "(default 0)" in proc.stdout and "(default two-sided)" in proc.stdout
    assert "evalstop analyze examples/progress_like.csv --method nscore --bins 21" in proc.stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--method", "step", "--n-max", "2000000"], "argument --n-max: must lie in [1, 100000]; found 2000000"),
    (["--method", "step", "--n-max", "20000"], "--n-max 20000 is too large for STEP"),
    (["--method", "nscore", "--n-max", "0"], "argument --n-max: must lie in [1, 100000]; found 0"),
])
def test_n_max_is_bounded_with_a_clear_error(evalstop, tmp_path, argv, message):
    result = evalstop("analyze", wide_csv(tmp_path), "--alpha", "0.05", *argv)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
