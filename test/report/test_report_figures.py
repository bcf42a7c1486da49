"""The report's figures as a reader of a paper sees them: text inside the figure, no overlaps,
degenerate data drawn as what it is, numbers that say what they are over, print formats.

The figures are those of real sessions (:mod:`report_sessions`): the demo's and the policy
demo's presets, an A/B session, an AdaStop session and a multi-task session, each recorded as a
bag and audited as ``evalstop report`` does.  The layout checks (:mod:`figure_layout`) draw every
figure at print resolution and compare window extents; a negative control shows they catch a
clipped title and a legend over the data.
"""

from __future__ import annotations

import pathlib
import re
import struct
import zlib

import numpy as np
import pytest
from figure_layout import clipped_texts, overlaps
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.figure import Figure
from report_sessions import SESSIONS, session_report

from evalstop_ros.audit import AuditReport
from evalstop_ros.report import ReportError, build_figures, write_report
from evalstop_ros.report.figures import MIN_VIOLIN_DISTINCT
from evalstop_ros.report.style import OKABE_ITO, PRINT_DPI
from evalstop_ros.stats.sequential import Decision


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AuditReport]:
    out = {}
    for name in SESSIONS:
        out[name] = session_report(name, tmp_path_factory.mktemp(name))
        assert out[name].verified, (name, [v.message for v in out[name].violations])
    return out


@pytest.mark.parametrize("name", list(SESSIONS))
def test_no_text_leaves_a_figure_and_nothing_overlaps(name: str, reports: dict[str, AuditReport]) -> None:
    figures = build_figures(reports[name])
    stems = [stem for _, stem, _, _ in figures]
    assert stems[-4:] == ["progress", "success", "letters", "savings"]
    assert stems[:-4] == [f"trajectory_{m.name}" for m in reports[name].config.metrics]
    for fig, stem, _, _ in figures:
        assert clipped_texts(fig) == [], (name, stem)
        assert overlaps(fig) == [], (name, stem)


def test_the_checks_catch_a_clipped_title_and_a_legend_over_data() -> None:
    fig = Figure(figsize=(3.0, 2.0), layout="constrained")
    ax = fig.subplots()
    ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50), label="a curve with a long legend entry")
    ax.legend(loc="center")
    fig.suptitle("Success rate per policy with its 95% anytime-valid confidence sequence (valid everywhere)")
    ax.text(0.5, 0.5, "B better at pair 17", transform=ax.transAxes)
    assert any("Success rate" in c for c in clipped_texts(fig))
    found = overlaps(fig)
    assert any("the legend covers" in o and "data points" in o for o in found), found
    assert any("annotation 'B better at pair 17' covers" in o for o in found), found


def test_a_point_mass_is_one_marker_not_a_violin(reports: dict[str, AuditReport]) -> None:
    """policy demo: good_vla completes every rollout (progress 1.0 each time)."""
    report = reports["policy_demo"]
    good = [t.progress for t in report.trials if t.policy == "good_vla" and t.progress is not None]
    assert len(good) > 5 and set(good) == {1.0}
    fig = build_figures(report)[-4][0]
    ax = fig.axes[0]
    bodies = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bodies) == 1  # bad_vla's violin only
    assert bodies[0].get_paths()[0].get_extents().x1 < 0.6  # around position 0, not good_vla's 1
    markers = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets()) == 1]
    assert len(markers) == 1 and tuple(markers[0].get_offsets()[0]) == (1.0, 1.0)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[1].splitlines()[:3] == ["good_vla", "mean 1.000", f"n = {len(good)}"] and "all 1.00" in labels[1]
    assert MIN_VIOLIN_DISTINCT >= 3


def test_numbers_say_what_they_are_over(reports: dict[str, AuditReport], tmp_path: pathlib.Path) -> None:
    """Figures quote all of a policy's trials; the decisions table the pairs up to the stop."""
    report = reports["demo"]
    success = build_figures(report)[-3][0]
    for ax in success.axes:
        title = ax.get_title().replace("\n", " ")
        policy = title.split(":")[0]
        values = [float(t.success) for t in report.trials if t.policy == policy and t.success is not None]
        assert f"{np.mean(values):.3f}" in title and f"all {len(values)} trials" in title
    page = write_report(report, tmp_path / "out", formats=("png",)).page.read_text()
    assert "mean A / B at the stop" in page
    decided = [t for t in report.tests if t.result.decision in (Decision.A_BETTER, Decision.B_BETTER)]
    assert decided
    for test in report.tests:  # three decimals in every mean cell
        assert f">{test.values_a.mean():.3f} / {test.values_b.mean():.3f}<" in page
    cells = re.findall(r'<td data-label="[^"]*" class="num">(0\.\d+)</td>', page)
    assert cells and all(len(c.split(".")[1]) >= 3 for c in cells), cells


def _png_dpi(path: pathlib.Path) -> float:
    """Pixels per inch from the PNG's pHYs chunk."""
    data = path.read_bytes()
    at = data.index(b"pHYs")
    ppm_x = struct.unpack(">I", data[at + 4:at + 8])[0]
    assert zlib.crc32(data[at:at + 13]) == struct.unpack(">I", data[at + 13:at + 17])[0]
    return ppm_x * 0.0254


def test_print_formats(reports: dict[str, AuditReport], tmp_path: pathlib.Path) -> None:
    files = write_report(reports["multitask"], tmp_path / "out")
    assert [p.suffix for p in files.figures] == [".png"] * 6
    assert sorted(p.name for p in files.other_formats) == sorted(
        f"{p.stem}{ext}" for p in files.figures for ext in (".svg", ".pdf"))
    for png in files.figures:
        assert round(_png_dpi(png)) == PRINT_DPI
    for other in files.other_formats:
        head = other.read_bytes()[:200]
        assert head.startswith(b"%PDF-") if other.suffix == ".pdf" else b"<svg" in other.read_bytes()[:2000]
    svg = (tmp_path / "out" / "success.svg").read_text()
    assert "policy_a" in svg  # text stays text (svg.fonttype none): searchable, editable
    assert OKABE_ITO[0].lower() in svg.lower()
    only_svg = write_report(reports["multitask"], tmp_path / "svg", formats=("svg",))
    assert [p.suffix for p in only_svg.figures] == [".svg"] * 6 and not only_svg.other_formats
    assert 'src="success.svg"' in only_svg.page.read_text()
    with pytest.raises(ReportError, match="among png, svg, pdf"):
        write_report(reports["multitask"], tmp_path / "bad", formats=("jpg",))
