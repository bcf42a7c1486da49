"""Audit of ``schedule: active``: re-run every scheduling choice from the journal (seed 004; docs/audit.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..session.config import SessionConfig
from ..session.journal import Event
from ..session.plan import Plan
from ..session.trials import TrialBook, metric_value

__all__ = ["SCORE_ATOL", "check_choices"]

#: Absolute tolerance on re-computed acquisition scores (EIG in nats).
SCORE_ATOL = 1e-4
_BOOK_KINDS = ("trial_requested", "runner_result", "score_accepted", "post_decision_score", "correction", "void")


def _open_pairs(config: SessionConfig, decided: set[tuple[str, str, str, str]]) -> NDArray[np.bool_]:
    """``(M, N)``: policy ``i`` has an undecided test on task ``j`` (every pair without ``drop_decided``)."""
    tasks = [t.id for t in config.tasks]
    result = np.zeros((len(config.policies), len(tasks)), dtype=bool)
    for comparison in config.comparison_list():
        for metric in config.metrics:
            for j, task in enumerate(tasks):
                key = (comparison.policy_a, comparison.policy_b, metric.name, task)
                if not config.drop_decided or key not in decided:
                    for policy in (comparison.policy_a, comparison.policy_b):
                        result[config.policies.index(policy), j] = True
    return result


def check_choices(config: SessionConfig, events: Sequence[Event], plan: Plan) -> list[tuple[str, str]]:
    """``(code, message)`` for every scheduling choice the replay does not reproduce (module docstring).

    ``plan``: the session's plan with its revealed randomization key (the conditions come from it).
    """
    from ..session.active_schedule import Observation, choose_task  # torch: only for active sessions

    problems: list[tuple[str, str]] = []
    tasks = [t.id for t in config.tasks]
    metric = config.active_settings().metric or config.metrics[0].name
    book = TrialBook()
    embeddings: dict[str, list[list[float]]] | None = None
    decided: set[tuple[str, str, str, str]] = set()
    choices: dict[int, dict[str, object]] = {}
    for event in events:
        if event.kind in _BOOK_KINDS:
            book.apply(event)
            if event.kind == "trial_requested":
                choice = choices.get(int(event.payload["round"]))
                where = (event.payload["task"], event.payload["initial_condition"])
                if choice is None or where != (choice["task"], choice["initial_condition"]):
                    problems.append(("schedule_choice_missing", f"trial {event.trial_id} (round "
                                     f"{event.payload['round']}) runs {where}, chosen: "
                                     f"{None if choice is None else (choice['task'], choice['initial_condition'])}"))
        elif event.kind == "decision":
            p = event.payload
            decided.add((str(p["policy_a"]), str(p["policy_b"]), str(p["metric"]), str(p.get("task"))))
        elif event.kind == "active_embeddings":
            embeddings = {"policy": event.payload["policy"], "task": event.payload["task"]}
        elif event.kind == "schedule_choice":
            p = event.payload
            round_number = int(p["round"])
            if embeddings is None:
                problems.append(("schedule_choice_missing", f"round {round_number}: choice before the embeddings"))
                continue
            data = [Observation(config.policies.index(r.policy), tasks.index(r.task), metric_value(r.score, metric))
                    for r in book.scored() if r.score is not None]
            previous = choices.get(round_number - 1)
            current = None if previous is None else tasks.index(str(previous["task"]))
            replay = choose_task(config, embeddings, data, round_number=round_number, current_task=current,
                                 open_pairs=_open_pairs(config, decided))
            visit = 1 + sum(1 for c in choices.values() if c["task"] == p["task"])
            expected_condition = plan.task_condition(replay.task, visit).id
            journaled_scores = np.asarray(p["scores"], dtype=np.float64)
            if replay.data_sha256 != p["data_sha256"]:
                problems.append(("schedule_choice_mismatch", f"round {round_number}: the choice saw other data "
                                 f"({p['n_data']} journaled scores, {replay.n_data} in the journal before it)"))
            elif tasks[replay.task] != p["task"] or expected_condition != p["initial_condition"]:
                problems.append(("schedule_choice_mismatch", f"round {round_number}: journal chose "
                                 f"{p['task']}/{p['initial_condition']}, the replay {tasks[replay.task]}/"
                                 f"{expected_condition}"))
            elif journaled_scores.shape != (len(replay.scores),) or not np.allclose(
                    journaled_scores, replay.scores, rtol=0, atol=SCORE_ATOL):
                problems.append(("schedule_choice_mismatch", f"round {round_number}: acquisition scores differ "
                                 f"from the replay by more than {SCORE_ATOL}"))
            choices[round_number] = dict(p)
    return problems
