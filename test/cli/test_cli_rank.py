"""Tests of ``evalstop rank``: the installed console script against the core (seed 001 Sec. 3.2)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from evalstop_ros.stats.ranking import comparisons
from evalstop_ros.stats.ranking_fits import fit_bt, fit_davidson, fit_elo, fit_paired_progress, fit_prog
from evalstop_ros.stats.ranking_task import TaskModelOptions, fit_task

HEADER = "policy_a,policy_b,preference,progress_a,progress_b,task,valid\n"
ROWS = [
    ("octo", "pi0", "B", 20, 80, "put the cup in the bowl", 1),
    ("pi0", "fast", "tie", 100, 100, "open the drawer", 1),
    ("fast", "octo", "A", 60, 10, "fold the towel", 1),
    ("pi0", "octo", "A", 90, "", "wipe the table", 1),
    ("octo", "fast", "b", 0, 40, "stack the blocks", 1),
    ("fast", "pi0", "B", 30, 70, "pick the marker", 1),
    ("octo", "pi0", "A", 100, 0, "junk: robot e-stopped", 0),
    ("pi0", "fast", "A", 75, 50, "move the bowl left", 1),
]


def arena_csv(tmp_path: pathlib.Path, rows: list[tuple[object, ...]] = ROWS) -> str:
    path = tmp_path / "arena.csv"
    path.write_text(HEADER + "".join(",".join(str(cell) for cell in row) + "\n" for row in rows))
    return str(path)


def expected_data():  # the valid rows, as the core reads them
    valid = [row for row in ROWS if row[6] == 1]
    progress = [[np.nan if row[k] == "" else row[k] / 100 for row in valid] for k in (3, 4)]
    return comparisons(
        [row[0] for row in valid], [row[1] for row in valid], [{"b": "B"}.get(row[2], row[2]) for row in valid],
        progress_a=progress[0], progress_b=progress[1], tasks=[row[5] for row in valid],
    )


@pytest.mark.parametrize(
    ("model", "core"),
    [
        ("bt", lambda d: fit_bt(d)),
        ("davidson", lambda d: fit_davidson(d)),
        ("elo", lambda d: fit_elo(d, n_boot=200, seed=0)),
        ("prog", lambda d: fit_prog(d)),
        ("paired", lambda d: fit_paired_progress(d)),
        ("task", lambda d: fit_task(d, TaskModelOptions(partial_weight=1.0)).ranking),
    ],
)
def test_json_equals_the_core(evalstop, tmp_path, stdout_json, model, core):
    payload = stdout_json(evalstop("rank", arena_csv(tmp_path), "--model", model, "--json"))
    assert payload["model"] == model
    assert (payload["n_comparisons"], payload["n_invalid"]) == (7, 1)
    expected = core(expected_data()).table()
    assert [row["policy"] for row in payload["ranking"]] == [row["policy"] for row in expected]
    assert payload["win_rates"]["policies"] == ["fast", "octo", "pi0"]
    assert payload["win_rates"]["games"] == [[0, 2, 3], [2, 0, 2], [3, 2, 0]]
    assert payload["n_notes"] == {"fast": 0, "octo": 0, "pi0": 0} and "notes" not in payload
    assert payload["data_note"] == ""
    ranking = core(expected_data())
    low, high = ranking.interval(0.95)
    assert payload["interval"] == {"level": 0.95, "se_method": ranking.se_method, "calibrated": True}
    for got, want in zip(payload["ranking"], expected):
        assert set(got) == {"policy", "score", "se", "rank", "low", "high"}
        assert got["score"] == pytest.approx(want["score"], rel=1e-9, abs=1e-12)
        assert got["rank"] == want["rank"]
        k = ranking.policies.index(got["policy"])
        if got["se"] is not None:
            assert (got["low"], got["high"]) == pytest.approx((low[k], high[k]), rel=1e-9)


def test_human_output_is_a_leaderboard(evalstop_script, tmp_path):
    proc = evalstop_script("rank", arena_csv(tmp_path), "--model", "bt")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("7 valid comparisons of 3 policies (1 invalid set aside); model bt")
    assert lines[1].split() == ["rank", "policy", "score", "se", "95%", "interval", "games", "win", "rate"]
    best_first = [row["policy"] for row in fit_bt(expected_data()).table()]
    assert [line.split()[1] for line in lines[2:5]] == best_first
    assert lines[6].startswith("95% intervals: score -+ t(df) (Student t, each policy's df; 1.96 as df grows) se, "
                               "se by HC2 sandwich")
    assert lines[8].startswith("win rate of the row policy against the column policy")
    assert lines[9].split() == best_first
    # octo (last) against pi0 (first): won 0 of 2 (lines 2 and 4 of the file; the invalid row is out)
    octo = lines[12].split()
    assert octo[0] == "octo" and octo[1:3] == ["0.00", "(2)"]
    # every policy here played only 4-5 comparisons: the small-sample correction (HC2, Bell-McCaffrey
    # df) holds coverage there (docs/ranking.md), so no caveat is printed, and the t quantile is wide
    assert len(lines) == 13 and not any(line.startswith("note:") for line in lines)
    ranking = fit_bt(expected_data())
    low, high = ranking.interval(0.95)
    assert ranking.df is not None and np.all(ranking.df < 5)  # 4-5 comparisons each: a few df
    assert np.all((high - low) / 2 > 1.4 * 1.96 * ranking.se)


def test_default_model_is_paired_and_needs_progress(evalstop, tmp_path, stdout_json, input_error):
    # the default follows docs/ranking_study.md; without progress scores it says what to use instead
    payload = stdout_json(evalstop("rank", arena_csv(tmp_path), "--json"))
    assert payload["model"] == "paired"
    path = tmp_path / "prefs.csv"
    path.write_text("policy_a,policy_b,preference,progress_a,progress_b\na,b,A,,\nb,a,tie,,\n")
    input_error(evalstop("rank", str(path)), "rank", "no comparison with both progress scores", "bt or davidson")


def test_prog_prints_its_bootstrap_t_interval(evalstop, tmp_path):
    # PROG's interval is the symmetric bootstrap-t (issue 20), Hall's skewness-corrected t where a policy
    # has too few rollouts for it (here pi0, 3 rollouts) and with --n-boot 0: the footer says which
    proc = evalstop("rank", arena_csv(tmp_path), "--model", "prog")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[6].startswith("95% intervals: score -+ q se, q each policy's bootstrap-t")
    ranking = fit_prog(expected_data())
    low, high = ranking.interval(0.95)
    assert ranking.boot_t is not None and np.isfinite(ranking.boot_t[949]).sum() == 2
    boot = np.isfinite(ranking.boot_t[949])
    assert np.isfinite(low).all() and np.allclose((high - ranking.scores)[boot], (ranking.scores - low)[boot])
    hall_low, hall_high = fit_prog(expected_data(), n_boot=0).interval(0.95)
    assert np.allclose(low[~boot], hall_low[~boot]) and np.allclose(high[~boot], hall_high[~boot])
    for line in lines[2:5]:
        k = ranking.policies.index(line.split()[1])
        assert line.split()[4:6] == [f"[{low[k]:.3f},", f"{high[k]:.3f}]"]
    proc = evalstop("rank", arena_csv(tmp_path), "--model", "prog", "--n-boot", "0")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[6].startswith("95% intervals: Hall's skewness-corrected t on score and se")
    hall = fit_prog(expected_data(), n_boot=0)
    low, high = hall.interval(0.95)
    assert (high - hall.scores != hall.scores - low).any()  # asymmetric
    for line in lines[2:5]:
        k = hall.policies.index(line.split()[1])
        assert line.split()[4:6] == [f"[{low[k]:.3f},", f"{high[k]:.3f}]"]


def test_level_is_printed_and_used(evalstop, tmp_path, stdout_json):
    proc = evalstop("rank", arena_csv(tmp_path), "--model", "bt", "--level", "0.8")
    lines = proc.stdout.splitlines()
    assert lines[1].split()[4:6] == ["80%", "interval"] and lines[6].startswith("80% intervals: score -+ t(df) (Student t, each policy's df; 1.28 as df grows)")
    payload = stdout_json(evalstop("rank", arena_csv(tmp_path), "--model", "bt", "--level", "0.8", "--json"))
    low, high = fit_bt(expected_data()).interval(0.8)
    assert sorted(row["low"] for row in payload["ranking"]) == pytest.approx(sorted(low))


def test_task_model_without_bootstrap_prints_no_interval(evalstop, tmp_path, stdout_json):
    proc = evalstop("rank", arena_csv(tmp_path), "--model", "task", "--n-boot", "0")
    lines = proc.stdout.splitlines()
    assert "no interval" in lines[1] and lines[6].startswith("no intervals: se by conditional information")
    payload = stdout_json(evalstop("rank", arena_csv(tmp_path), "--model", "task", "--n-boot", "0", "--json"))
    assert payload["interval"]["calibrated"] is False and all(row["low"] is None for row in payload["ranking"])


def test_task_model_reports_bootstrap_progress(evalstop, tmp_path):
    proc = evalstop("rank", arena_csv(tmp_path), "--model", "task", "--n-boot", "20")
    assert proc.returncode == 0 and "task model: bootstrap refit 20/20" in proc.stderr


@pytest.mark.parametrize(
    ("rows", "fragments"),
    [
        ([("a", "b", "left", 1, 2, "t", 1)], ["line 2", "preference must be A, B or tie; found 'left'"]),
        ([("a", "b", "A", 101, 2, "t", 1)], ["line 2, column 'progress_a'", "[0, 100]; found '101'"]),
        ([("a", "b", "A", 1, 2, "t", "maybe")], ["column 'valid'", "found 'maybe'"]),
        ([("a", "a", "A", 1, 2, "t", 1)], ["line 2", "compared with itself"]),
        ([("a", "b", "A", 1, 2, "t", 0)], ["no valid comparisons (1 rows marked invalid)"]),
        ([("a", "b", "A", 1, "t", 1)], ["line 2: expected 7 fields"]),
    ],
)
def test_input_errors_name_the_line(evalstop, tmp_path, input_error, rows, fragments):
    input_error(evalstop("rank", arena_csv(tmp_path, rows)), "rank", *fragments)


def test_bad_level_and_n_boot(evalstop, tmp_path, input_error):
    input_error(evalstop("rank", arena_csv(tmp_path), "--level", "95"), "rank", "--level must lie in (0, 1); found 95.0")
    input_error(evalstop("rank", arena_csv(tmp_path), "--model", "task", "--n-boot", "1"), "rank",
                "`n_boot` must be 0 (no bootstrap) or an integer >= 2; found 1")


def test_header_errors(evalstop, tmp_path, input_error):
    path = tmp_path / "bad.csv"
    path.write_text("policy_a,policy_b,preference\na,b,A\n")
    input_error(evalstop("rank", str(path)), "rank", "the header lacks progress_a, progress_b")
    input_error(evalstop("rank", str(tmp_path / "missing.csv")), "rank", "cannot read")


def test_explanations_are_grouped_per_policy(evalstop, tmp_path, stdout_json):
    path = tmp_path / "notes.csv"
    path.write_text("policy_a,policy_b,preference,progress_a,progress_b,explanation\n"
                    "x,y,A,100,0,y froze\nx,z,B,10,90,\nz,y,tie,50,50,both slow\n")
    payload = stdout_json(evalstop("rank", str(path), "--model", "prog", "--json"))
    assert payload["n_notes"] == {"x": 1, "y": 2, "z": 1} and "notes" not in payload  # counts by default
    payload = stdout_json(evalstop("rank", str(path), "--model", "prog", "--json", "--notes"))
    assert payload["notes"] == {"x": ["y froze"], "y": ["y froze", "both slow"], "z": ["both slow"]}


def test_categories_with_operator_map(evalstop, tmp_path, stdout_json):
    path = tmp_path / "cat.csv"
    path.write_text("policy_a,policy_b,preference,progress_a,progress_b,task,explanation\n"
                    "pi0,octo,A,100,20,close the drawer,octo missed the handle\n"
                    "octo,pi0,B,0,80,fold the cloth,\n"
                    "pi0,bin,tie,50,50,put the spoon into the cup,both slow\n")
    confirmed = tmp_path / "map.yaml"
    confirmed.write_text("put the spoon into the cup: Pick and Place\n")
    payload = stdout_json(evalstop("rank", str(path), "--model", "bt", "--categories", "--category-map",
                                   str(confirmed), "--json"))
    categories = payload["categories"]
    assigned = {row["instruction"]: (row["category"], row["confirmed"]) for row in categories["assignments"]}
    assert assigned == {"close the drawer": ("Open/Close", False), "fold the cloth": ("Cover/Drape/Fold", False),
                        "put the spoon into the cup": ("Pick and Place", True)}
    rates = {(row["group"], row["policy"]): (row["games"], row["win_rate"]) for row in categories["rates"]}
    assert rates[("Open/Close", "pi0")] == (1, 1.0) and rates[("Pick and Place", "bin")] == (1, 0.5)
    assert categories["notes"]["Open/Close"] == {"pi0": ["octo missed the handle"], "octo": ["octo missed the handle"]}
