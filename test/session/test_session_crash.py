"""Crash and resume: a session killed anywhere and reopened from its journal loses nothing.

Two kinds of death, both compared with an uninterrupted run of the same session, for two
scenarios (session_sim.SCENARIOS; about one run in seven fails and is retried):

* ``step``: 100 trials; STEP decides at pair 40, N-SCORE runs out of budget at pair 50;
* ``adastop``: five agents under AdaStop, interims of 5 trials per agent; the replay must
  reproduce the same interims (trial order) and the same AdaStop decisions.

Kinds of death:

* in-process: the journal "dies" right before or right after an append commits (the two sides
  of every write), at 12 random points; the session object is dropped and a new one is built
  from the file, and the operator re-sends the score it got no answer for;
* a real ``SIGKILL`` of a subprocess driving the session with a durable journal (fsync per
  event, so the kill most likely lands inside a write), twice, then the run is finished here.

After the end: the same effective score (and round) for every trial, each accepted exactly once,
and the same decisions, stopping trials, p-values and e-values as the uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession, JournalError, SessionState, read_journal
from evalstop_ros.session.journal import Event, Journal
from evalstop_ros.session.trials import TrialBook

SESSION_ID = "crash"
SIM_SCRIPT = pathlib.Path(sim.__file__).resolve()


class Death(Exception):
    """The simulated process death."""


class DyingJournal:
    """A journal that dies at chosen appends (counted across reopenings), before or after the commit."""

    def __init__(self, journal: Journal, deaths: dict[int, str], counter: list[int]) -> None:
        self._journal, self._deaths, self._counter = journal, deaths, counter

    def write(self, kind: str, trial_id: int | None = None, **payload: Any) -> Event:
        self._counter[0] += 1
        when = self._deaths.pop(self._counter[0], None)
        if when == "before":
            raise Death
        event = self._journal.write(kind, trial_id, **payload)
        if when == "after":
            raise Death
        return event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def finish(path: pathlib.Path, scenario: str, *, deaths: dict[int, str] | None = None,
           durable: bool = False) -> tuple[object, int]:
    """Run the crash-test session at ``path`` to its end, dying at ``deaths``; (results, deaths)."""
    overrides, lab = sim.SCENARIOS[scenario]
    config = sim.make_config(**overrides)
    deaths = dict(deaths or {})
    counter, sent, died = [0], {}, 0
    while True:
        journal = Journal.open(path, SESSION_ID, config, durable=durable, plan_key=sim.TEST_KEY)
        try:
            session = EvaluationSession(config, DyingJournal(journal, deaths, counter), SESSION_ID)
            if session.state == SessionState.IDLE:
                session.start()
            if "last" in sent:  # the operator got no answer: send the same score again
                outcome = session.submit_score(*sent.pop("last"), operator="sim")
                assert outcome.accepted, outcome
            while sim.step(session, lab, fail_every=7, sent=sent) is not None:
                sent.pop("last", None)
            return results(session), died
        except Death:
            died += 1
        finally:
            journal.close()


def results(session: EvaluationSession) -> tuple[object, ...]:
    """Final decisions and statistics, NaN made comparable."""

    def clean(value: object) -> object:
        return "nan" if isinstance(value, float) and math.isnan(value) else value

    return session.status(), [tuple(clean(v) for v in dataclasses.astuple(c)) for c in session.comparisons()]


def scores(path: pathlib.Path) -> dict[int, tuple[str, int, object]]:
    """Policy, round and effective score of every trial, and a check that none was accepted twice."""
    events = read_journal(path).events
    accepted = [e.trial_id for e in events if e.kind in ("score_accepted", "post_decision_score")]
    assert len(accepted) == len(set(accepted)), "a trial was accepted twice"
    book = TrialBook().fold(events)
    return {t: (r.policy, r.round, r.score) for t, r in book.trials.items()}


@pytest.fixture(scope="module", params=list(sim.SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> str:
    """The crash-test session (session_sim.SCENARIOS)."""
    return str(request.param)


@pytest.fixture(scope="module")
def reference_path(tmp_path_factory: pytest.TempPathFactory, scenario: str) -> pathlib.Path:
    """The journal of the uninterrupted run."""
    path = tmp_path_factory.mktemp(f"reference-{scenario}") / "session.db"
    assert finish(path, scenario)[1] == 0
    return path


@pytest.fixture(scope="module")
def reference(reference_path: pathlib.Path, scenario: str) -> tuple[object, dict[int, tuple[str, int, object]], int]:
    """The uninterrupted run: results, scores and number of events."""
    config = sim.make_config(**sim.SCENARIOS[scenario][0])
    with EvaluationSession.open(reference_path, config, SESSION_ID, durable=False, plan_key=sim.TEST_KEY) as session:
        outcome = results(session)
    return outcome, scores(reference_path), len(read_journal(reference_path).events)


def test_reference_run_is_the_intended_session(reference, reference_path, scenario):
    (status, comparisons), book, appends = reference
    assert status.state == SessionState.FINISHED
    decisions = [(c[2], c[7].name, c[6]) for c in comparisons]  # metric, decision, n
    if scenario == "step":
        assert status.trials_scored == 100
        assert decisions == [("success", "B_BETTER", 32), ("progress", "BUDGET_EXHAUSTED", 50)]
        assert appends > 300 and len(book) == 100
        return
    # AdaStop: some agents leave early, the tie runs to the last interim and ends "equal".
    assert ("progress", "BUDGET_EXHAUSTED", 30) in decisions
    assert any(d == "B_BETTER" and n < 30 for _, d, n in decisions)
    rounds = {policy: max(r for p, r, _ in book.values() if p == policy) for policy in sim.AGENTS}
    assert rounds["agent_2"] == rounds["agent_3"] == 6 and min(rounds.values()) < 6
    assert [e.kind for e in read_journal(reference_path).events].count("decision") == len(comparisons)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_deaths_lose_nothing(tmp_path, reference, scenario, seed):
    expected, expected_scores, appends = reference
    rng = np.random.default_rng(seed)
    points = rng.choice(np.arange(2, appends), size=12, replace=False)
    deaths = {int(p): str(rng.choice(["before", "after"])) for p in points}
    path = tmp_path / "session.db"
    outcome, died = finish(path, scenario, deaths=deaths)
    assert died == 12
    assert scores(path) == expected_scores
    assert outcome == expected


def test_death_at_every_step_of_one_trial(tmp_path, reference, scenario):
    # Every append of the first two trials, both sides: the densest crash pattern.
    expected, expected_scores, _ = reference
    deaths = {k: when for k in range(2, 12) for when in ("before",)} | {k: "after" for k in range(12, 22)}
    path = tmp_path / "session.db"
    outcome, died = finish(path, scenario, deaths=deaths)
    assert died == 20 and outcome == expected and scores(path) == expected_scores
    assert "score_duplicate" in {e.kind for e in read_journal(path).events}  # re-sent after "after" deaths


@pytest.mark.parametrize("kind", ["decision", "finished"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_death_around_derived_events(tmp_path, reference, reference_path, scenario, kind, when):
    # Session appends are counted from 1 for "started" (journal seq 2).  Under AdaStop the first
    # decision events are written together, at the end of an interim: the death falls between them.
    expected, expected_scores, _ = reference
    kinds = [e.kind for e in read_journal(reference_path).events]
    path = tmp_path / "session.db"
    outcome, died = finish(path, scenario, deaths={kinds.index(kind): when})  # seq - 1 of the first such event
    assert died == 1 and outcome == expected and scores(path) == expected_scores
    assert [e.kind for e in read_journal(path).events].count(kind) == kinds.count(kind)  # written once


def _kill_when(path: pathlib.Path, events: int, env: dict[str, str], scenario: str) -> None:
    """Start the driver subprocess and SIGKILL it once the journal holds ``events`` events."""
    process = subprocess.Popen([sys.executable, str(SIM_SCRIPT), str(path), SESSION_ID, scenario], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1].decode()
            try:
                if len(read_journal(path).events) >= events:
                    break
            except JournalError:
                pass  # not created yet
            time.sleep(0.005)
        else:
            pytest.fail(f"the driver did not reach {events} events in 60 s")
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate()
    assert process.returncode == -signal.SIGKILL


def test_sigkill_mid_session_loses_nothing(tmp_path, reference, scenario):
    expected, expected_scores, _ = reference
    path = tmp_path / "session.db"
    env = dict(os.environ)
    _kill_when(path, 60, env, scenario)
    _kill_when(path, 180, env, scenario)  # the second process resumed from the first one's journal
    with Journal.open(path, SESSION_ID, sim.make_config(**sim.SCENARIOS[scenario][0])) as journal:
        assert journal.pragma("integrity_check") == "ok"
    outcome, _ = finish(path, scenario, durable=True)
    assert scores(path) == expected_scores
    assert outcome == expected
