"""Reports of every design, as a reader checks them: trials saved against the design's own fixed-N
plan, multi-task claims and A/B rankings on the page and in the exports, each guarantee worded as
it holds, STEP's boundary as drawn, and the pages at a phone's and a desktop's width.

The sessions are those of :mod:`report_sessions` (a paired two-policy session, a multi-task one
with per-task claims, an A/B and an AdaStop session), plus an A/B session scored automatically
(no preference recorded), each recorded as a bag and audited as ``evalstop report`` does.  The
expected savings are counted here from the trials and the configuration, not by the code tested.
"""

from __future__ import annotations

import csv
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from browser import WIDTHS, measure, screenshot
from report_sessions import SESSIONS, session_report

from evalstop_ros.audit import AuditReport, audit
from evalstop_ros.audit.synthetic import simulate_recording, write_bag
from evalstop_ros.report import build_figures, write_report
from evalstop_ros.report.exports import DECISION_COLUMNS, TRIAL_COLUMNS
from evalstop_ros.report.figures import step_boundary
from evalstop_ros.report.ranking import RANKING_COLUMNS
from evalstop_ros.report.savings import savings
from evalstop_ros.session import parse_config
from evalstop_ros.session.ab import ab_rounds_of
from evalstop_ros.session.guarantees import family_statement
from evalstop_ros.stats.sequential import Decision

DESIGNS = ("demo", "multitask", "ab", "adastop")


def _auto_ab() -> tuple[Any, Any]:
    config, lab = SESSIONS["ab"]()
    return parse_config({**config.model_dump(mode="json", exclude_none=True), "scoring": "auto"}), lab


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AuditReport]:
    out = {name: session_report(name, tmp_path_factory.mktemp(name)) for name in DESIGNS}
    config, lab = _auto_ab()
    bag = write_bag(tmp_path_factory.mktemp("ab_auto") / "bag", simulate_recording(config, lab, session_id="ab_auto"))
    out["ab_auto"] = audit(bag)
    for name, report in out.items():
        assert report.verified, (name, [v.message for v in report.violations])
    return out


