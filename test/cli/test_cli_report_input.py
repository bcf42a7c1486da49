"""``evalstop report`` given a table of outcomes: one line pointing to the verbs that read one."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Callable

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_report_on_a_csv_points_to_analyze_rank_and_adastop(evalstop: Callable[..., subprocess.CompletedProcess[str]],
                                                           tmp_path: pathlib.Path) -> None:
    csv = str(REPO / "examples" / "towel_like.csv")
    done = evalstop("report", csv, "-o", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{csv} is a table of outcomes, not a recorded session" in done.stderr
    for verb in (f"evalstop analyze {csv} --method", f"evalstop rank {csv}", f"evalstop adastop {csv} --n-per-interim"):
        assert verb in done.stderr
    assert not (tmp_path / "out").exists()
