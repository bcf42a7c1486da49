"""``evalstop step synthesize|check|oc``: the installed console script against the STEP core."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from evalstop_ros.stats.step import StepTable, check_type1, load_table, operating_characteristics

N_MAX = 24  # small: synthesis takes well under a second


def test_synthesize_writes_the_table_into_the_cache(evalstop, tmp_path, monkeypatch, stdout_json):
    # a cache of its own, so that this test sees a true first synthesis
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(cache))
    args = ("step", "synthesize", "--n-max", "17", "--alpha", "0.05", "--json")
    first = stdout_json(evalstop(*args))
    path = pathlib.Path(first["path"])
    assert path.parent == cache and path.is_file()
    assert first["synthesized"] is True
    # a two-sided test at 0.05 uses the table at 0.025 per direction
    assert (first["n_max"], first["table_alpha"], first["alternative"]) == (17, 0.025, "two-sided")
    table = StepTable.load(path)
    assert first["param_hash"] == table.param_hash == load_table(17, 0.025).param_hash

    again = stdout_json(evalstop(*args))
    assert again["synthesized"] is False and again["path"] == first["path"]
    forced = stdout_json(evalstop(*args, "--force"))
    assert forced["synthesized"] is True and forced["param_hash"] == first["param_hash"]


def test_synthesize_human_output(evalstop):
    proc = evalstop("step", "synthesize", "--n-max", str(N_MAX), "--alpha", "0.1", "--alternative", "greater")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    table = load_table(N_MAX, 0.1)
    assert lines[0] == f"STEP table n_max {N_MAX}, alpha 0.1 per direction (greater test at 0.1), hash {table.param_hash[:12]}"
    assert lines[1].split(": ")[0] in {"synthesized", "already present"}
    assert lines[2] == f"param_hash {table.param_hash}"
    assert lines[3].startswith("time ") and lines[3].endswith(" s")


def test_check_passes_and_equals_core(evalstop_script, stdout_json):
    payload = stdout_json(evalstop_script("step", "check", "--n-max", str(N_MAX), "--alpha", "0.05", "--grid-size", "300", "--json"))
    report = check_type1(load_table(N_MAX, 0.025), grid_size=300)
    assert payload["max_fpr"] == report.max_fpr and payload["argmax_p"] == report.argmax_p
    assert payload["passes"] is True and payload["max_fpr"] <= 0.025
    human = evalstop_script("step", "check", "--n-max", str(N_MAX), "--alpha", "0.05", "--grid-size", "300")
    assert human.returncode == 0
    assert human.stdout.splitlines()[-1] == "PASS: bound alpha = 0.025"


def test_check_fails_on_a_tampered_table(evalstop, tmp_path, monkeypatch):
    # Reject as soon as S1 > S0: an error rate far above alpha.  The file keeps its name (the
    # parameter hash), so only the exact check can notice.
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path))
    table = load_table(12, 0.05)
    StepTable(
        n_max=table.n_max, alpha=table.alpha, parameters=table.parameters,
        thresholds=np.ones_like(table.thresholds), exc_step=table.exc_step[:0], exc_a=table.exc_a[:0],
        exc_gap=table.exc_gap[:0], exc_weight=table.exc_weight[:0],
    ).save(tmp_path)
    args = ("step", "check", "--n-max", "12", "--alpha", "0.05", "--alternative", "greater", "--grid-size", "50")
    proc = evalstop(*args)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1] == "FAIL: bound alpha = 0.05"
    failed = evalstop(*args, "--json")
    assert failed.returncode == 1
    payload = json.loads(failed.stdout)
    assert payload["passes"] is False and payload["max_fpr"] > 0.3


def test_oc_equals_core(evalstop, stdout_json):
    payload = stdout_json(evalstop("step", "oc", "--n-max", str(N_MAX), "--alpha", "0.05", "--p0", "0.2", "--p1", "0.8", "--json"))
    oc = operating_characteristics(load_table(N_MAX, 0.025), 0.2, 0.8)
    assert payload["power_b_better"] == float(oc.power_b_better[0])
    assert payload["power_a_better"] == float(oc.power_a_better[0])
    assert payload["expected_stop"] == float(oc.expected_stop[0])
    assert payload["power_b_better"] > 0.8
    human = evalstop("step", "oc", "--n-max", str(N_MAX), "--alpha", "0.05", "--p0", "0.2", "--p1", "0.8")
    assert f"P(B better)  {payload['power_b_better']:.4f}" in human.stdout
    assert f"E[stop]      {payload['expected_stop']:.2f} trials" in human.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["check", "--n-max", "10", "--alpha", "1.5"], "`alpha` must lie in (0, 1); found 1.5"),
        (["oc", "--n-max", str(N_MAX), "--alpha", "0.05", "--p0", "1.1", "--p1", "0.2"], "`p0` must lie in [0, 1]"),
    ],
)
def test_input_errors(evalstop, args, fragment, input_error):
    input_error(evalstop("step", *args), "step", fragment)


def test_n_max_out_of_range_is_a_usage_error(evalstop):
    proc = evalstop("step", "oc", "--n-max", "0", "--alpha", "0.05", "--p0", "0.1", "--p1", "0.2")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "argument --n-max: must lie in [1, 100000]; found 0" in proc.stderr


def test_missing_sub_verb_is_a_usage_error(evalstop):
    proc = evalstop("step")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the following arguments are required" in proc.stderr
