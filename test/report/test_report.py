"""``evalstop report``: the files, what they contain, and the page as a browser renders it.

The rendering test loads the page in Debian's headless Chromium (``tools/install_chromium.sh``,
run by ``make test``) from a localhost server at a phone's and a desktop's width, through a
harness page that reads back every image's decoded size and the page's scroll width
(:mod:`browser`), and takes screenshots, kept in ``build/test-output/report-*.png``.  Without
Chromium it is skipped, unless ``EVALSTOP_REPORT_REQUIRED`` is set (``make test``), where that
is a failure.
"""

from __future__ import annotations

import csv
import datetime
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from audit_support import TAMPERED, alter_wire_score, bag, cli_in_process, make_config, recording
from browser import WIDTHS, measure, screenshot
from matplotlib import image

from evalstop_ros.audit import AuditReport, audit
from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.report import write_report
from evalstop_ros.report.exports import DECISION_COLUMNS, TRIAL_COLUMNS

THREE = {"policies": ["pi_base", "pi_new", "pi_big"], "alpha": 0.06, "scoring": "auto",
         "metrics": [{"name": "success", "method": "step", "alpha": 0.03},
                     {"name": "progress", "method": "nscore", "alpha": 0.03, "bins": 21}]}


@pytest.fixture(scope="module")
def three_policy_report(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """A 3-policy auto-scored session with runner faults, audited from its bag."""
    lab = SimulatedLab({"pi_base": 0.3, "pi_new": 0.8, "pi_big": 0.75},
                       {"pi_base": 0.3, "pi_new": 0.5, "pi_big": 0.5}, fail_every=9)
    path = write_bag(tmp_path_factory.mktemp("bag") / "bag", simulate_recording(make_config(**THREE), lab))
    report = audit(path)
    assert report.verified
    return report


@pytest.fixture(scope="module")
def written(three_policy_report: AuditReport, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return write_report(three_policy_report, tmp_path_factory.mktemp("report"))


def _blank(png: pathlib.Path) -> bool:
    """True when a PNG is (almost) one colour: nothing drawn."""
    pixels = image.imread(png)[..., :3]
    return float(pixels.std()) < 0.02 or float((pixels.min(axis=2) < 0.9).mean()) < 0.01


def test_files_written(written: Any) -> None:
    names = sorted(p.name for p in written.page.parent.iterdir())
    stems = ["letters", "progress", "savings", "success", "trajectory_progress", "trajectory_success"]
    parquet = ["decisions.parquet", "trials.parquet"] if importlib.util.find_spec("pyarrow") else []
    assert names == sorted(["decisions.csv", "index.html", "trials.csv", *parquet,
                            *(f"{s}.{ext}" for s in stems for ext in ("png", "svg", "pdf"))])
    for png in written.figures:
        assert png.stat().st_size > 10_000 and not _blank(png), png


def test_page_links_every_figure_and_export(written: Any) -> None:
    page = written.page.read_text()
    for png in written.figures:
        assert f'<img src="{png.name}"' in page
        assert f'href="{png.stem}.svg"' in page and f'href="{png.stem}.pdf"' in page
    assert 'href="trials.csv"' in page and 'href="decisions.csv"' in page
    assert "Audit: VERIFIED" in page
    assert page.count("<tr>") >= 1 + 6 + 3 + 7  # decisions, letters, savings rows
    assert "Family-wise error at most 0.06 over all 6 tests" in page
    assert re.search(r"report written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)


def test_trials_csv_has_every_trial(written: Any, three_policy_report: AuditReport) -> None:
    with (written.page.parent / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(three_policy_report.trials)
    assert [int(r["trial_id"]) for r in rows] == list(range(1, len(rows) + 1))
    assert {r["policy"] for r in rows} == {"pi_base", "pi_new", "pi_big"}
    assert any(int(r["attempts"]) > 1 for r in rows)  # the runner faults are there
    scored = [r for r in rows if r["success"] != ""]
    assert all(0.0 <= float(r["progress"]) <= 1.0 for r in scored)
    for row, trial in zip(rows, three_policy_report.trials):  # ISO 8601 UTC beside the raw stamps
        when = datetime.datetime.fromisoformat(row["requested_at"])
        assert when.tzinfo == datetime.UTC and int(when.timestamp() * 1e6) == trial.requested_ns // 1000
        assert (row["scored_at"] == "") == (trial.scored_ns is None)
    assert list(rows[0]) == [name for name, _ in TRIAL_COLUMNS]
    with (written.page.parent / "decisions.csv").open() as handle:
        decisions = list(csv.DictReader(handle))
    assert [d["decision"] for d in decisions] == [t.result.decision.name for t in three_policy_report.tests]
    assert list(decisions[0]) == [name for name, _ in DECISION_COLUMNS]
    for row, test in zip(decisions, three_policy_report.tests):
        assert float(row["mean_b"]) == pytest.approx(test.values_b.mean())
        assert (row["decided_at"] != "") == bool(test.result.stopping_trial)
        if row["decided_at"]:
            assert datetime.datetime.fromisoformat(row["decided_at"]).tzinfo == datetime.UTC


def test_failed_audit_is_shown(tmp_path: pathlib.Path) -> None:
    report = audit(bag(tmp_path / "bag", alter_wire_score(recording("operator"), TAMPERED), "mcap"))
    page = write_report(report, tmp_path / "out").page.read_text()
    assert "Audit: FAILED" in page and f"trial {TAMPERED}" in page


def test_cli_report(tmp_path: pathlib.Path) -> None:
    path = bag(tmp_path / "bag", recording("operator"), "sqlite3")
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    done = subprocess.run([script, "report", str(path), "-o", str(tmp_path / "out"), "--json"], capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    payload = json.loads(done.stdout)
    assert payload["page"] == str(tmp_path / "out" / "index.html") and payload["verified"] is True
    assert len(payload["figures"]) == 6 and len(payload["other_formats"]) == 12
    # the format option and a usage error in this process (the same parser and dispatch), without
    # an interpreter that imports matplotlib again for each
    done = cli_in_process("report", str(path), "-o", str(tmp_path / "pdf"), "--format", "pdf")
    assert done.returncode == 0, done.stderr
    assert sorted(p.suffix for p in (tmp_path / "pdf").iterdir() if p.suffix not in (".csv", ".parquet")) == \
        [".html"] + [".pdf"] * 6
    done = cli_in_process("report", str(path), "-o", str(tmp_path / "bad"), "--format", "png,jpg")
    assert done.returncode == 2 and "jpg" in done.stderr and "Traceback" not in done.stderr


# -- rendered in a browser -----------------------------------------------------------------------
@pytest.fixture
def served(written: Any, tmp_path: pathlib.Path, serve_directory: Any) -> tuple[pathlib.Path, str]:
    """The report directory on a localhost HTTP server: (its root, its URL)."""
    root = tmp_path / "site"
    shutil.copytree(written.page.parent, root)
    return root, str(serve_directory(root))


@pytest.mark.parametrize(("view", "width", "height"), WIDTHS)
def test_page_renders_in_headless_chromium(chromium: Any, served: tuple[pathlib.Path, str], written: Any,
                                           tmp_path: pathlib.Path, view: str, width: int, height: int) -> None:
    root, url = served
    result = measure(chromium, root, url, "index.html", width, height, tmp_path / "profile-dom")
    assert result["title"] == "evalstop report: sim"
    assert "Audit: VERIFIED" in result["text"] and "Family-wise error at most" in result["text"]
    assert result["scrollWidth"] <= result["innerWidth"], (view, result["wide"])  # no horizontal overflow
    assert result["wide"] == []
    rendered = {img["src"]: img for img in result["images"]}
    assert sorted(rendered) == sorted(p.name for p in written.figures)
    for png in written.figures:  # present, decoded at the PNG's own size, shown within the width
        height_px, width_px = image.imread(png).shape[:2]
        shown = rendered[png.name]
        assert (shown["complete"], shown["width"], shown["height"]) == (True, width_px, height_px)
        assert 0 < shown["shown"] <= width

    tall = 4000 if width > 760 else 9000  # the whole page: on a phone the tables are cards, one under another
    shot = screenshot(chromium, f"{url}/index.html", f"report-{view}.png", width, tall, tmp_path / "profile-shot")
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (tall, width)
    lower = pixels[1500:, :, :]  # below the tables: drawn plots, not an empty page
    assert float((lower.min(axis=2) < 0.9).mean()) > 0.02, "the lower page (figures) is blank"
    assert not np.allclose(pixels, pixels[0, 0])


def test_parquet_exports_match_the_csvs(three_policy_report: AuditReport, tmp_path: pathlib.Path) -> None:
    """With pyarrow installed (optional), trials.parquet and decisions.parquet hold the CSVs' rows
    with typed columns and UTC time stamps."""
    pq = pytest.importorskip("pyarrow.parquet")  # an optional third-party package, not ours
    files = write_report(three_policy_report, tmp_path / "out", formats=("png",))
    assert [p.name for p in files.csv] == ["trials.csv", "decisions.csv", "trials.parquet", "decisions.parquet"]
    trials = pq.read_table(tmp_path / "out" / "trials.parquet")
    assert trials.column_names == [name for name, _ in TRIAL_COLUMNS]
    assert trials.num_rows == len(three_policy_report.trials)
    assert str(trials.schema.field("requested_at").type) == "timestamp[us, tz=UTC]"
    first = trials.slice(0, 1).to_pylist()[0]
    trial = three_policy_report.trials[0]
    assert int(first["requested_at"].timestamp() * 1e6) == trial.requested_ns // 1000
    assert first["policy"] == trial.policy and first["progress"] == trial.progress
    decisions = pq.read_table(tmp_path / "out" / "decisions.parquet")
    assert decisions.column_names == [name for name, _ in DECISION_COLUMNS]
    assert decisions.column("decision").to_pylist() == [t.result.decision.name for t in three_policy_report.tests]
