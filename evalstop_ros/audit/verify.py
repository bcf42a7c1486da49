"""The verifier: rebuild a session from its record, re-run the statistics, check every claim.

Configuration, counted trials, protocol, every published state against the offline analysis at its
pair count, STEP's randomization; the steps are in docs/audit.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence

from ..session.config import ConfigError, SessionConfig, parse_config
from ..session.config_input import config_diff
from ..session.letters import letters

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..session.offline import OfflineClaim
from ..session.trials import TrialBook
from ..stats.sequential import Decision
from .errors import AuditError
from .model import ConfigRecord, SessionRecord
from .recompute import Recomputation
from .report import (
    CODES,
    AuditReport,
    ComparisonAudit,
    StepReplay,
    TrialAudit,
    Violation,
)

__all__ = ["CODES", "AuditReport", "StepReplay", "ComparisonAudit", "TrialAudit", "Violation", "verify"]

class _Verifier(Recomputation):
    """One audit: the folding (:mod:`.fold`), protocol checks (:mod:`.protocol`) and recomputation
    (:mod:`.recompute`) of one record."""

def _resolve_config(record: SessionRecord, given: SessionConfig | None) -> tuple[SessionConfig, str, list[Violation]]:
    violations: list[Violation] = []
    configs: list[ConfigRecord] = list(record.configs)
    for c in configs:
        digest = hashlib.sha256(c.config_json.encode()).hexdigest()
        if digest != c.config_hash:
            violations.append(Violation("config_missing_hash", (), f"{c.origin} config hash {c.config_hash[:12]} is "
                                        f"not the SHA-256 of its JSON ({digest[:12]})", c.position, c.stamp_ns))
    if not configs:
        if given is None:
            raise AuditError(f"{record.source}: no session configuration in the {record.kind} (evaluation_manager "
                             "publishes it latched on session_config at session start); pass --config FILE")
        return given, "--config (not in the bag)", violations
    first = configs[0]
    for c in configs[1:]:
        if c.config_hash != first.config_hash:
            changes = config_diff(json.loads(first.config_json), json.loads(c.config_json))
            violations.append(Violation("config_changed", (), f"configuration changed mid-session ({c.origin}): "
                                        f"{'; '.join(changes) or 'hash only'}", c.position, c.stamp_ns))
    try:
        config = parse_config(json.loads(first.config_json), f"{first.origin} of {record.source}")
    except (ConfigError, json.JSONDecodeError) as err:
        raise AuditError(f"{record.source}: the recorded configuration is invalid: {err}") from err
    changes = config_diff(json.loads(first.config_json), config.to_dict())
    if changes:  # a form with fields left out or named otherwise: not this version's canonical dump
        raise AuditError(f"{record.source}: the recorded configuration is not in this version's canonical form "
                         f"({'; '.join(changes)}): another (development) version of evalstop wrote it; audit it with "
                         "that version")
    if given is not None and given.config_hash != config.config_hash:
        changes = config_diff(config.to_dict(), given.to_dict())
        violations.append(Violation("config_mismatch", (), f"--config differs from the recorded configuration: "
                                    f"{'; '.join(changes)}"))
    return config, first.origin, violations


def verify(record: SessionRecord, *, config: SessionConfig | None = None, key: bytes | None = None,
           operator_keys: Mapping[str, bytes] | None = None) -> AuditReport:
    """Audit one session record (module docstring).

    :param record: From :func:`~evalstop_ros.audit.bag.read_bag` or
        :func:`~evalstop_ros.audit.journal.read_journal_record`.
    :param config: A configuration to use when the record has none (a bag recorded without
        ``session_config``); when it has one, the two must agree.
    :param key: The session's randomization key, for a bag without ``session_event`` (which
        otherwise carries it, revealed at the end).
    :param operator_keys: The manager's operator keys (:func:`~evalstop_ros.session.auth.read_keys`):
        every signed score journaled must verify (``auth_mac_mismatch`` otherwise).
    :returns: The :class:`AuditReport`; ``report.verified`` is the verdict.
    :raises AuditError: When there is no configuration to audit against.
    """
    resolved, origin, config_violations = _resolve_config(record, config)
    v = _Verifier(record, resolved, origin, key)
    v.operator_keys = operator_keys
    v.violations.extend(config_violations)
    v.counted_stream()
    book = v.fold()
    v.stop()
    v.after_end()
    v.protocol(book)
    if resolved.schedule == "active":  # re-run every scheduling choice from the journal (seed 004)
        from .active import check_choices
        try:
            for code, message in check_choices(resolved, v.events, v.plan):
                v.violate(code, [], message, data=False)
        except ImportError as err:
            v.notes.append(f"schedule 'active': the task choices were not re-run ({err}; install evalstop[active])")
    v.config_checks(record.statuses)
    final, checked, reproduced, last = v.check_statuses(book)
    tests = []
    for index, ((ci, mi, comparison, metric, task), computed) in enumerate(zip(v.tests, final)):
        res = computed.result
        used = res.n_observed
        if res.decision in (Decision.A_BETTER, Decision.B_BETTER, Decision.BUDGET_EXHAUSTED) and not any(
                s.decision != Decision.CONTINUE for s in record.statuses
                if v.test_index.get((s.policy_a, s.policy_b, s.metric, s.task)) == index):
            v.violate("decision_unpublished", [], f"{v.label(index)}: the recomputation gives {res.decision.name} at "
                      f"pair {res.stopping_trial or res.n_observed}, but no published state carries a decision",
                      data=False)
        tests.append(ComparisonAudit.recomputed(
            result=res, values_a=computed.values_a[:used], values_b=computed.values_b[:used],
            index=index, policy_a=comparison.policy_a, policy_b=comparison.policy_b, metric=metric.name,
            method=metric.method, alternative=metric.alternative, alpha=v.alphas[index],
            seed=v.plan.step_seed(ci, mi), trials_a=computed.trials_a[:used], trials_b=computed.trials_b[:used],
            published=last.get(index), checked=checked.get(index, 0), reproduced=reproduced[index],
            step=v.step_replay(index, computed) if metric.method == "step" else None, task=task,
        ))
    final_state = v.final_state()
    if final_state == "finished":
        open_tests = [t.label for t in tests if t.result.decision == Decision.CONTINUE]
        if open_tests:
            v.violate("finished_undecided", [], f"the session was marked finished, but on recomputation "
                      f"{', '.join(open_tests)} is undecided", data=False)
    final_letters = _letters(resolved, book, tests, v.claims)
    published_letters = next((dict(s.letters) for s in sorted(record.states, key=lambda s: s.position, reverse=True)
                              if s.origin == "session_status"), None)
    if published_letters is not None and published_letters != final_letters:
        v.violate("letters_mismatch", [], f"final compact letter display published {published_letters}, recomputed "
                  f"{final_letters}", data=False)
    return AuditReport(
        record=v.record, config=resolved, config_origin=origin, trials=tuple(_trials(v, book)), tests=tuple(tests),
        letters=final_letters, violations=tuple(v.violations), notes=tuple(v.notes), final_state=final_state,
        statuses_checked=sum(checked.values()), claims=tuple(v.claims),
    )


def _letters(config: SessionConfig, book: TrialBook, tests: Sequence[ComparisonAudit],
             claims: Sequence[OfflineClaim]) -> dict[str, str]:
    """The session's compact letter display of its first metric, as ``EvaluationSession.letters``
    (``offline_letters``): policies differ when a directional decision (with a non-pooled claim: an
    established claim) separates them; means over every effective score."""
    return letters(config, book, None, None,
                   [(frozenset((t.policy_a, t.policy_b)), t.metric, t.result.decision) for t in tests],
                   [(frozenset((c.policy_a, c.policy_b)), c.metric, c.result.established, c.result.task_claims)
                    for c in claims])


def _trials(v: _Verifier, book: TrialBook) -> list[TrialAudit]:
    corrected = {e.trial_id for e in v.events if e.kind == "correction"}
    out = []
    for record in book.trials.values():
        scorer, notes = v.scorers.get(record.trial_id, ("", ""))
        out.append(TrialAudit(
            **{f.name: getattr(record, f.name) for f in dataclasses.fields(record)},
            requested_ns=v.request_stamps.get(record.trial_id, 0), scored_ns=v.score_stamps.get(record.trial_id),
            scorer=scorer, notes=notes, corrected=record.trial_id in corrected,
        ))
    return out
