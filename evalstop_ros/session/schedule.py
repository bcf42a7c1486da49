"""The schedule of a session: which trial comes next, and how many may still be needed (docs/protocol.md, "Scheduling").
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .analysis import AdaStopRun, Test, interim_records
from .config import SessionConfig
from .config_sections import ROUND_DESIGNS
from .errors import SessionError
from .plan import Condition, Plan
from .trials import TrialBook, TrialRecord, metric_value
from .values import PendingTrial

__all__ = ["Schedule", "ScheduleState"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ScheduleState:
    """Where the schedule stands (derived from the journal like everything else).

    ``round``: the current round (interim); ``queue``: its policies still to request;
    ``reruns``: voided trials waiting for their re-run; ``position``: the walk position of the
    current round's task (:meth:`Schedule.next_position`; equal to ``round`` when
    every task stays in the rotation).
    """

    round: int = 0
    queue: tuple[str, ...] = ()
    reruns: tuple[int, ...] = ()
    position: int = 0


@dataclasses.dataclass(eq=False, repr=False)
class Schedule:
    """The next trial of a session, from its configuration, plan, trial book and tests.

    ``book`` and ``tests`` are the session's own (read only here); ``adastop`` is the AdaStop run
    under ``design: adastop``.  :attr:`state`, :attr:`embeddings` and :attr:`choices` are set by
    the session as it applies journal events.
    """

    config: SessionConfig
    plan: Plan
    session_id: str
    book: TrialBook
    tests: Sequence[Test]
    adastop: AdaStopRun | None
    state: ScheduleState = dataclasses.field(default_factory=ScheduleState, init=False)
    #: ``schedule: active``: the journaled embeddings and each round's choice (round -> payload).
    embeddings: dict[str, list[list[float]]] | None = dataclasses.field(default=None, init=False)
    choices: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict, init=False)
    _head: int = dataclasses.field(default=1, init=False)  # no trial before it is open (:meth:`pending`)

    def add_rerun(self, trial_id: int) -> None:
        """Schedule a re-run of the voided trial ``trial_id``."""
        self.state = dataclasses.replace(self.state, reruns=(*self.state.reruns, trial_id))

    def max_trials_left(self) -> int:
        """Upper bound on the trials still needed (no voids or failed runs assumed)."""
        if self.adastop is not None:
            run = self.adastop
            if run.finished or self.config.adastop is None:
                return 0
            per_agent = (self.config.adastop.n_interims - run.interims) * run.n_per_interim
            return sum(per_agent - len(interim_records(self.book, run.interims + 1, p, run.n_per_interim)) for p in run.active())
        n_max, total = self.config.n_max, 0
        groups: tuple[str | None, ...] = (None,) if self.config.claim == "pooled" else self.active_tasks()
        for task in groups:
            open_tests = [t for t in self.tests if not t.decided and t.task == task]
            active = self.active(task)
            if not active or not open_tests:
                continue
            if not self.config.drop_decided:
                total += len(active) * max(n_max - t.n for t in open_tests)
            else:
                total += sum(max((n_max - t.n for t in open_tests if t.involves(p)), default=0) for p in active)
        return total

    def active(self, task: str | None = None) -> tuple[str, ...]:
        """Policies in the rotation (on ``task``, for a per-task claim), in configuration order."""
        if self.adastop is not None:
            return self.adastop.active()
        if not self.config.drop_decided:
            return self.config.policies
        open_tests = [t for t in self.tests if not t.decided and (task is None or t.task in (None, task))]
        return tuple(p for p in self.config.policies if any(t.involves(p) for t in open_tests))

    def open_pairs(self) -> tuple[tuple[str, str], ...]:
        """``design: ab``: the comparisons a round may draw (with ``drop_decided``, the undecided
        ones; with ``ab_pairing: fewest``, of those the ones run in the fewest rounds so far)."""
        pairs = [(c.policy_a, c.policy_b) for c in self.config.comparison_list()]
        if self.config.drop_decided:
            open_pairs = {frozenset((t.comparison.policy_a, t.comparison.policy_b)) for t in self.tests if not t.decided}
            pairs = [p for p in pairs if frozenset(p) in open_pairs]
        if self.config.ab_pairing == "fewest" and pairs:
            rounds = collections.Counter(frozenset(m) for m in self.book.rounds.values())
            least = min(rounds[frozenset(p)] for p in pairs)
            pairs = [p for p in pairs if rounds[frozenset(p)] == least]
        return tuple(pairs)

    def ucb_weights(self, pairs: tuple[tuple[str, str], ...]) -> dict[str, float] | None:
        """``ab_pairing: ucb``: each policy's :meth:`~.plan.Plan.ucb_weight` after its rounds so far."""
        if self.config.ab_pairing != "ucb":
            return None
        n = collections.Counter(p for m in self.book.rounds.values() for p in m)
        return {p: self.plan.ucb_weight(n[p], self.config.ab_ucb_threshold) for pair in pairs for p in pair}

    def active_tasks(self) -> tuple[str, ...]:
        """Tasks in the rotation: with a non-pooled claim, those with an undecided test."""
        ids = tuple(t.id for t in self.config.tasks)
        if self.config.claim == "pooled" or not self.config.drop_decided:
            return ids
        return tuple(task for task in ids if any(t.task == task and not t.decided for t in self.tests))

    def pending(self) -> TrialRecord | None:
        """The head of the open trials: the earliest one neither scored nor voided (a closed trial
        never reopens, so the search resumes where it stopped)."""
        trials, head = self.book.trials, self._head
        while head <= len(trials) and trials[head].closed:
            head += 1
        self._head = head
        return trials[head] if head <= len(trials) else None

    def open_records(self) -> list[TrialRecord]:
        """Every open trial, in plan order (several with parallel runners, docs/parallel.md)."""
        head = self.pending()
        if head is None:
            return []
        return [r for r in list(self.book.trials.values())[head.trial_id - 1:] if not r.closed]

    def round_task(self, position: int) -> str | None:
        """The task of the round at walk position ``position`` (``None``: pooled, any task).

        Under ``schedule: active`` the position is the round number and the task its choice.
        """
        if self.config.claim == "pooled" or position < 1:
            return None
        if self.config.schedule == "active":
            return str(self.choices[position]["task"])
        return self.plan.condition(position).task.id

    def round_ends(self) -> bool:
        """The next request starts a new round (no re-run waits, the round's queue is done)."""
        schedule = self.state
        if any(self.book.trials[t].policy in self.active(self.book.trials[t].task) for t in schedule.reruns):
            return False
        return not [p for p in schedule.queue if p in self.active(self.round_task(schedule.position))]

    def choose_round(self, commit: Callable[..., None]) -> None:
        """``schedule: active``: journal the embeddings (once) and the next round's task choice
        through ``commit`` (the session's, which applies the event here)."""
        round_number = self.state.round + 1
        if not self.round_ends() or round_number in self.choices:
            return
        from .active_schedule import Observation, choose_task, session_embeddings  # torch: only when used

        if self.embeddings is None:
            commit("active_embeddings", None, **session_embeddings(self.config))
        assert self.embeddings is not None
        task_ids = [t.id for t in self.config.tasks]
        policy_ids = list(self.config.policies)
        metric = self.config.active_settings().metric or self.config.metrics[0].name
        data = [Observation(policy_ids.index(r.policy), task_ids.index(r.task), metric_value(r.score, metric))
                for r in self.book.scored() if r.score is not None]
        open_pairs = np.array([[p in self.active(task) and task in self.active_tasks() for task in task_ids]
                               for p in policy_ids])
        current = self.round_task(self.state.round) if self.state.round else None
        choice = choose_task(self.config, self.embeddings, data, round_number=round_number,
                             current_task=None if current is None else task_ids.index(current), open_pairs=open_pairs)
        task = task_ids[choice.task]
        visit = 1 + sum(1 for c in self.choices.values() if c["task"] == task)
        condition = self.plan.task_condition(choice.task, visit)
        commit("schedule_choice", None, round=round_number, task=task, initial_condition=condition.id,
                     strategy=self.config.active_settings().strategy if data else "random-task",
                     explored=choice.explored, scores=list(choice.scores), n_data=choice.n_data,
                     data_sha256=choice.data_sha256)
        logger.info("round %d: active schedule chose task %s (%s)", round_number, task,
                    "explore" if choice.explored else "acquisition")

    def next_spec(self) -> tuple[int, dict[str, Any], ScheduleState]:
        """The next trial to request: id, journal payload, and the schedule state after it.

        Re-runs of voided trials come first (same policy, round and condition), then the rest
        of the current round, then a new round; policies out of the rotation are skipped.
        """
        schedule, per_task = self.state, self.config.claim != "pooled"
        if len(self.active()) < 2:
            raise SessionError("no pair of active policies is left")  # _settle finishes before this
        trial_id = len(self.book.trials) + 1
        token = self.plan.token(self.session_id, trial_id)
        reruns = [t for t in schedule.reruns
                  if self.book.trials[t].policy in self.active(self.book.trials[t].task if per_task else None)]
        if reruns:
            old = self.book.trials[reruns.pop(0)]
            payload = {
                "round": old.round, "policy_id": old.policy, "label": self.plan.label(old.policy, old.round),
                "task": old.task, "initial_condition": old.initial_condition, "token": token,
                "rerun_of": old.trial_id,
            }
            return trial_id, payload, dataclasses.replace(schedule, reruns=tuple(reruns))
        round_number, position = schedule.round, schedule.position
        active = self.active(self.round_task(position))
        queue = [p for p in schedule.queue if p in active]
        while not queue:
            round_number += 1
            if self.adastop is not None:
                assert self.config.adastop is not None
                queue = list(self.plan.interim_order(round_number, active, self.config.adastop.n_per_interim))
                continue
            position = round_number if self.config.schedule == "active" else self.next_position(position)
            if self.config.schedule == "active" and round_number not in self.choices:
                raise SessionError(f"round {round_number} has no journaled task choice")
            active = self.active(self.round_task(position))
            if self.config.design == "ab":
                pairs = self.open_pairs()
                queue = list(self.plan.ab_pair(round_number, pairs, self.ucb_weights(pairs)))
            else:
                queue = list(self.plan.round_order(round_number, active))
        policy = queue.pop(0)
        condition = self.condition(trial_id, position)
        payload = {
            "round": round_number, "policy_id": policy, "label": self.plan.label(policy, round_number),
            "task": condition.task.id, "initial_condition": condition.initial_condition.id, "token": token,
            "rerun_of": None,
        }
        return trial_id, payload, ScheduleState(round_number, tuple(queue), (), position)

    def next_position(self, position: int) -> int:
        """The walk position of the next round: the next one whose task is in the rotation."""
        if self.config.claim == "pooled":
            return position + 1
        tasks = set(self.active_tasks())
        if not tasks:
            raise SessionError("no task is left in the rotation")  # _settle finishes before this
        position += 1
        while self.plan.condition(position).task.id not in tasks:
            position += 1
        return position

    def condition(self, trial_id: int, position: int) -> Condition:
        """Where trial ``trial_id`` of the round at walk position ``position`` starts."""
        if self.config.schedule == "active":
            choice = self.choices[position]
            task = next(t for t in self.config.tasks if t.id == choice["task"])
            return Condition(task, next(c for c in task.initial_conditions if c.id == choice["initial_condition"]))
        if self.config.design in ROUND_DESIGNS:
            return self.plan.condition(position)
        if self.config.claim == "pooled":  # independent or adastop: a fresh condition per trial
            return self.plan.condition(trial_id)
        task = self.plan.condition(position).task
        index = [t.id for t in self.config.tasks].index(task.id)
        draws = sum(1 for r in self.book.trials.values() if r.task == task.id and r.rerun_of is None)
        return Condition(task, self.plan.task_condition(index, draws + 1))

    def request(self, record: TrialRecord) -> PendingTrial:
        task = next(t for t in self.config.tasks if t.id == record.task)
        condition = next(c for c in task.initial_conditions if c.id == record.initial_condition)
        return PendingTrial(
            session_id=self.session_id, trial_id=record.trial_id, round=record.round,
            attempt=record.failed_runs + 1, label=record.label, policy_id=record.policy, task=task.id,
            task_description=task.description, initial_condition=condition.id,
            reset_instructions=condition.reset_instructions, token=record.token, rerun_of=record.rerun_of,
            round_labels=self.round_labels(record.round),
        )

    def round_labels(self, round_number: int) -> tuple[str, ...]:
        """Labels of the policies of round ``round_number``: requested so far, or still in its queue."""
        policies = set(self.book.rounds.get(round_number, ()))
        if self.state.round == round_number:
            policies.update(self.state.queue)
        return tuple(sorted(self.plan.label(p, round_number) for p in policies))


