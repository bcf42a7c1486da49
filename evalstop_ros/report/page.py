"""The report's static HTML page and its CSV exports.

One self-contained page (inline CSS, no script, images by relative path) so that the output
directory can be zipped, mailed or served as it is.
"""

from __future__ import annotations

import csv
import datetime
import html
import math
import pathlib
from collections.abc import Iterable, Sequence

from .. import __version__
from ..audit import AuditReport
from ..audit.verify import fmt
from ..stats.sequential import Decision

__all__ = ["write_decisions_csv", "write_page", "write_trials_csv"]

_CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; } th { background: #f2f4f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { padding: 0.7em 1em; border-radius: 4px; font-weight: bold; margin: 1em 0; }
.ok { background: #e3f4e8; border: 1px solid #2e8b57; } .bad { background: #fbe7e6; border: 1px solid #c0392b; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #e5e5e5; }
figcaption { font-size: 0.88em; color: #555; margin-top: 0.3em; }
figure.video { display: inline-block; margin: 0.3em 0.8em 0.3em 0; } h3 { font-size: 1em; margin: 1em 0 0.3em; }
.meta { color: #555; font-size: 0.9em; } code { background: #f4f4f4; padding: 0 0.2em; }
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _when(stamp_ns: int) -> str:
    return datetime.datetime.fromtimestamp(stamp_ns / 1e9, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td class='num'>{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(src: str, alt: str, caption: str) -> str:
    return (f"<figure><img src='{_e(src)}' alt='{_e(alt)}'>"
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def write_page(report: AuditReport, figures: Sequence[tuple[str, str, str]], path: pathlib.Path,
               savings: Sequence[tuple[str, int, int]], videos: str = "") -> pathlib.Path:
    """Write ``index.html``.

    :param report: The audit.
    :param figures: ``(file name, alt text, caption)`` per figure, in page order.
    :param path: The page to write.
    :param savings: ``(label, used, fixed)`` rows (:func:`~.figures.savings`).
    :param videos: The "Trial videos" section (:func:`~.videos.videos_section`), if any.
    :returns: ``path``.
    """
    rec, cfg = report.record, report.config
    counts = report.to_dict()["counts"]
    if report.verified:
        verdict = (f"<div class='verdict ok'>Audit: VERIFIED. Every published decision and p-value "
                   f"({report.statuses_checked} published states) is reproduced by the statistics core, and the "
                   "protocol held.</div>")
    else:
        items = "".join(f"<li><code>{_e(v.code)}</code> {_e(v.message)}</li>" for v in report.violations)
        verdict = (f"<div class='verdict bad'>Audit: FAILED with {len(report.violations)} violation(s).<ul>{items}"
                   "</ul></div>")
    decisions = []
    for test in report.tests:
        res = test.result
        decisions.append((
            f"{test.policy_a} vs {test.policy_b}", test.metric, test.method, f"{test.alpha:.4g}", res.decision.name,
            res.stopping_trial or "-", res.n_observed, fmt(res.pvalue),
            fmt(float(res.evalues[-1])) if res.evalues.size else "-",
            fmt(float(test.values_a.mean()), 3) if test.values_a.size else "-",
            fmt(float(test.values_b.mean()), 3) if test.values_b.size else "-",
            "yes" if test.reproduced else "NO",
        ))
    letters = [(policy, letters) for policy, letters in report.letters.items()]
    notes = "".join(f"<li>{_e(n)}</li>" for n in report.notes)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>evalstop report: {_e(rec.session_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Evaluation session {_e(rec.session_id)}</h1>",
        f"<p class='meta'>{_e(rec.kind)} <code>{_e(rec.source)}</code> ({_e(rec.storage)}), "
        f"{_e(_when(rec.start_ns))} to {_e(_when(rec.end_ns))}; configuration "
        f"<code>{_e(cfg.config_hash[:12])}</code> from {_e(report.config_origin)}; report by evalstop "
        f"{_e(__version__)}</p>",
        verdict,
        "<h2>Session</h2>",
        _table(("policies", "metrics", "alpha", "n_max", "seed", "design", "scoring", "trials scored", "state"), [(
            ", ".join(cfg.policies), ", ".join(f"{m.name}/{m.method}" for m in cfg.metrics), f"{cfg.alpha:g}",
            cfg.n_max, cfg.seed, cfg.design, cfg.scoring, counts["trials_scored"], report.final_state)]),
        "<h2>Decisions</h2>",
        "<p>Policy A is the baseline, B the candidate. Each row is recomputed from the recorded scores in "
        "collection order; <em>reproduced</em> says whether every published state of that comparison matched.</p>",
        _table(("comparison", "metric", "method", "alpha", "decision", "stopping pair", "pairs", "anytime p",
                "e-value", "mean A", "mean B", "reproduced"), decisions, numeric=(3, 5, 6, 7, 8, 9, 10)),
        "<h2>Compact letter display</h2>",
        (_table(("policy", "letters"), letters) + "<p>Policies that share a letter were not found different.</p>")
        if letters else "<p>Not available: some policy has no scored trial.</p>",
        "<h2>Trials saved</h2>",
        _table(("test", "trials used", "fixed-N batch", "saved"),
               [(label.replace("\n", " "), used, fixed, f"{fixed - used} ({(fixed - used) / fixed:.0%})" if fixed
                 else "-") for label, used, fixed in savings], numeric=(1, 2, 3)),
        "<h2>Figures</h2>",
        *(_figure(src, alt, caption) for src, alt, caption in figures),
        videos,
        "<h2>Data</h2>",
        "<p><a href='trials.csv'>trials.csv</a>: every trial (policy, condition, effective score, scorer, "
        "corrections, voids). <a href='decisions.csv'>decisions.csv</a>: the table above.</p>",
        f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "",
        "</body></html>",
    ]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_trials_csv(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """Every trial, one row each, in trial order (effective scores; empty when unscored)."""
    fields = ("trial_id", "round", "policy", "label", "task", "initial_condition", "attempts", "rerun_of",
              "requested_ns", "scored_ns", "success", "progress", "scorer", "notes", "corrected", "voided",
              "post_decision")
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for t in report.trials:
            writer.writerow([
                t.trial_id, t.round, t.policy, t.label, t.task, t.initial_condition, t.attempts,
                "" if t.rerun_of is None else t.rerun_of, t.requested_ns, "" if t.scored_ns is None else t.scored_ns,
                "" if t.success is None else int(t.success), "" if t.progress is None else repr(t.progress),
                t.scorer, t.notes, int(t.corrected), int(t.voided), int(t.post_decision),
            ])
    return path


def write_decisions_csv(report: AuditReport, path: pathlib.Path) -> pathlib.Path:
    """One row per comparison x metric: the recomputed decision and what was published."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("policy_a", "policy_b", "metric", "method", "alpha", "decision", "stopping_trial", "pairs",
                         "pvalue", "evalue", "published_decision", "reproduced"))
        for test in report.tests:
            res = test.result
            pub = test.published
            published = "" if pub is None else (Decision(pub.decision).name
                                                 if pub.decision in Decision._value2member_map_ else pub.decision)
            writer.writerow((test.policy_a, test.policy_b, test.metric, test.method, repr(test.alpha),
                             res.decision.name, res.stopping_trial or "", res.n_observed,
                             "" if math.isnan(res.pvalue) else repr(res.pvalue),
                             "" if not res.evalues.size or math.isnan(res.evalues[-1]) else repr(float(res.evalues[-1])),
                             published, int(test.reproduced)))
    return path
