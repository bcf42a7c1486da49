"""Multi-policy sessions: Bonferroni and sequential Holm, checked against the statistics core.

The session side of issue 5's acceptance check: a 4-policy session's live decisions, stopping
trials, p-values and compact letter display equal ``run_family`` (``FamilyProcess``) on the same
journaled scores, and equal ``offline_decisions``/``offline_letters`` of the journal.

The lab (session_sim.outcome): success rates 0.1, 0.45, 0.6, 0.95, progress 1 on success and
uniform below 0.8 otherwise; N-SCORE (K = 21) on progress, alpha 0.05, n_max 60.  With seed 6
sequential Holm decides (p0, p2) after 39 pairs where Bonferroni needs 48.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import pytest
import session_sim as sim

from evalstop_ros.session import (
    EvaluationSession,
    SessionState,
    analysis,
    offline_decisions,
    offline_letters,
    read_journal,
)
from evalstop_ros.session.trials import TrialBook
from evalstop_ros.stats.families import run_family
from evalstop_ros.stats.sequential import Decision

#: The randomization key of these sessions (fixed so that the pinned stops below are reproducible).
FAMILY_KEY = hashlib.sha256(b"evalstop test keyf4").digest()

FOUR = ["p0", "p1", "p2", "p3"]
RATES = {"p0": 0.1, "p1": 0.45, "p2": 0.6, "p3": 0.95}
SETTINGS = {"policies": FOUR, "seed": 6, "n_max": 60, "alpha": 0.05,
            "metrics": [{"name": "progress", "method": "nscore", "bins": 21}]}


def family_config(correction: str, design: str = "paired"):
    return sim.make_config(**SETTINGS, correction=correction, design=design)


@dataclasses.dataclass(frozen=True)
class Run:
    """A finished 4-policy session and what it reported."""

    config: object
    path: object
    comparisons: list
    letters: dict
    trials: int


def run_session(path, correction: str, design: str = "paired") -> Run:
    config = family_config(correction, design)
    with EvaluationSession.open(path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        session.start()
        sim.drive(session, RATES)
        assert session.state == SessionState.FINISHED
        return Run(config, path, session.comparisons(), session.letters(), session.status().trials_scored)


@pytest.fixture(scope="module", params=[("bonferroni", "paired"), ("holm", "paired"), ("holm", "independent")],
                ids=lambda p: "-".join(p))
def finished(request, tmp_path_factory) -> Run:
    correction, design = request.param
    return run_session(tmp_path_factory.mktemp("fam") / "session.db", correction, design)


def journaled_scores(run: Run) -> dict[str, list[float]]:
    """Each policy's effective progress scores, in trial order (= round order)."""
    book = TrialBook().fold(read_journal(run.path).events)
    return {p: [r.score.progress for r in book.scored(p)] for p in FOUR}


def test_live_decisions_and_letters_equal_run_family(finished):
    config = finished.config
    family = run_family(journaled_scores(finished), method="nscore", alpha=0.05, correction=config.correction,
                        n_max=60, bins=21)
    assert [(c.policy_a, c.policy_b) for c in finished.comparisons] == [
        (c.policy_a, c.policy_b) for c in family.comparisons]
    assert [(c.decision, c.stopping_trial) for c in finished.comparisons] == list(
        zip(family.decisions, family.stopping_trials))
    for status, pvalue in zip(finished.comparisons, family.pvalues):  # same arithmetic: exact
        assert status.pvalue == pytest.approx(pvalue, rel=1e-12)
    assert finished.trials == sum(family.n_trials)
    assert finished.letters == family.letters()


def test_live_decisions_and_letters_equal_the_offline_analysis(finished):
    offline = offline_decisions(finished.config, finished.path)
    assert [(o.policy_a, o.policy_b, o.result.decision, o.result.stopping_trial, o.result.n_observed) for o in offline] \
        == [(c.policy_a, c.policy_b, c.decision, c.stopping_trial, c.n) for c in finished.comparisons]
    for status, result in zip(finished.comparisons, offline):
        assert status.pvalue == pytest.approx(result.result.pvalue, rel=1e-12)
    assert offline_letters(finished.config, finished.path) == finished.letters


def test_the_families_decide_and_separate_policies(finished):
    decisions = [c.decision for c in finished.comparisons]
    assert decisions.count(Decision.B_BETTER) >= 4 and Decision.BUDGET_EXHAUSTED in decisions
    assert len(set(finished.letters.values())) >= 3


def test_holm_stops_sooner_than_bonferroni_on_the_same_lab(tmp_path):
    bonferroni = run_session(tmp_path / "b.db", "bonferroni")
    holm = run_session(tmp_path / "h.db", "holm")
    stops = {(c.policy_a, c.policy_b): c.stopping_trial for c in bonferroni.comparisons}
    for status in holm.comparisons:
        if stops[status.policy_a, status.policy_b] is not None:  # Holm never claims less
            assert status.stopping_trial is not None and status.stopping_trial <= stops[status.policy_a, status.policy_b]
    assert stops["p0", "p2"] == 41 and next(c.stopping_trial for c in holm.comparisons if
                                            (c.policy_a, c.policy_b) == ("p0", "p2")) == 40
    assert holm.trials < bonferroni.trials


