"""``evalstop audit``: verify a recorded session, from a rosbag or from its journal (a thin layer over :func:`evalstop_ros.audit.audit`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import pathlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._common import CliError, print_json

if TYPE_CHECKING:  # the audit needs rosbags, the session pydantic: imported when the verb runs
    from ..audit import AuditReport, ComparisonAudit
    from ..session.config import SessionConfig

DESCRIPTION = """\
Rebuild a session from a rosbag (sqlite3 or mcap, from `ros2 bag record` or `evalstop record`)
or from its SQLite journal, re-run every comparison with the statistics core on the scores in
collection order, and check that every published decision, stopping trial, p-value and
e-value is reproduced, that STEP's randomization replays from the logged seed, and that the
protocol held: no score for a trial never requested, no wrong token, no trial requested and
never scored, no data after the stop, no change of alpha / n_max / method, no correction
without a reason.  Each violation names its trial."""
EPILOG = """\
examples (examples/ ships a recorded session: its bag and its journal):
  evalstop audit examples/session_bag/ --json
  evalstop audit examples/session.db

A hub export (`evalstop hub export`, JSON lines) is audited as the hub's record: its hash chain,
the protocol of every lease and result, each station's uploads against the station's own journal
(--station DIR, repeatable) and, with --against a saved /v1/leaderboard, every published decision
and the ranking re-derived (docs/hub.md).

exit status: 0 everything verifies, 1 a violation or an unreproduced decision,
2 usage or input error (unreadable source, no configuration in the bag and no --config)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop audit``."""
    add_source_arguments(parser)
    parser.add_argument("--operator-keys", default=None, metavar="FILE",
                        help="the manager's operator key file: check that every signed score journaled is what "
                        "its operator signed (docs/integrity.md)")
    parser.add_argument("--against", default=None, metavar="SOURCE",
                        help="the other record of the session (a bag for a journal, the journal for a bag): "
                        "compare the journal with the recorded session_event stream event by event; for a hub "
                        "export, a saved /v1/leaderboard (JSON) to re-derive")
    parser.add_argument("--station", action="append", default=[], metavar="DIR",
                        help="hub export only: a station's directory (its station.db), "
                        "checked against the hub's results (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared with ``evalstop report``: the source and how to pick a session in it."""
    parser.add_argument("source", help="rosbag2 directory (or a .mcap/.db3 file in one), or a session journal (.db)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="session config (YAML) for a bag recorded without session_config; must match the "
                        "recorded one otherwise (default: the recorded one)")
    parser.add_argument("--key", default=None, metavar="HEX",
                        help="the session's randomization key, for a bag recorded without session_event (the "
                        "journal's key_revealed event has it)")
    parser.add_argument("--namespace", default=None, help="namespace of the manager's topics, if the bag has several")
    parser.add_argument("--session", default=None, dest="session_id", help="session id, if the bag has several")


def _key(text: str | None) -> bytes | None:
    """``--key``: 64 hex characters."""
    if text is None:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    from ..session.plan import KEY_BYTES  # here, not at the top: keeps `--help` fast

    if len(key) != KEY_BYTES:
        raise CliError(f"--key must be {2 * KEY_BYTES} hex characters (the journal's key_revealed key); found {text!r}")
    return key


def load(args: argparse.Namespace) -> AuditReport:
    """Run the audit the source options describe (input problems as :class:`CliError`)."""
    try:
        from ..audit import AuditError, audit
    except ImportError as err:
        raise CliError(f"the audit needs rosbags ({err}); pip install 'evalstop[audit]'") from err
    from ..session.auth import AuthError, read_keys
    from ..session.config import ConfigError, load_config  # here, not at the top: keeps `--help` fast

    config: SessionConfig | None = None
    if args.config:
        try:
            config = load_config(args.config)
        except ConfigError as err:
            raise CliError(str(err)) from err
    try:
        operator_keys = read_keys(args.operator_keys) if getattr(args, "operator_keys", None) else None
        return audit(args.source, config=config, namespace=args.namespace, session_id=args.session_id,
                     key=_key(args.key), operator_keys=operator_keys, against=getattr(args, "against", None))
    except AuthError as err:
        raise CliError(str(err)) from err
    except AuditError as err:
        raise CliError(str(err)) from err


def run(args: argparse.Namespace) -> int:
    """Audit the source; 0 when everything verifies, 1 otherwise."""
    from ..hub.export import is_hub_export

    if is_hub_export(args.source):
        return _run_hub(args)
    if args.station:
        raise CliError("--station is for a hub export (evalstop hub export); the source is not one")
    report = load(args)
    if args.json:
        print_json(report.to_dict())
    else:
        print("\n".join(format_report(report)))
    return 0 if report.verified else 1


def _run_hub(args: argparse.Namespace) -> int:
    """Audit a hub export (:mod:`evalstop_ros.hub.audit`)."""
    from ..hub.audit import audit_export
    from ..hub.errors import HubError

    try:
        against = json.loads(pathlib.Path(args.against).read_text(encoding="utf-8")) if args.against else None
    except (OSError, ValueError) as err:
        raise CliError(f"cannot read the leaderboard {args.against}: {err}") from err
    try:
        report = audit_export(args.source, args.station, against)
    except HubError as err:
        raise CliError(str(err)) from err
    if args.json:
        print_json(report.to_dict())
        return 0 if report.verified else 1
    stations = f", {len(report.stations)} station journal(s)" if report.stations else ""
    print(f"evalstop audit: hub export {report.source}: {report.entries} entries, {report.results} results{stations}")
    for problem in report.problems:
        print(f"  VIOLATION {problem}")
    for note in report.notes:
        print(f"  note: {note}")
    board = report.board
    if board:
        family = board["family"]
        print(f"  leaderboard{' (checked against the published one)' if args.against else ' re-derived'}: "
              f"{board['n_results']} results, {' > '.join(r['policy'] for r in board['ranking'])}; "
              f"{sum(p['better'] is not None for p in board['pairs'])} of {family['pairs']} pairs decided "
              f"(sequential Holm, family-wise level {board['alpha']:g})")
    print("VERIFIED" if report.verified else f"NOT VERIFIED: {len(report.problems)} problem(s)")
    return 0 if report.verified else 1


