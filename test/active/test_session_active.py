"""``schedule: active`` in the session: journaled choices, replay, and the audit's re-run of them."""

from __future__ import annotations

import pathlib
import sqlite3

import numpy as np
import pytest

from evalstop_ros.audit import verify
from evalstop_ros.audit.journal import read_journal_record
from evalstop_ros.session.active_schedule import Observation, choose_task, session_embeddings
from evalstop_ros.session.config import ConfigError, parse_config
from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.session import EvaluationSession

TASKS = ["open the drawer", "close the drawer", "pick up the cube", "push the button"]
#: Success probability of each policy on each task.
SUCCESS = {"a": [0.2, 0.5, 0.5, 0.3], "b": [0.9, 0.5, 0.6, 0.3], "c": [0.9, 0.2, 0.5, 0.9]}


def _config(surrogate: str = "shrinkage", strategy: str = "cost-task-eig", **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "policies": ["a", "b", "c"], "seed": 3, "schedule": "active", "claim": "per-task", "n_max": 15,
        "active": {"embedding": "random", "epochs": 20, "mc_samples": 5, "surrogate": surrogate, "strategy": strategy,
                   "task_groups": {"t0": "drawer", "t1": "drawer"}},
        "metrics": [{"name": "success", "alternative": "greater", "method": "nscore"}],
        "tasks": [{"id": f"t{i}", "description": d,
                   "initial_conditions": [{"id": f"c{k}", "reset_instructions": "r"} for k in range(2)]}
                  for i, d in enumerate(TASKS)],
    }
    data.update(changes)
    return data


def _run(path: pathlib.Path, trials: int, **changes: object) -> list[str]:
    config = parse_config(_config(**changes))
    rng = np.random.default_rng(0)
    with EvaluationSession.open(path, config, "s1") as session:
        session.start()
        for _ in range(trials):
            trial = session.next_trial()
            if trial is None:
                break
            session.record_runner_result(trial.trial_id, ok=True, duration_s=1.0)
            success = bool(rng.random() < SUCCESS[trial.policy_id][int(trial.task[1:])])
            session.submit_score(trial.trial_id, trial.token, success=success, progress=float(success))
        return [e.kind for e in session.events()]


SURROGATES = pytest.mark.parametrize("surrogate", ["shrinkage", "mlp"])


def _choices(path: pathlib.Path) -> list[dict[str, object]]:
    return [e.payload for e in read_journal_record(path).events if e.kind == "schedule_choice"]


@SURROGATES
def test_choices_are_journaled_and_replayed(tmp_path: pathlib.Path, surrogate: str) -> None:
    path = tmp_path / "journal.db"
    kinds = _run(path, 24, surrogate=surrogate)
    assert kinds.count("active_embeddings") == 1
    assert kinds.count("schedule_choice") >= 8  # one per round of up to 3 policies
    # after round 1 the choice scores tasks by the surrogate's EIG (Eq. 2), not uniformly
    scores = [np.asarray(c["scores"], dtype=np.float64) for c in _choices(path)[1:]]
    assert any(s.size and s.max() > 0 for s in scores), scores
    config = parse_config(_config(surrogate=surrogate))
    with EvaluationSession.open(path, config, "s1") as resumed:  # replay takes the journaled choices
        trial = resumed.next_trial()
        assert trial is not None
        assert resumed.events()[-1].kind in ("trial_requested", "schedule_choice")


@pytest.mark.parametrize(("surrogate", "strategy"), [("shrinkage", "cost-task-eig"), ("mlp", "cost-task-eig"),
                                                     ("shrinkage", "task-eig"), ("shrinkage", "random-task")])
def test_audit_replays_every_choice(tmp_path: pathlib.Path, surrogate: str, strategy: str) -> None:
    path = tmp_path / "journal.db"
    _run(path, 24, surrogate=surrogate, strategy=strategy)
    report = verify(read_journal_record(path))
    assert report.verified, [v.message for v in report.violations]


@SURROGATES
def test_audit_detects_a_forged_choice(tmp_path: pathlib.Path, surrogate: str) -> None:
    path = tmp_path / "journal.db"
    _run(path, 24, surrogate=surrogate)
    connection = sqlite3.connect(path)
    triggers = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
    for name in triggers:  # the journal is append-only by trigger; a forger drops them
        connection.execute(f"DROP TRIGGER {name}")
    seq, payload = connection.execute(
        "SELECT seq, payload FROM events WHERE kind='schedule_choice' ORDER BY seq LIMIT 1 OFFSET 4").fetchone()
    forged = payload.replace('"scores":[', '"scores":[0.5,', 1)  # one score too many: not the replay's
    connection.execute("UPDATE events SET payload=? WHERE seq=?", (forged, seq))
    connection.commit()
    connection.close()
    report = verify(read_journal_record(path))
    codes = {v.code for v in report.violations}
    assert "schedule_choice_mismatch" in codes, codes


