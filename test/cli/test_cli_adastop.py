"""``evalstop adastop``: the installed console script against adastop_test on the same data."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from evalstop_ros.stats.adastop import adastop_test

RNG = np.random.default_rng(55)
NAMES = ["PPO", "SAC", "DDPG"]
# SAC far ahead (leaves after interim 1), PPO and DDPG close: 6 interims of 5 runs
SCORES = RNG.normal([2500.0, 10000.0, 2600.0], 600.0, size=(30, 3)).round(3)
DESIGN = ["--n-per-interim", "5", "--interims", "6", "--alpha", "0.05"]


def write_csv(path: pathlib.Path, scores=SCORES, names=NAMES, index=False, blank_after=None) -> str:
    """Wide CSV; ``index`` adds pandas' unnamed index column; ``blank_after`` {agent: row} empties cells."""
    lines = [("," if index else "") + ",".join(names)]
    for i, row in enumerate(scores):
        cells = [
            "" if blank_after and names[j] in blank_after and i >= blank_after[names[j]] else repr(float(v))
            for j, v in enumerate(row)
        ]
        lines.append((f"{i}," if index else "") + ",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_json_equals_core(evalstop_script, tmp_path, stdout_json):
    payload = stdout_json(evalstop_script("adastop", write_csv(tmp_path / "s.csv"), *DESIGN, "--json"))
    expected = adastop_test(SCORES, n_per_interim=5, n_interims=6, alpha=0.05, agent_names=NAMES)
    core = expected.to_dict()
    assert {k: payload[k] for k in core} == core
    assert payload["letters"] == expected.letters() and payload["permutation"] == "closed"
    assert payload["stopped_early"] == ["SAC"]  # SAC's comparisons decided at interim 1


def test_index_column_and_empty_cells_of_a_stopped_agent(evalstop, tmp_path, stdout_json):
    # the cells of SAC after interim 1 are not needed: empty cells are fine
    plain = stdout_json(evalstop("adastop", write_csv(tmp_path / "a.csv"), *DESIGN, "--json"))
    blank = write_csv(tmp_path / "b.csv", index=True, blank_after={"SAC": 5})
    payload = stdout_json(evalstop("adastop", blank, *DESIGN, "--json"))
    assert payload["comparisons"] == plain["comparisons"]
    assert payload["agents_detail"]["SAC"] == {"last_interim": 1, "mean": pytest.approx(SCORES[:5, 1].mean()), "n_scores": 5}


def test_human_table(evalstop, tmp_path):
    proc = evalstop("adastop", write_csv(tmp_path / "s.csv"), *DESIGN)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    expected = adastop_test(SCORES, n_per_interim=5, n_interims=6, alpha=0.05, agent_names=NAMES)
    assert lines[0].endswith(f"finished after interim {expected.interim}")
    assert any(line.startswith("PPO vs SAC") and "smaller" in line and " 1 " in line for line in lines)
    assert "stopped early: SAC (after interim 1)" in proc.stdout


def test_partial_data_reports_the_agents_needed_next(evalstop, tmp_path, stdout_json):
    payload = stdout_json(evalstop("adastop", write_csv(tmp_path / "p.csv", scores=SCORES[:10]), *DESIGN, "--json"))
    assert payload["is_finished"] is False and payload["interim"] == 2
    assert payload["active_agents"] == ["PPO", "DDPG"] and payload["letters"] is None


def test_baseline_compares_to_one_agent(evalstop, tmp_path, stdout_json):
    payload = stdout_json(evalstop("adastop", write_csv(tmp_path / "s.csv"), *DESIGN, "--baseline", "SAC", "--json"))
    assert [(c["agent_1"], c["agent_2"]) for c in payload["comparisons"]] == [("SAC", "PPO"), ("SAC", "DDPG")]
    assert [c["decision"] for c in payload["comparisons"]] == ["larger", "larger"]


@pytest.mark.parametrize(
    ("content", "options", "fragments"),
    [
        ("PPO\n1\n", [], ["line 1: the header must name at least two agents"]),
        ("PPO,PPO\n1,2\n", [], ["agent names must be distinct"]),
        ("PPO,SAC\n1,x\n", [], ["line 2, agent 'SAC': the score must be a number; found 'x'"]),
        ("PPO,SAC\n1,inf\n", [], ["the score must be finite; found 'inf'"]),
        ("PPO,SAC\n1,2,3\n", [], ["line 2: 3 cells for 2 agents"]),
        ("PPO,SAC\n" + "1,2\n" * 7, [], ["whole interims of n_per_interim=5 rows; found 7 rows"]),
        ("PPO,SAC\n" + "1,2\n" * 5, ["--baseline", "TD3"], ["--baseline must be one of the agents", "'TD3'"]),
        ("PPO,SAC\n" + "1,\n" * 5, [], ["finite for agent 'SAC', which interim 1 needs; found nan", "(rows 1-5 of `scores`)"]),
        ("", [], ["the file is empty"]),
    ],
)
def test_input_errors(evalstop, tmp_path, input_error, content, options, fragments):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    input_error(evalstop("adastop", str(path), *DESIGN, *options), "adastop", *fragments)


def test_missing_file_and_bad_alpha(evalstop, tmp_path, input_error):
    input_error(evalstop("adastop", str(tmp_path / "none.csv"), *DESIGN), "adastop", "cannot read")
    path = write_csv(tmp_path / "s.csv")
    input_error(evalstop("adastop", path, "--n-per-interim", "5", "--interims", "6", "--alpha", "1.5"),
                "adastop", "`alpha` must lie in (0, 1); found 1.5")


def test_output_states_the_guarantee_and_warns_of_unequal_spreads_at_small_n(evalstop, tmp_path, stdout_json):
    # one tight agent (sd 0.1) beside two wide ones (sd 1), 10 scores each: one warning line
    scores = np.random.default_rng(3).normal(0.0, [0.1, 1.0, 1.0], size=(10, 3))
    proc = evalstop("adastop", write_csv(tmp_path / "w.csv", scores=scores), "--n-per-interim", "5", "--interims", "2",
                    "--alpha", "0.05")
    assert proc.returncode == 0
    assert "guarantee (closed): exact for every N" in proc.stdout
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning: spreads differ")]
    assert len(warnings) == 1 and "of PPO" in warnings[0] and "10 scores per agent" in warnings[0]
    payload = stdout_json(evalstop("adastop", str(tmp_path / "w.csv"), "--n-per-interim", "5", "--interims", "2",
                                   "--alpha", "0.05", "--json"))
    assert payload["warnings"] == warnings and "Welch" in payload["guarantee"]
    # equal spreads (the module's data): the guarantee, no warning
    quiet = stdout_json(evalstop("adastop", write_csv(tmp_path / "s.csv"), *DESIGN, "--json"))
    assert quiet["warnings"] == []
