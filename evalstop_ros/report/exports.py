"""The report's data exports, read directly by a notebook: ``trials.csv`` and ``decisions.csv`` (and Parquet with pyarrow).
"""

from __future__ import annotations

import csv
import datetime
import importlib
import importlib.util
import math
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..audit import AuditReport
from ..audit.model import StatusRecord
from ..session.values import ComparisonSnapshot
from ..stats.sequential import Decision
from .ranking import RANKING_COLUMNS, ab_ranking

__all__ = ["DECISION_COLUMNS", "TRIAL_COLUMNS", "claim_rows", "decision_rows", "iso_time", "trial_rows", "write_exports"]

#: ``trials.csv``: one row per trial, in trial order (name, meaning).
TRIAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("trial_id", "trial number in the session, from 1"),
    ("round", "round of the design (a pair of trials under design: paired)"),
    ("policy", "the policy run"),
    ("label", "the blinded label the operator saw"),
    ("task", "task id"),
    ("initial_condition", "initial condition id"),
    ("attempts", "runs of the trial (more than 1 after runner faults)"),
    ("rerun_of", "the trial this one re-runs, empty otherwise"),
    ("requested_at", "when the trial was requested (ISO 8601, UTC)"),
    ("scored_at", "when its counted score arrived (ISO 8601, UTC; empty if unscored)"),
    ("requested_ns", "the same stamp in ns since the epoch"),
    ("scored_ns", "the same stamp in ns since the epoch"),
    ("success", "effective success, 1 or 0 (after corrections; empty if unscored or voided)"),
    ("progress", "effective progress in [0, 1] (empty if unscored or voided)"),
    ("scorer", "who or what scored it (an operator name, auto:run_trial)"),
    ("notes", "the scorer's notes"),
    ("corrected", "1 if the score was corrected afterwards"),
    ("voided", "1 if the trial was voided"),
    ("post_decision", "1 if scored after every test of its policy had decided"),
)

#: ``decisions.csv``: one row per comparison x metric (x task under a multi-task claim), then one
#: row per multi-task claim (task ``*``).
DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("policy_a", "the baseline (A)"),
    ("policy_b", "the candidate (B)"),
    ("task", "the task of a per-task test; empty for a test over every task; * for a multi-task claim"),
    ("metric", "success or progress"),
    ("method", "the sequential test (step, nscore, ..., adastop)"),
    ("alternative", "two-sided, greater (B better) or less"),
    ("alpha", "the test's level after the family-wise split"),
    ("decision", "B_BETTER, A_BETTER, BUDGET_EXHAUSTED or CONTINUE, recomputed from the scores (a claim: its "
                 "direction once established, BUDGET_EXHAUSTED for no claim)"),
    ("claimed_tasks", "a multi-task claim: the tasks it makes a claim on, space-separated; empty otherwise"),
    ("stopping_trial", "the pair (AdaStop: trial of each agent) at which the test stopped; empty if it did not"),
    ("n", "pairs the test consumed (up to its stop; a claim: summed over its tasks)"),
    ("decided_at", "when the score that made the decision arrived (ISO 8601, UTC; empty if undecided; a claim: "
                   "the last of its task decisions)"),
    ("pvalue", "anytime-valid p-value at the stop or the last pair (two-sided: twice the smaller one-sided); empty "
               "where the method defines none (STEP, AdaStop, a claim)"),
    ("evalue", "e-value at the same point (empty where none)"),
    ("mean_a", "mean of A's metric over the pairs the test consumed (a claim: over every task's)"),
    ("mean_b", "mean of B's metric over the same pairs"),
    ("published_decision", "the decision the session published last"),
    ("reproduced", "1 if every published state of the test was reproduced"),
)


