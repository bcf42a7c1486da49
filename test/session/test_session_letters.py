"""The one letter-display rule (``session.letters.letters``) that the session, ``offline_letters`` and the audit share.

Which pairs a compact letter display separates (seed 000 §VI, Fig. 2 procedure): with a pooled
claim, a directional decision of the pair's test; with a non-pooled claim, an established claim,
or with ``task`` that task's claim.  Means come from the trial book.
"""

from __future__ import annotations

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession, SessionError, SessionState, offline_letters
from evalstop_ros.session.journal import read_journal
from evalstop_ros.session.letters import letters
from evalstop_ros.session.trials import TrialBook
from evalstop_ros.stats.sequential import Decision

PAIR_01 = frozenset(("pi0", "pi1"))
PAIR_02 = frozenset(("pi0", "pi2"))
PAIR_12 = frozenset(("pi1", "pi2"))


def _book(tmp_path, config, rates):
    path = tmp_path / "j.sqlite"
    with EvaluationSession.open(path, config, "letters", durable=False) as session:
        session.start()
        sim.drive(session, rates)
        assert session.state == SessionState.FINISHED
        live = session.letters()
    return path, TrialBook().fold(read_journal(path).events), live


def test_pooled_letters_separate_directional_decisions_only(tmp_path):
    config = sim.make_config(policies=["pi0", "pi1", "pi2"], metrics=[{"name": "progress"}], n_max=30)
    path, book, live = _book(tmp_path, config, {"pi0": 0.1, "pi1": 0.5, "pi2": 0.9})
    decisions = [(PAIR_01, "progress", Decision.BUDGET_EXHAUSTED), (PAIR_02, "progress", Decision.B_BETTER),
                 (PAIR_12, "progress", Decision.CONTINUE)]
    shown = letters(config, book, None, None, decisions, [])
    # only pi0 and pi2 are separated: pi1 shares a letter with both
    assert set(shown["pi1"]) & set(shown["pi0"]) and set(shown["pi1"]) & set(shown["pi2"])
    assert not set(shown["pi0"]) & set(shown["pi2"])
    # the live session and the offline re-analysis give the same display of their own decisions
    assert offline_letters(config, path) == live


def test_claim_letters_read_the_established_claim_or_the_task_claim(tmp_path):
    tasks = [{"id": t, "initial_conditions": [{"id": f"{t}c", "reset_instructions": "r"}]} for t in ("t0", "t1")]
    config = sim.make_config(policies=["pi0", "pi1"], tasks=tasks, claim="per-task", n_max=50,
                             metrics=[{"name": "progress", "alternative": "greater"}])
    path, book, live = _book(tmp_path, config, {"pi0": 0.1, "pi1": 0.9})
    claims = [(PAIR_01, "progress", False, (Decision.B_BETTER, Decision.CONTINUE))]
    assert letters(config, book, None, None, [], claims) == {"pi1": "a", "pi0": "a"}  # not established
    separated = letters(config, book, None, "t0", [], claims)
    assert not set(separated["pi0"]) & set(separated["pi1"])
    assert len(set(letters(config, book, None, "t1", [], claims).values())) == 1
    assert offline_letters(config, path) == live
    with pytest.raises(SessionError, match="`task` should be one of"):
        letters(config, book, None, "nope", [], claims)


def test_adastop_letters_live_equal_offline(tmp_path):
    config = sim.make_config(**sim.ADASTOP_SESSION)
    path, _, live = _book(tmp_path, config, sim.adastop_lab)
    assert live and offline_letters(config, path) == live