def test_rows_report_the_bonferroni_level_and_a_two_sided_pvalue(finished):
    # Under Holm alpha / m is the first threshold (alpha / 2m per direction), which the step-down relaxes.
    assert all(c.alpha == pytest.approx(0.05 / 6) for c in finished.comparisons)
    assert all(0.0 < c.pvalue <= 1.0 and c.evalue > 0 for c in finished.comparisons)


# -- replay and edits under Holm ---------------------------------------------------------------------
def freeze(session: EvaluationSession) -> tuple[object, ...]:
    def clean(value: object) -> object:
        return "nan" if isinstance(value, float) and math.isnan(value) else value

    return session.status(), [tuple(clean(v) for v in dataclasses.astuple(c)) for c in session.comparisons()]


def test_holm_session_reopens_to_the_same_state(journal_path):
    config = family_config("holm")
    with EvaluationSession.open(journal_path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        session.start()
        for _ in range(170):  # mid-session, some comparisons decided, a pair ahead of the analysis
            sim.step(session, RATES)
        assert 0 < session.status().comparisons_decided < 6
        snapshot = freeze(session)
    with EvaluationSession.open(journal_path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        assert freeze(session) == snapshot


def test_holm_edits_of_open_comparisons_keep_the_offline_equivalence(journal_path):
    # Voids and corrections of pairs only open comparisons consumed are allowed; the session still
    # ends where the offline re-analysis of the final scores does.
    config = family_config("holm")
    with EvaluationSession.open(journal_path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        session.start()
        edits, pending = [], {90: "void", 100: "correct", 150: "void", 160: "correct", 170: "void"}
        while sim.step(session, RATES) is not None:
            action = pending.pop(session.status().trials_scored, None)
            if action is None:
                continue
            scored = TrialBook().fold(read_journal(journal_path).events).scored()
            if action == "void" and session.state == SessionState.RUNNING:
                edits.append(session.undo_last("scene was not reset").applied)
            elif action == "correct" and session.state == SessionState.RUNNING:
                # the earliest score the decided comparisons did not consume (a refusal changes nothing)
                applied = any(session.correct_score(r.trial_id, not r.score.success, 0.5, "wrong key").applied
                              for r in scored[len(scored) // 4:])
                edits.append(applied)
        assert edits == [True] * 5
        offline = offline_decisions(config, journal_path)
        assert [(o.result.decision, o.result.stopping_trial, o.result.n_observed) for o in offline] == [
            (c.decision, c.stopping_trial, c.n) for c in session.comparisons()]
        assert offline_letters(config, journal_path) == session.letters()


def test_holm_refuses_to_change_a_pair_a_decision_consumed(journal_path):
    config = family_config("holm")
    with EvaluationSession.open(journal_path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        session.start()
        while not any(c.decision == Decision.B_BETTER for c in session.comparisons()):
            sim.step(session, RATES)
        decided = next(c for c in session.comparisons() if c.decision == Decision.B_BETTER)
        book = TrialBook().fold(read_journal(journal_path).events)
        first = next(r for r in book.scored(decided.policy_a))
        before = freeze(session)
        outcome = session.correct_score(first.trial_id, not first.score.success, 0.5, "late doubt")
        assert not outcome.applied and "already decided B_BETTER" in outcome.reason
        assert freeze(session) == before


def test_holm_edit_that_would_move_a_decision_is_refused(journal_path, monkeypatch):
    # Holm's rule is monotone, so an edit sparing the decided comparisons' pairs can move a decision
    # only through a cascade (a decision made possible earlier); a stub re-analysis stands in for it.
    config = family_config("holm")
    with EvaluationSession.open(journal_path, config, "fam", durable=False, plan_key=FAMILY_KEY) as session:
        session.start()
        while not any(c.decision == Decision.B_BETTER for c in session.comparisons()):
            sim.step(session, RATES)
        index = next(i for i, c in enumerate(session.comparisons()) if c.decision == Decision.B_BETTER)
        stop = session.comparisons()[index].stopping_trial
        real = analysis.HolmFamily.replayed

        def earlier(self):
            out = real(self)
            return [(d, s - 1 if s == stop and k == index else s, r) for k, (d, s, r) in enumerate(out)]

        monkeypatch.setattr(analysis.HolmFamily, "replayed", earlier)
        undecided = next(c for c in session.comparisons() if c.decision == Decision.CONTINUE)
        book = TrialBook().fold(read_journal(journal_path).events)
        trial = next(r for r in reversed(book.scored(undecided.policy_b)))
        outcome = session.correct_score(trial.trial_id, not trial.score.success, 0.5, "wrong key")
        assert not outcome.applied
        assert f"was decided B_BETTER by sequential Holm at step {stop}" in outcome.reason
        assert f"would decide it at step {stop - 1}" in outcome.reason