@pytest.fixture(scope="module")
def written(reports: dict[str, AuditReport], tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """Each report written with PNG figures only (the page is what these tests read)."""
    return {name: write_report(report, tmp_path_factory.mktemp(f"out-{name}"), formats=("png",)).page.parent
            for name, report in reports.items()}


def _scored(report: AuditReport) -> list[Any]:
    return [t for t in report.trials if t.success is not None]


def _expected_units(report: AuditReport) -> dict[str, tuple[int, int]]:
    """``label -> (used, fixed)`` of the design's units, counted from the trials (module docstring)."""
    cfg, scored = report.config, _scored(report)
    k = len(cfg.policies)
    if cfg.design == "adastop":
        assert cfg.adastop is not None
        per_agent = cfg.adastop.n_per_interim * cfg.adastop.n_interims
        units = {f"agent {p}": (sum(t.policy == p for t in scored), per_agent) for p in cfg.policies}
        return {**units, "whole session": (len(scored), per_agent * k)}
    if cfg.design == "ab":
        rounds: dict[int, set[str]] = {}
        for trial in report.trials:
            rounds.setdefault(trial.round, set()).add(trial.policy)
        pairs = [(a, b) for i, a in enumerate(cfg.policies) for b in cfg.policies[i + 1:]]
        units = {f"A/B pair {a} vs {b}": (sum(rounds[t.round] == {a, b} for t in scored), 2 * cfg.n_max)
                 for a, b in pairs}
        return {**units, "whole session": (len(scored), 2 * cfg.n_max * len(pairs))}
    if cfg.claim != "pooled":
        units = {f"task @{task.id}": (sum(t.task == task.id for t in scored), k * cfg.n_max) for task in cfg.tasks}
        return {**units, "whole session": (len(scored), k * cfg.n_max * len(cfg.tasks))}
    return {"whole session": (len(scored), k * cfg.n_max)}


@pytest.mark.parametrize("name", DESIGNS)
def test_savings_follow_the_designs_own_fixed_n_plan(name: str, reports: dict[str, AuditReport],
                                                     written: dict[str, pathlib.Path]) -> None:
    report = reports[name]
    rows = savings(report)
    expected = _expected_units(report)
    units = {r.label: (r.used, r.fixed) for r in rows if r.kind != "test"}
    assert units == expected
    assert rows[-1].label == "whole session"
    if len(expected) > 1:  # the units partition the session's trials
        assert sum(used for label, (used, _) in expected.items() if label != "whole session") == \
            expected["whole session"][0]
    per_test = (2 * report.config.adastop.n_per_interim * report.config.adastop.n_interims
                if report.config.adastop else 2 * report.config.n_max)
    tests = [r for r in rows if r.kind == "test"]
    assert [(r.used, r.fixed) for r in tests] == [(2 * t.result.n_observed, per_test) for t in report.tests]
    assert all(0 <= r.saved <= r.fixed for r in rows), [(r.label, r.saved) for r in rows]
    page = (written[name] / "index.html").read_text()
    table = page[page.index('id="savings"'):]
    table = table[:table.index("</table>")]
    for row in rows:
        assert f">{row.used}<" in table and f">{row.fixed}<" in table and f">{row.saved} ({row.share})<" in table
    assert "saved -" not in page and ">-" not in table


def test_the_known_plans(reports: dict[str, AuditReport]) -> None:
    """The issue's cases: the multi-task baseline is per task, A/B per pair, AdaStop N K per agent."""
    whole = {name: savings(reports[name])[-1] for name in DESIGNS}
    assert whole["demo"].fixed == 2 * 100
    assert whole["multitask"].fixed == 2 * 2 * 30
    assert whole["ab"].fixed == 3 * 2 * 30
    assert (whole["adastop"].fixed, whole["adastop"].saved) == (3 * 3 * 4, 0)  # ran all its design allows


def test_multitask_claims_on_the_page_and_in_decisions_csv(reports: dict[str, AuditReport],
                                                           written: dict[str, pathlib.Path]) -> None:
    report = reports["multitask"]
    assert len(report.claims) == 2
    with (written["multitask"] / "decisions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["task"] for r in rows] == ["push", "stack", "push", "stack", "*", "*"]
    page = (written["multitask"] / "index.html").read_text()
    for claim, row in zip(report.claims, rows[4:]):
        res = claim.result
        assert (row["policy_a"], row["policy_b"], row["metric"]) == (claim.policy_a, claim.policy_b, claim.metric)
        assert res.established and row["decision"] == "B_BETTER"
        assert row["claimed_tasks"].split() == [t for t, d in zip(res.tasks, res.task_claims) if d != Decision.CONTINUE]
        assert int(row["n"]) == res.n_trials and row["pvalue"] == "" and row["reproduced"] == "1"
        assert float(row["alpha"]) == pytest.approx(res.alpha)
    assert page.count("(per-task claim)") == 2 and "B_BETTER on @push, @stack" in page
    summary = report.to_dict()["claims"]  # evalstop audit --json
    assert [(c["metric"], c["established"], c["n"]) for c in summary] == [
        (c.metric, c.result.established, c.result.n_trials) for c in report.claims]
    assert " on push" not in page and "[push]" not in page  # one task notation: @push
    assert "policy_a vs policy_b @push" in page


@pytest.mark.parametrize("name", ["ab", "ab_auto"])
def test_ab_sessions_get_a_ranking_with_intervals(name: str, reports: dict[str, AuditReport],
                                                  written: dict[str, pathlib.Path]) -> None:
    page = (written[name] / "index.html").read_text()
    assert "<h2>Ranking</h2>" in page and 'id="ranking"' in page
    with (written[name] / "ranking.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["policy"] for r in rows] == ["a", "b", "c"]  # the lab's rates 0.85 > 0.5 > 0.15
    assert [int(r["rank"]) for r in rows] == [1, 2, 3]
    for row in rows:
        assert float(row["low"]) < float(row["score"]) < float(row["high"])
        assert int(row["games"]) > 0
    derived = "preferences follow the two scores" in page
    assert derived == (name == "ab_auto")


def test_auto_scoring_prefers_the_higher_score(reports: dict[str, AuditReport]) -> None:
    """No preference is recorded under scoring: auto: the higher progress wins, equal progress
    (then success) ties."""
    report = reports["ab_auto"]
    rounds = ab_rounds_of(report.config, report.trials)
    data = rounds.data
    assert rounds.n_derived == len(data) > 50 and rounds.n_incomplete == 0
    by_round = {r: [t for t in report.trials if t.round == r and t.score is not None] for r in rounds.rounds}
    for k, number in enumerate(rounds.rounds):
        first, second = sorted(by_round[number], key=lambda t: t.trial_id)
        a = (first.progress, first.success)
        b = (second.progress, second.success)
        assert data.outcome[k] == (2 if a > b else 0 if b > a else 1)
        assert (data.progress_a[k], data.progress_b[k]) == (first.progress, second.progress)
    assert {0, 2} <= set(data.outcome.tolist())
    assert ab_rounds_of(reports["ab"].config, reports["ab"].trials).n_derived == 0  # the operator stated them


def test_rank_reads_an_auto_scored_ab_session(reports: dict[str, AuditReport]) -> None:
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    source = reports["ab_auto"].record.source
    done = subprocess.run([script, "rank", source], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "no preference recorded (scoring: auto)" in done.stdout
    assert done.stdout.index("  a ") < done.stdout.index("  b ") < done.stdout.index("  c ")


def test_no_report_guarantee_says_more_than_holds(reports: dict[str, AuditReport]) -> None:
    demo = family_statement(reports["demo"].config, 2)
    assert "Every p-value and decision is anytime-valid" not in demo
    assert "planned looks" in demo and "no anytime p-value" in demo and "nscore: anytime-valid" in demo
    assert "at every look the session's design allows" in demo
    adastop = family_statement(reports["adastop"].config, 3)
    assert "anytime" not in adastop and "group-sequential" in adastop and "4 interims of 3 trials" in adastop
    holm = parse_config({**reports["ab"].config.model_dump(mode="json", exclude_none=True), "design": "paired",
                         "metrics": [{"name": "progress", "method": "nscore", "bins": 21}], "correction": "holm"})
    statement = family_statement(holm, 3)
    assert "sequential Holm" in statement and "at any time the session could have stopped" in statement
    for name in ("demo", "adastop"):
        for fig, stem, _, _ in build_figures(reports[name]):
            if stem.startswith("trajectory"):
                title = fig.get_suptitle().replace("\n", " ")
                assert "anytime-valid evidence" not in title
                methods = {t.method for t in reports[name].tests if f"trajectory_{t.metric}" == stem}
                if methods == {"step"}:
                    assert "no anytime p-value" in title
                if methods == {"adastop"}:
                    assert "valid at its interims" in title and "anytime" not in title


def test_step_panels_draw_the_real_boundary(reports: dict[str, AuditReport]) -> None:
    seen_randomised = False
    for name in ("demo", "multitask", "ab"):
        report = reports[name]
        figures = {stem: fig for fig, stem, _, _ in build_figures(report)}
        tests = [t for t in report.tests if t.method == "step"]
        axes = figures["trajectory_success"].axes
        for ax, test in zip(axes, tests):
            bounds = step_boundary(test, report.config.n_max)
            assert bounds is not None
            possible, certain = bounds
            n = test.result.n_observed
            low = np.minimum(np.cumsum(test.values_a), np.cumsum(test.values_b))[:n]
            reach = np.arange(1, n + 1) - low  # the largest gap each look allows
            assert np.all(np.isnan(possible) | (possible <= reach)) and np.all(np.isnan(certain) | (certain <= reach))
            assert np.all(np.isnan(certain) | (possible <= certain))
            bottom, top = ax.get_ylim()
            assert np.all(np.isnan(certain) | (certain < top))  # the boundary stays on the axis
            if test.alternative == "two-sided":
                assert np.all(np.isnan(certain) | (-certain > bottom))
            stop = test.result.stopping_trial
            if not stop:
                continue
            gap = abs(float(np.sum(test.values_b[:stop] - test.values_a[:stop])))
            assert gap >= possible[stop - 1]
            labels = [text for _, text in zip(*ax.get_legend_handles_labels())]
            assert test.step is not None and test.step.weight is not None
            if test.step.weight < 1:  # randomised: the dot sits below the certain stop, and says so
                seen_randomised = True
                assert gap < certain[stop - 1] and "decision (randomised stop)" in labels
            else:
                assert gap >= certain[stop - 1] and "decision (certain stop)" in labels
    assert seen_randomised


# -- rendered in a browser -----------------------------------------------------------------------
@pytest.mark.parametrize(("view", "width", "height"), WIDTHS)
@pytest.mark.parametrize("name", DESIGNS)
def test_pages_fit_a_phone_and_a_desktop(chromium: Any, serve_directory: Any, written: dict[str, pathlib.Path],
                                         tmp_path: pathlib.Path, name: str, view: str, width: int,
                                         height: int) -> None:
    root = tmp_path / "site"
    shutil.copytree(written[name], root)
    url = str(serve_directory(root))
    result = measure(chromium, root, url, "index.html", width, height, tmp_path / "profile-dom")
    assert result["scrollWidth"] <= result["innerWidth"], (view, result["wide"])
    assert result["wide"] == []
    hidden = [t for t in result["tables"] if t["width"] > t["box"] + 1]
    assert hidden == [], (name, view, hidden)  # no column hidden behind a scroll
    if width > 760:  # the desktop table: "decided at" on one line
        assert result["nowrap"] and all(c["lines"] == 1 for c in result["nowrap"]), result["nowrap"]
    assert all(img["complete"] and img["width"] > 0 for img in result["images"])
    tall = 5000 if width > 760 else 12000
    shot = screenshot(chromium, f"{url}/index.html", f"report-{name}-{view}.png", width, tall, tmp_path / "shot")
    assert shot.stat().st_size > 20_000


def test_cli_prints_its_steps(reports: dict[str, AuditReport], tmp_path: pathlib.Path) -> None:
    script = str(pathlib.Path(sys.executable).with_name("evalstop"))
    done = subprocess.run([script, "report", reports["adastop"].record.source, "-o", str(tmp_path / "out"),
                           "--format", "png"], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "audit of" in lines[0] and "verified" in lines[0]
    figures = [line for line in lines if "figure " in line]
    assert len(figures) == 5 and figures[-1].split("figure ")[1].startswith("5/5")
    assert all("s left" in line for line in figures) and "page and data written" in lines[-1]
    csv_source = tmp_path / "scores.csv"
    csv_source.write_text("policy_a,policy_b\n1,0\n", encoding="utf-8")
    done = subprocess.run([script, "report", str(csv_source), "-o", str(tmp_path / "csv")], capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 2 and "evalstop analyze" in done.stderr and "evalstop rank" in done.stderr


def _documented(section: str) -> list[tuple[str, str]]:
    """The ``| column | meaning |`` rows under ``## `section``` of docs/report.md."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text(encoding="utf-8")
    body = text.split(f"## `{section}`", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|", 1) for line in body.splitlines() if line.startswith("| `")]
    return [(name.strip().strip("`"), meaning.strip().rstrip("|").strip().replace("`", "")) for name, meaning in rows]


def test_every_export_column_is_documented() -> None:
    assert _documented("trials.csv") == list(TRIAL_COLUMNS)
    assert _documented("decisions.csv") == list(DECISION_COLUMNS)
    assert _documented("ranking.csv") == list(RANKING_COLUMNS)
