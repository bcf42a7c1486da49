"""``evalstop report``: the files, what they contain, and the page as a browser renders it.

The rendering test loads the page in Debian's headless Chromium (``tools/install_chromium.sh``,
run by ``make test``) from a localhost server, through a harness page that reads back every
image's decoded size, and takes a screenshot.  Without Chromium it is skipped, unless
``EVALSTOP_REPORT_REQUIRED`` is set (``make test``), where that is a failure.
"""

from __future__ import annotations

import csv
import json
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from audit_support import TAMPERED, alter_wire_score, bag, make_config, recording
from matplotlib import image

from evalstop_ros.audit import AuditReport, audit
from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.report import write_report

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
    assert names == ["decisions.csv", "index.html", "letters.png", "progress.png", "savings.png", "success.png",
                     "trajectory_progress.png", "trajectory_success.png", "trials.csv"]
    for png in written.figures:
        assert png.stat().st_size > 10_000 and not _blank(png), png


def test_page_links_every_figure_and_export(written: Any) -> None:
    page = written.page.read_text()
    for png in written.figures:
        assert f"<img src='{png.name}'" in page
    assert "href='trials.csv'" in page and "href='decisions.csv'" in page
    assert "Audit: VERIFIED" in page
    assert page.count("<tr>") >= 1 + 6 + 3 + 7  # decisions, letters, savings rows


def test_trials_csv_has_every_trial(written: Any, three_policy_report: AuditReport) -> None:
    with (written.page.parent / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(three_policy_report.trials)
    assert [int(r["trial_id"]) for r in rows] == list(range(1, len(rows) + 1))
    assert {r["policy"] for r in rows} == {"pi_base", "pi_new", "pi_big"}
    assert any(int(r["attempts"]) > 1 for r in rows)  # the runner faults are there
    scored = [r for r in rows if r["success"] != ""]
    assert all(0.0 <= float(r["progress"]) <= 1.0 for r in scored)
    with (written.page.parent / "decisions.csv").open() as handle:
        decisions = list(csv.DictReader(handle))
    assert [d["decision"] for d in decisions] == [t.result.decision.name for t in three_policy_report.tests]


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
    assert len(payload["figures"]) == 6


# -- rendered in a browser -----------------------------------------------------------------------
HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="page" src="index.html" width="1280" height="900"></iframe>
<script>
document.getElementById("page").addEventListener("load", () => {
  const doc = document.getElementById("page").contentDocument;
  const images = Array.from(doc.images).map(img => ({src: img.getAttribute("src"), complete: img.complete,
    width: img.naturalWidth, height: img.naturalHeight}));
  document.getElementById("result").textContent = JSON.stringify({title: doc.title, images: images,
    verdict: doc.querySelector(".verdict").textContent, tables: doc.querySelectorAll("table").length});
});
</script></body></html>
"""


@pytest.fixture
def served(written: Any, tmp_path: pathlib.Path, serve_directory: Any) -> str:
    """The report directory (plus the harness page) on a localhost HTTP server; its URL."""
    root = tmp_path / "site"
    shutil.copytree(written.page.parent, root)
    (root / "harness.html").write_text(HARNESS)
    return str(serve_directory(root))


def test_page_renders_in_headless_chromium(chromium: Any, served: str, written: Any, tmp_path: pathlib.Path) -> None:
    dom = chromium(tmp_path / "profile-dom", "--virtual-time-budget=15000", "--dump-dom",
                    f"{served}/harness.html")
    start, end = dom.stdout.find('<pre id="result">'), dom.stdout.find("</pre>")
    assert start >= 0 and end > start, dom.stdout[-2000:] + dom.stderr[-2000:]
    result = json.loads(dom.stdout[start + len('<pre id="result">'):end])
    assert result["title"] == "evalstop report: sim"
    assert result["verdict"].startswith("Audit: VERIFIED")
    rendered = {img["src"]: img for img in result["images"]}
    assert sorted(rendered) == sorted(p.name for p in written.figures)
    for png in written.figures:  # present, decoded, at the PNG's own size
        height, width = image.imread(png).shape[:2]
        assert rendered[png.name] == {"src": png.name, "complete": True, "width": width, "height": height}

    shot = tmp_path / "page.png"
    done = chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,3600",
                     "--virtual-time-budget=15000", f"{served}/index.html")
    assert shot.is_file(), done.stderr[-2000:]
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (3600, 1280)
    # the figures region (below the tables) holds drawn plots, not an empty page
    lower = pixels[1400:, :, :]
    assert float((lower.min(axis=2) < 0.9).mean()) > 0.03, "the lower page (figures) is blank"
    assert not np.allclose(pixels, pixels[0, 0])
