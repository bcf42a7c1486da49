"""A flood of oversized bad scores stays within stated bounds (journal, memory, log)."""

from __future__ import annotations

import logging
import os
import tracemalloc

import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.limits import LOG_BURST, NOTES_CHARS

#: Stated bounds: each rejection adds at most this much to the journal, whatever was sent ...
JOURNAL_BYTES_PER_REJECTION = 2048
#: ... and the whole flood at most this much to the session's Python heap.
HEAP_BYTES = 4 * 1024 * 1024


def test_a_thousand_oversized_bad_scores_stay_bounded(journal_path, caplog):
    megabyte = "x" * (1024 * 1024)
    with EvaluationSession.open(journal_path, sim.make_config(), "s1", durable=False) as session:
        session.start()
        trial = session.next_trial()
        session.record_runner_result(trial.trial_id, True, 1.0)
        before = os.path.getsize(journal_path) + os.path.getsize(journal_path.with_name("session.db-wal"))
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        with caplog.at_level(logging.WARNING, logger="evalstop_ros.session"):
            for i in range(1000):
                outcome = session.submit_score(trial.trial_id if i % 2 else 10**9, megabyte, True, 0.5,
                                               operator=megabyte, notes=megabyte, preference=megabyte)
                assert not outcome.accepted and len(outcome.reason) <= 256
        heap = tracemalloc.get_traced_memory()[1] - baseline
        tracemalloc.stop()
        assert session.rejections == 1000
        rejected = [e for e in session.events() if e.kind == "score_rejected"]
        assert len(rejected) == 1000 and all(len(str(e.payload)) < 1024 for e in rejected)
        assert rejected[0].payload["submission"]["notes"].endswith(f"... ({len(megabyte)} characters)")
        # the real operator's score still goes through
        assert session.submit_score(trial.trial_id, trial.token, True, 0.5, operator="alice", notes="ok").accepted
    after = os.path.getsize(journal_path)  # closed: the -wal file is checkpointed into the database and removed
    assert not journal_path.with_name("session.db-wal").exists()
    assert after - before < 1000 * JOURNAL_BYTES_PER_REJECTION
    assert heap < HEAP_BYTES
    warnings = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert len(warnings) <= LOG_BURST and all(len(r.getMessage()) < 600 for r in warnings)


def test_notes_longer_than_the_limit_are_refused_with_the_reason(journal_path):
    with EvaluationSession.open(journal_path, sim.make_config(), "s1", durable=False) as session:
        session.start()
        trial = session.next_trial()
        session.record_runner_result(trial.trial_id, True, 1.0)
        outcome = session.submit_score(trial.trial_id, trial.token, True, 0.5, notes="n" * (NOTES_CHARS + 1))
        assert not outcome.accepted
        assert outcome.reason == f"`notes` is longer than {NOTES_CHARS} characters ({NOTES_CHARS + 1})"