def iso_time(stamp_ns: int | None) -> str:
    """``stamp_ns`` (ns since the epoch) as ISO 8601 in UTC with microseconds; ``""`` for none.

    >>> iso_time(1_750_000_000_001_000_000)
    '2025-06-15T15:06:40.001000+00:00'
    """
    if stamp_ns is None:
        return ""
    return datetime.datetime.fromtimestamp(stamp_ns // 1000 / 1e6, datetime.UTC).isoformat(timespec="microseconds")


def trial_rows(report: AuditReport) -> list[dict[str, Any]]:
    """The rows of ``trials.csv`` (typed: ``None`` for empty)."""
    return [{
        "trial_id": t.trial_id, "round": t.round, "policy": t.policy, "label": t.label, "task": t.task,
        "initial_condition": t.initial_condition, "attempts": t.attempt, "rerun_of": t.rerun_of,
        "requested_at": iso_time(t.requested_ns), "scored_at": iso_time(t.scored_ns) or None,
        "requested_ns": t.requested_ns, "scored_ns": t.scored_ns,
        "success": None if t.success is None else int(t.success), "progress": t.progress, "scorer": t.scorer,
        "notes": t.notes, "corrected": int(t.corrected), "voided": int(t.voided), "post_decision": int(t.post_decision),
    } for t in report.trials]


def decision_rows(report: AuditReport) -> list[dict[str, Any]]:
    """The rows of ``decisions.csv`` (typed: ``None`` for empty): each recomputed test's JSON form
    (:meth:`~evalstop_ros.session.values.ComparisonSnapshot.to_dict`), when its decision arrived,
    and what the session published."""
    scored = {t.trial_id: t.scored_ns for t in report.trials}
    rows = []
    for test in report.tests:
        stop = test.stopping_trial or 0
        decided = [scored.get(i) for ids in (test.trials_a, test.trials_b) if len(ids) >= stop > 0
                   for i in [ids[stop - 1]]]
        stamps = [s for s in decided if s is not None]
        rows.append({**ComparisonSnapshot.to_dict(test), "decided_at": iso_time(max(stamps)) if stamps else None,
                     "claimed_tasks": None, "published_decision": _decision_text(test.published),
                     "reproduced": int(test.reproduced)})
    return rows + claim_rows(report, rows)


def claim_rows(report: AuditReport, test_rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per multi-task claim (seed 003 Eq. 11; task ``*``, as the session publishes it:
    :meth:`~evalstop_ros.session.values.ClaimSnapshot.as_comparison`), after the task tests'
    ``test_rows``."""
    out = []
    for claim in report.claims:
        res = claim.result
        members = [(test, row) for test, row in zip(report.tests, test_rows)
                   if (test.policy_a, test.policy_b, test.metric) == (claim.policy_a, claim.policy_b, claim.metric)]
        by_task = {test.task: (test, row) for test, row in members}
        claimed = [task for task, decision in zip(res.tasks, res.task_claims) if decision != Decision.CONTINUE]
        values_a = np.concatenate([t.values_a for t, _ in members]) if members else np.zeros(0)
        values_b = np.concatenate([t.values_b for t, _ in members]) if members else np.zeros(0)
        if res.established:
            decision = Decision.B_BETTER if res.alternative == "greater" else Decision.A_BETTER
        else:
            final = all(by_task[t][0].result.decision != Decision.CONTINUE for t in res.tasks if t in by_task)
            decision = Decision.BUDGET_EXHAUSTED if final else Decision.CONTINUE
        stamps = [by_task[t][1]["decided_at"] for t in claimed if t in by_task and by_task[t][1]["decided_at"]]
        method = members[0][0].method if members else ""
        snapshot = ComparisonSnapshot(
            policy_a=claim.policy_a, policy_b=claim.policy_b, metric=claim.metric, method=method,
            alternative=res.alternative, alpha=res.alpha, n=res.n_trials, decision=decision, pvalue=math.nan,
            evalue=math.nan, mean_a=float(values_a.mean()) if values_a.size else math.nan,
            mean_b=float(values_b.mean()) if values_b.size else math.nan, stopping_trial=None, task="*")
        published = [s for s in report.record.statuses if s.task == "*" and
                     (s.policy_a, s.policy_b, s.metric) == (claim.policy_a, claim.policy_b, claim.metric)]
        name = f"{claim.policy_a} vs {claim.policy_b} {claim.metric} ({report.config.claim} claim)"
        mismatch = any(v.code == "status_mismatch" and v.message.startswith(name) for v in report.violations)
        out.append({**snapshot.to_dict(), "decided_at": max(stamps) if stamps and res.established else None,
                    "claimed_tasks": " ".join(claimed) or None,
                    "published_decision": _decision_text(published[-1] if published else None),
                    "reproduced": int(not mismatch)})
    return out


def _decision_text(status: StatusRecord | None) -> str | None:
    if status is None:
        return None
    code = status.decision
    return Decision(code).name if code in Decision._value2member_map_ else str(code)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _write_csv(path: pathlib.Path, columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([name for name, _ in columns])
        for row in rows:
            writer.writerow([_csv_cell(row[name]) for name, _ in columns])


def _write_parquet(path: pathlib.Path, columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]]) -> None:
    pa = importlib.import_module("pyarrow")  # optional: only when installed
    pq = importlib.import_module("pyarrow.parquet")

    data: dict[str, Any] = {}
    for name, _ in columns:
        values = [row[name] for row in rows]
        if name.endswith("_at"):
            data[name] = pa.array([None if v is None else datetime.datetime.fromisoformat(v) for v in values],
                                  type=pa.timestamp("us", tz="UTC"))
        else:
            data[name] = values
    pq.write_table(pa.table(data), path)


def write_exports(report: AuditReport, out: pathlib.Path) -> list[pathlib.Path]:
    """Write ``trials.csv``, ``decisions.csv`` and, for an A/B session, ``ranking.csv``
    (:data:`~.ranking.RANKING_COLUMNS`), and their Parquet twins with pyarrow; the paths."""
    tables: list[tuple[str, Sequence[tuple[str, str]], list[dict[str, Any]]]] = [
        ("trials", TRIAL_COLUMNS, trial_rows(report)), ("decisions", DECISION_COLUMNS, decision_rows(report))]
    ranking = ab_ranking(report)
    if ranking is not None and ranking.rows:
        tables.append(("ranking", RANKING_COLUMNS, list(ranking.rows)))
    written = []
    for name, columns, rows in tables:
        _write_csv(out / f"{name}.csv", columns, rows)
        written.append(out / f"{name}.csv")
    if importlib.util.find_spec("pyarrow") is not None:
        for name, columns, rows in tables:
            _write_parquet(out / f"{name}.parquet", columns, rows)
            written.append(out / f"{name}.parquet")
    return written