def _when(stamp_ns: int) -> str:
    return datetime.datetime.fromtimestamp(stamp_ns / 1e9, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _published(test: ComparisonAudit) -> str:
    from ..audit.report import fmt
    from ..stats.sequential import Decision

    pub = test.published
    if pub is None:
        return "nothing published"
    name = Decision(pub.decision).name if pub.decision in Decision._value2member_map_ else str(pub.decision)
    text = f"{name} at {pub.stopping_trial}" if pub.stopping_trial else f"{name} after {pub.n}"
    if not math.isnan(pub.pvalue):
        text += f", p={fmt(pub.pvalue)}"
    return text


def format_report(report: AuditReport) -> list[str]:
    """The human-readable audit (what ``evalstop audit`` prints without ``--json``)."""
    from ..audit.report import fmt

    rec, cfg = report.record, report.config
    summary = report.to_dict()["counts"]
    lines = [
        f"evalstop audit: {rec.kind} {rec.source} ({rec.storage}), session {rec.session_id}, "
        f"{_when(rec.start_ns)} to {_when(rec.end_ns)}",
        f"  configuration {cfg.config_hash[:12]} from {report.config_origin}: {', '.join(cfg.policies)}; "
        f"alpha {cfg.alpha:g}, n_max {cfg.n_max}, seed {cfg.seed}, design {cfg.design}, scoring {cfg.scoring}",
        f"  {summary['trials_requested']} trials requested, {summary['trials_scored']} scored, "
        f"{summary['trials_voided']} voided, {summary['corrections']} corrected; session {report.final_state}",
        "  read " + ", ".join(f"{name} {count}" for name, count in rec.topic_counts),
        "",
        f"{'comparison':<28} {'metric/method':<18} {'alpha':>8}  {'recomputed':<17} {'pair':>5} {'p-value':>10}  "
        f"published",
    ]
    for test in report.tests:
        res = test.result
        verdict = f"reproduced ({test.checked} states)" if test.reproduced else "NOT REPRODUCED"
        where = f" @{test.task}" if test.task else ""
        lines.append(
            f"{test.policy_a + ' vs ' + test.policy_b + where:<28} {test.metric + '/' + test.method:<18} "
            f"{test.alpha:>8.4g}  "
            f"{res.decision.name:<17} {res.stopping_trial or res.n_observed:>5} {fmt(res.pvalue):>10}  "
            f"{_published(test)}: {verdict}")
    for claim in report.claims:
        res = claim.result
        claimed = [f"@{t}" for t, d in zip(res.tasks, res.task_claims) if d.name != "CONTINUE"]
        made = f"made on {', '.join(claimed)}" if res.established else "not made"
        lines.append(f"{claim.policy_a + ' vs ' + claim.policy_b:<28} {claim.metric:<18} {res.alpha:>8.4g}  "
                     f"{cfg.claim} claim over {', '.join('@' + t for t in res.tasks)}: {made} "
                     f"({res.n_trials} pairs in all)")
    steps = [t for t in report.tests if t.step is not None]
    if steps:
        lines.append("")
        lines.append("STEP randomization replayed from the configuration's seed (U_n ~ Unif[0,1) from (seed, n)):")
        for test in steps:
            step = test.step
            assert step is not None
            stop = (f"stops at pair {step.stopping_trial}: U = {step.draw:.6f} < w = {step.weight:.6g}"
                    if step.stopping_trial else "no draw fell below its weight (no decision)")
            where = f" @{test.task}" if test.task else ""
            lines.append(f"  {test.policy_a} vs {test.policy_b}{where} {test.metric}: seed {step.seed}, {step.draws} draws; "
                         f"{stop}")
    if report.letters:
        lines.append(f"compact letter display ({cfg.metrics[0].name}): "
                     + ", ".join(f"{p}={letters}" for p, letters in report.letters.items()))
    lines.extend(f"note: {note}" for note in report.notes)
    from ..session.guarantees import family_statement

    lines.append(f"guarantee: {family_statement(cfg, len(report.tests))}")
    if report.violations:
        lines.append("")
        lines.extend(_violations(report))
        named = report.named_trials
        lines.append(f"audit: FAILED: {len(report.violations)} violation(s)"
                     + (f", naming trial(s) {', '.join(map(str, named))}" if named else ""))
    else:
        decided = sum(t.result.decision.name != "CONTINUE" for t in report.tests)
        lines.append(f"audit: VERIFIED: {decided} decision(s) and {report.statuses_checked} published states "
                     "reproduced, no protocol violation")
    return lines


def _violations(report: AuditReport) -> Iterable[str]:
    for v in report.violations:
        where = f" [{_when(v.stamp_ns)}]" if v.stamp_ns else ""
        yield f"VIOLATION {v.code}: {v.message}{where}"