@pytest.mark.parametrize(("changes", "message"), [
    ({"claim": "pooled", "metrics": [{"name": "success"}]}, "test pooled over tasks"),
    ({"design": "independent"}, "needs design 'paired'"),
    ({"schedule": "rounds"}, "`active` applies only to schedule 'active'"),
    ({"tasks": [{"id": "t0", "initial_conditions": [{"id": "c", "reset_instructions": "r"}]}]}, "single task"),
    ({"active": {"metric": "progress"}}, "not one of the session's metrics"),
    ({"active": {"task_groups": {"nope": "x"}}}, "unknown task"),
    ({"active": {"strategy": "eig"}}, "strategy"),
    ({"active": {"surrogate": "gp"}}, "surrogate"),
])
def test_invalid_combinations_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(**changes))


def test_the_schedule_and_its_settings_enter_the_hash_at_their_defaults() -> None:
    data = _config(schedule="rounds")
    del data["active"]
    assert '"schedule":"rounds"' in parse_config(data).canonical_json()
    assert '"draws":"symmetric-root"' in parse_config(_config()).canonical_json()


def test_the_surrogate_key_reaches_the_scheduler() -> None:
    """On the same data each surrogate gives its own EIG scores; each is a pure function of (config, data, round)."""
    rng = np.random.default_rng(1)
    data = [Observation(i, j, float(rng.random() < SUCCESS["abc"[i]][j])) for _ in range(3) for i in range(3)
            for j in (0, 2)]
    open_pairs = np.ones((3, 4), dtype=bool)
    scores = {}
    for surrogate in ("shrinkage", "mlp"):
        config = parse_config(_config(surrogate=surrogate))
        embeddings = session_embeddings(config)
        runs = [choose_task(config, embeddings, data, round_number=4, current_task=2, open_pairs=open_pairs)
                for _ in range(2)]
        assert runs[0] == runs[1]  # what the audit's replay relies on
        scores[surrogate] = np.asarray(runs[0].scores)
        assert scores[surrogate].shape == (4,) and scores[surrogate].max() > 0
    assert not np.allclose(scores["shrinkage"], scores["mlp"], atol=1e-3)


def test_defaults_follow_the_study_and_enter_the_hash() -> None:
    """docs/active.md: random-task on the shrinkage surrogate; an omitted ``active`` is resolved."""
    data = _config()
    del data["active"]
    config = parse_config(data)
    assert (config.active_settings().strategy, config.active_settings().surrogate) == ("random-task", "shrinkage")
    assert '"strategy":"random-task"' in config.canonical_json()
    assert '"surrogate":"shrinkage"' in config.canonical_json()
    explicit = parse_config(_config(strategy="cost-task-eig"))
    assert explicit.config_hash != parse_config(_config(strategy="random-task")).config_hash


def test_a_journal_of_an_earlier_development_version_is_refused_with_a_clear_error(tmp_path: pathlib.Path) -> None:
    """One journal schema: a journal an earlier development version wrote (its schema row ``2``, its
    ``active`` block without ``surrogate`` and ``draws``) is refused by a resume, by the manager's
    read of its fault limit and by the audit, each naming the schema, and nothing in it changes."""
    import json

    from evalstop_ros.audit.errors import AuditError
    from evalstop_ros.session.journal import journaled_fault_limit
    from evalstop_ros.session.journal_format import SCHEMA_VERSION

    path = tmp_path / "journal.db"
    _run(path, 6, surrogate="mlp")
    connection = sqlite3.connect(path)
    for table in ("meta", "events"):  # the earlier version's form, written in place
        connection.execute(f"DROP TRIGGER {table}_no_update")
    stored = json.loads(connection.execute("SELECT value FROM meta WHERE key='config_json'").fetchone()[0])
    del stored["active"]["surrogate"], stored["active"]["draws"]
    connection.execute("UPDATE meta SET value=? WHERE key='config_json'", (json.dumps(stored, sort_keys=True),))
    connection.execute("UPDATE meta SET value='2' WHERE key='schema'")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    message = rf"has schema '2', not '{SCHEMA_VERSION}'.*another \(development\) version"
    with pytest.raises(JournalError, match=message):
        EvaluationSession.open(path, parse_config(_config(surrogate="mlp")), "s1")
    with pytest.raises(JournalError, match=message):
        journaled_fault_limit(path)
    with pytest.raises(AuditError, match=message):
        read_journal_record(path)
    assert path.read_bytes() == before
