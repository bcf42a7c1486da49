"""Tests of evalstop_ros.cli.data: the two CSV layouts and every message of the loader."""

from __future__ import annotations

import pathlib

import pytest

from evalstop_ros.cli._common import CliError
from evalstop_ros.cli.data import load_pairs


def write(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "scores.csv"
    path.write_text(text)
    return str(path)


def test_wide_layout_in_either_column_order(tmp_path):
    data = load_pairs(write(tmp_path, "policy_b,policy_a\n1,0\n0.5,0.25\n\n"))  # blank lines skipped
    assert (data.layout, data.policy_a, data.policy_b) == ("wide", "policy_a", "policy_b")
    assert data.scores_a.tolist() == [0.0, 0.25] and data.scores_b.tolist() == [1.0, 0.5]


def test_wide_layout_with_named_columns_ignores_the_others(tmp_path):
    data = load_pairs(write(tmp_path, "ep, octo ,vla,note\n1,0.2,0.9,ok\n2,0.4,1,\n"), ("vla", "octo"))
    assert (data.policy_a, data.policy_b) == ("vla", "octo")
    assert data.scores_a.tolist() == [0.9, 1.0] and data.scores_b.tolist() == [0.2, 0.4]


def test_long_layout_pairs_by_first_appearance_of_trial_ids(tmp_path):
    text = "trial,policy,score,extra\nb,x,0,-\na,y,1,-\na,x,0.5,-\nb,y,0.25,-\n"
    data = load_pairs(write(tmp_path, text))
    assert (data.layout, data.policy_a, data.policy_b) == ("long", "x", "y")  # x appears first
    assert data.scores_a.tolist() == [0.0, 0.5]  # trial b first, then a
    assert data.scores_b.tolist() == [0.25, 1.0]


def test_numeric_files_read_at_c_speed_give_what_the_row_reader_gives(tmp_path):
    """load_pairs reads an all-numeric wide file with numpy; anything else row by row (same result)."""
    from evalstop_ros.cli.data import _numeric_wide

    text = "trial,policy_b,policy_a\n1,1,0\n2, 0.5 ,0.25\n\n3,1e-1,1\n"
    fast = _numeric_wide(write(tmp_path, text), ("policy_a", "policy_b"))
    assert fast is not None
    slow = load_pairs(write(tmp_path, text.replace("3,", "x3,")), ("policy_a", "policy_b"))  # not numeric: row reader
    assert (fast.policy_a, fast.policy_b, fast.scores_a.tolist(), fast.scores_b.tolist()) == \
        (slow.policy_a, slow.policy_b, slow.scores_a.tolist(), slow.scores_b.tolist()) == \
        ("policy_a", "policy_b", [0.0, 0.25, 1.0], [1.0, 0.5, 0.1])


def test_describe(tmp_path):
    data = load_pairs(write(tmp_path, "policy_a,policy_b\n0,1\n1,1\n"))
    assert data.describe() == {
        "path": str(tmp_path / "scores.csv"), "layout": "wide", "policy_a": "policy_a", "policy_b": "policy_b",
        "n_pairs": 2, "mean_a": 0.5, "mean_b": 1.0,
    }


def test_scores_within_round_off_of_the_range_are_accepted(tmp_path):
    # validation.SCORE_TOLERANCE: upstream normalisation may overshoot by float round-off
    data = load_pairs(write(tmp_path, "policy_a,policy_b\n1.0000000000001,-1e-13\n"))
    assert data.scores_a.size == 1


@pytest.mark.parametrize(
    ("text", "columns", "match"),
    [
        ("policy_a,policy_b\n0,1\n-0.5,1\n", None, r"line 3, column 'policy_a': the score must lie in \[0, 1\]; found '-0.5'"),
        ("policy_a,policy_b\n0,1\n1,inf\n", None, "line 3, column 'policy_b': the score must be finite; found 'inf'"),
        ("policy_a,policy_b\n0,1\nyes,1\n", None, "line 3, column 'policy_a': the score must be a number; found 'yes'"),
        ("policy_a,policy_b\n0,1\n1\n", None, "line 3: expected 2 fields like the header; found 1"),
        ("policy_a,policy_b\n0,1\n1,1,0\n", None, "line 3: expected 2 fields like the header; found 3"),
        ("policy_a,policy_b\n0,1\n1,nan\n", None, "line 3, column 'policy_b': the score must be finite; found 'nan'"),
        ("policy_a,policy_b\n0,1\n#1,0\n", None, "line 3, column 'policy_a': the score must be a number; found '#1'"),
        ("policy_a,policy_b\n", None, "no trials after the header"),
        ("", None, "the file is empty; expected a header row"),
        ("a,b\n0,1\n", None, r"line 1: found header 'a,b'; expected a wide header .* \(name two columns with --columns A,B\)"),
        ("a,b\n0,1\n", ("a", "c"), "line 1: found header 'a,b'; expected columns 'a' and 'c'$"),
        ("policy_a,policy_a\n0,1\n", None, "line 1: column 'policy_a' appears twice in the header"),
        ("trial,policy,score\n1,x,0\n1,y,1\n1,x,1\n", None, r"line 4: a second score for trial '1', policy 'x' \(the first is on line 2\)"),
        ("trial,policy,score\n1,x,0\n1,y,1\n1,z,1\n", None, "line 4: found a third policy 'z' after 'x' and 'y'; pick two with --columns A,B"),
        ("trial,policy,score\n1,x,0\n2,x,1\n", None, "expected scores of two policies; found policies 'x'"),
        ("trial,policy,score\n1,x,0\n", ("x", "w"), "expected policies 'w'; found policies 'x'"),
        ("trial,policy,score\n,x,0\n", None, "line 2: the trial id and the policy must not be empty"),
        ("trial,policy,score\n1,x,0\n1,y,1.5\n", None, r"line 3, trial '1', policy 'y': the score must lie in \[0, 1\]; found '1.5'"),
    ],
)
def test_messages_name_file_line_and_value(tmp_path, text, columns, match):
    path = write(tmp_path, text)
    with pytest.raises(CliError, match=match) as err:
        load_pairs(path, columns)
    assert str(err.value).startswith(path) and "\n" not in str(err.value)


def test_columns_must_differ(tmp_path):
    with pytest.raises(CliError, match="--columns must name two different policies; found 'a' twice"):
        load_pairs(write(tmp_path, "a,b\n0,1\n"), ("a", "a"))


def test_unreadable_file(tmp_path):
    with pytest.raises(CliError, match=f"cannot read {tmp_path}: Is a directory"):
        load_pairs(str(tmp_path))
    (tmp_path / "latin1.csv").write_bytes(b"policy_a,policy_b\n\xe9,1\n")
    with pytest.raises(CliError, match="cannot parse .*latin1.csv: 'utf-8' codec can't decode"):
        load_pairs(str(tmp_path / "latin1.csv"))
