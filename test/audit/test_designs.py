"""Audits of the designs the session analyses beyond pooled Bonferroni: sequential Holm,
per-task multi-task claims and AdaStop, and bags of both ComparisonStatus definitions.

The verifier takes every decision from the session's offline analysis
(:mod:`evalstop_ros.session.offline`); these recordings are real sessions (EvaluationSession
driven through a simulated lab) written as real bags.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from audit_support import BASE, alter_journal_score, bag, make_config

from evalstop_ros.audit import audit, interfaces
from evalstop_ros.audit.synthetic import Message, SimulatedLab, simulate_recording
from evalstop_ros.stats.sequential import Decision

HOLM = {
    "policies": ["p1", "p2", "p3", "p4"],
    "metrics": [{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}],
    "correction": "holm",
    "n_max": 40,
}
HOLM_RATES = {"p1": 0.1, "p2": 0.3, "p3": 0.8, "p4": 0.9}

PER_TASK = {
    "tasks": [{"id": task, "description": f"Do {task}.",
               "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Spot {i}."} for i in range(2)]}
              for task in ("push", "stack")],
    "metrics": [{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21, "alternative": "greater"}],
    "claim": "per-task",
    "n_max": 30,
}
PER_TASK_RATES = {"policy_a": 0.2, "policy_b": 0.9}


def _run(overrides: dict[str, Any], rates: dict[str, float]) -> tuple[Any, list[Message]]:
    config = make_config(**overrides)
    return config, simulate_recording(config, SimulatedLab(rates))


@pytest.fixture(scope="module")
def holm() -> tuple[Any, list[Message]]:
    return _run(HOLM, HOLM_RATES)


@pytest.fixture(scope="module")
def per_task() -> tuple[Any, list[Message]]:
    return _run(PER_TASK, PER_TASK_RATES)


def _consumed(report: Any) -> int:
    """A trial some decided test consumed, early in its pairs (so every later state depends on it)."""
    decided = [t for t in report.tests if t.result.decision in (Decision.A_BETTER, Decision.B_BETTER)]
    assert decided
    return min(decided, key=lambda t: t.index).trials_b[1]


@pytest.mark.parametrize("design", ["holm", "per_task"])
def test_design_audits_clean(design: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> None:
    config, messages = request.getfixturevalue(design)
    report = audit(bag(tmp_path / "bag", messages, "mcap"))
    assert report.verified, [v.message for v in report.violations]
    assert report.statuses_checked > 0 and report.final_state == "finished"
    if design == "holm":
        assert len(report.tests) == 6 and {t.task for t in report.tests} == {""}
        assert sum(t.result.decision != Decision.BUDGET_EXHAUSTED for t in report.tests) >= 3
    else:
        assert [t.task for t in report.tests] == ["push", "stack"]
        assert {t.trials_a and report.trials[t.trials_a[0] - 1].task for t in report.tests} == {"push", "stack"}
    assert all(t.checked > 0 for t in report.tests)


@pytest.mark.parametrize("design", ["holm", "per_task"])
def test_design_exit_status(design: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> None:
    from evalstop_ros.cli.main import main

    _, messages = request.getfixturevalue(design)
    assert main(["audit", str(bag(tmp_path / "bag", messages, "sqlite3"))]) == 0


@pytest.mark.parametrize("design", ["holm", "per_task"])
def test_tampered_design_names_the_trial(design: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> None:
    _, messages = request.getfixturevalue(design)
    clean = audit(bag(tmp_path / "clean", messages, "mcap"))
    trial = _consumed(clean)
    report = audit(bag(tmp_path / "bag", alter_journal_score(messages, trial), "mcap"))
    assert not report.verified
    assert report.named_trials == (trial,), [v.message for v in report.violations]
    assert {"score_mismatch", "status_mismatch"} <= {v.code for v in report.violations}
    assert any(re.search(rf"\btrial {trial}\b", v.message) for v in report.violations)


def test_adastop_audits_clean(tmp_path: pathlib.Path) -> None:
    overrides = {"policies": ["a1", "a2", "a3"], "design": "adastop",
                 "adastop": {"n_per_interim": 3, "n_interims": 4, "n_permutations": 200, "permutation": "relabel"},
                 "metrics": [{"name": "progress"}], "n_max": 50}
    _, messages = _run(overrides, {"a1": 0.05, "a2": 0.5, "a3": 0.95})
    report = audit(bag(tmp_path / "bag", messages, "mcap"))
    assert report.verified, [v.message for v in report.violations]
    assert report.statuses_checked > 0 and all(t.method == "adastop" for t in report.tests)


def test_old_comparison_status_definition(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """A bag whose embedded ComparisonStatus has no ``task`` (recorded before multi-task claims)
    audits like one with it."""
    source = interfaces.msg_dir()
    assert source is not None
    reports = {}
    for variant in ("old", "new"):
        msgs = tmp_path / f"msg-{variant}"
        msgs.mkdir()
        for path in source.glob("*.msg"):
            text = path.read_text(encoding="utf-8")
            if variant == "old" and path.stem == "ComparisonStatus":
                text = re.sub(r"(?m)^string task\s*$", "", text)
            elif variant == "old" and path.stem == "SessionStatus":
                text = re.sub(r"(?m)^string\[\] active_tasks\s*$", "", text)
            elif path.stem == "ComparisonStatus" and not re.search(r"(?m)^string task\b", text):
                text += "\nstring task\n"
            (msgs / path.name).write_text(text, encoding="utf-8")
        monkeypatch.setenv("EVALSTOP_MSG_DIR", str(msgs))
        interfaces.typestore.cache_clear()
        try:
            lab = SimulatedLab({"policy_a": 0.2, "policy_b": 0.9})
            messages = simulate_recording(make_config(**{**BASE, "n_max": 30}), lab)
            fields = set(type(next(m.msg for m in messages if m.topic == "comparison_status")).__dataclass_fields__)
            assert ("task" in fields) == (variant == "new")
            written = bag(tmp_path / f"bag-{variant}", messages, "mcap")
        finally:
            interfaces.typestore.cache_clear()
        monkeypatch.delenv("EVALSTOP_MSG_DIR")
        reports[variant] = audit(written)  # read with the bag's own definitions
        assert reports[variant].verified, [v.message for v in reports[variant].violations]
    assert reports["old"].statuses_checked == reports["new"].statuses_checked
