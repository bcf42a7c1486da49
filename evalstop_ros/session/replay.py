"""The replay of a session's journal: how each event changes the session's state (docs/protocol.md, "Journal")."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .analysis import AdaStopRun, AdaStopTest, HolmFamily, PairedTest, Test
from .blinding import check_reveal, journal_payload, unseal_event
from .config import SessionConfig
from .errors import JournalError
from .journal import Event, Journal
from .limits import REQUEST_KINDS, finite_or_none
from .machine import TrialMachine
from .plan import Plan
from .schedule import Schedule
from .trials import TrialBook, TrialRecord
from .values import ScoreOutcome, SessionState

__all__ = ["JournalReplay", "locked"]

logger = logging.getLogger("evalstop_ros.session.session")

_S = TypeVar("_S", bound="JournalReplay")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def locked(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Run a public method under the session's lock (calls may come from several threads)."""

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper



class JournalReplay:
    """The session state the journal determines, and one ``_on_<kind>`` handler per event kind.

    :class:`~.session.EvaluationSession` sets these attributes in its constructor.
    """

    config: SessionConfig
    plan: Plan
    _journal: Journal
    _book: TrialBook
    _tests: list[Test]
    _families: list[HolmFamily]
    _adastop: AdaStopRun | None
    _schedule: Schedule
    _machine: TrialMachine
    #: Journal a valid score (:meth:`~.session.EvaluationSession._accept`).
    _accept: Callable[..., ScoreOutcome]
    _announced: set[int]
    _revealed: bool
    _auth_counters: dict[str, int]
    _auth: dict[str, Any] | None
    _lock: threading.RLock
    session_id: str
    on_commit: Callable[[Event], None] | None

    @property
    def _state(self) -> SessionState:
        """The state machine's state (:class:`~.machine.TrialMachine`)."""
        return self._machine.state

    def _commit(self, kind: str, trial_id: int | None, **payload: Any) -> None:
        """Journal an event, apply it exactly as a replay would, then tell :attr:`on_commit`."""
        if self._auth is not None and kind in REQUEST_KINDS:
            payload, self._auth = {**payload, "auth": self._auth}, None
        key = self.plan.key
        assert key is not None  # a live session's plan always has the journal's key
        event = self._unsealed(self._journal.write(
            kind, trial_id, **journal_payload(kind, trial_id, payload, key, self.session_id)))
        self._apply(event)
        if self.on_commit is not None:
            self.on_commit(event)

    def _unsealed(self, event: Event) -> Event:
        """A journal event as the session works with it: what the journal sealed restored (:mod:`.blinding`)."""
        return unseal_event(event, self.plan, self.session_id)

    def _settle(self) -> None:
        """Journal what the last change implies: new decisions, then the end of the session."""
        for test in self._tests:
            if test.decided and test.index not in self._announced:
                extra: dict[str, Any] = {}
                if test.task is not None:
                    extra["task"] = test.task
                if isinstance(test, AdaStopTest):
                    extra["interim"] = test.interim
                self._commit(
                    "decision", test.last_trial, test=test.index, policy_a=test.comparison.policy_a,
                    policy_b=test.comparison.policy_b, metric=test.metric.name, method=test.method,
                    decision=test.decision.name, n=test.n, stopping_trial=test.stopping_trial,
                    pvalue=finite_or_none(test.pvalue()), evalue=finite_or_none(test.evalue()), **extra,
                )
                logger.info("comparison %s: %s after %d %s", test.label, test.decision.name, test.n,
                            "scores per agent" if isinstance(test, AdaStopTest) else "pairs")
        live = self._state in (SessionState.RUNNING, SessionState.PAUSED)
        if live and all(t.decided for t in self._tests):
            self._commit("finished", None, reason="every comparison is decided or out of budget")
            logger.info("session %s finished after %d trials", self.session_id, len(self._book.trials))
            self._reveal()

    def _release_held(self) -> None:
        """Accept the held scores whose turn came (their predecessors scored or voided), in plan order; each
        is journaled as a score like any other, marked ``held`` (docs/parallel.md)."""
        while self._state == SessionState.RUNNING:
            head = self._schedule.pending()
            if head is None or head.held is None or not head.ran_ok:
                return
            self._accept(head, dict(head.held), released=True)

    def _reveal(self) -> None:
        """Once the session is over, journal its key (checked against the commitment on replay)."""
        if self._state in (SessionState.FINISHED, SessionState.ABORTED) and not self._revealed:
            self._commit("key_revealed", None, key=self.plan.key.hex() if self.plan.key else "",
                         key_commitment=self._journal.key_commitment)
            logger.info("session %s: randomization key revealed (commitment %s)", self.session_id,
                        self._journal.key_commitment[:12])


    def _apply(self, event: Event) -> None:
        handler: Callable[[Event], None] | None = getattr(self, f"_on_{event.kind}", None)
        if handler is None:
            raise JournalError(f"event {event.seq}: unknown kind {event.kind!r}")
        handler(event)
        auth = event.payload.get("auth")
        if isinstance(auth, dict) and isinstance(auth.get("operator"), str) and isinstance(auth.get("counter"), int):
            self._auth_counters[auth["operator"]] = max(self._auth_counters.get(auth["operator"], 0), auth["counter"])

    def _diverged(self, event: Event, detail: str) -> JournalError:
        return JournalError(f"journal {str(self._journal.path)!r}, event {event.seq} ({event.kind}): replay diverged: "
                            f"{detail}")

    def _on_config(self, event: Event) -> None:
        if (event.seq != 1 or event.payload.get("config_hash") != self.config.config_hash
                or event.payload.get("key_commitment") != self._journal.key_commitment):
            raise self._diverged(event, "the config event must be first and match the configuration")

    def _on_started(self, event: Event) -> None:
        """The life cycle and the runner's results: the state machine's (:meth:`~.machine.TrialMachine.apply`)."""
        problem = self._machine.apply(event)
        if problem:
            raise self._diverged(event, problem)

    _on_paused = _on_resumed = _on_aborted = _on_runner_result = _on_score_held = _on_started

    def _on_finished(self, event: Event) -> None:
        if self._state in (SessionState.RUNNING, SessionState.PAUSED) and not all(t.decided for t in self._tests):
            raise self._diverged(event, "finished while some comparisons are undecided")
        self._on_started(event)

    def _on_key_revealed(self, event: Event) -> None:
        self._expect_state(event, SessionState.FINISHED, SessionState.ABORTED)
        earlier = [self.plan.key.hex() if self.plan.key else ""] if self._revealed else []
        _, problem = check_reveal([*earlier, event.payload.get("key")], self._journal.key_commitment, self.session_id)
        if problem:  # the audit's rule too (session/blinding.py)
            raise self._diverged(event, problem)
        self._revealed = True

    def _on_message_rejected(self, event: Event) -> None:
        """Audit only."""

    _on_request_noted = _on_message_rejected

    def _expect_state(self, event: Event, *states: SessionState) -> None:
        if self._state not in states:
            raise self._diverged(event, f"{event.kind} in state {self._state.value}")

    def _on_trial_requested(self, event: Event) -> None:
        trial_id, payload, schedule = self._schedule.next_spec()
        if event.trial_id != trial_id or event.payload != payload:
            raise self._diverged(event, f"journal has trial {event.trial_id} {event.payload}, the plan gives "
                                 f"trial {trial_id} {payload}")
        self._machine.apply(event)
        self._schedule.state = schedule

    def _on_reset_confirmed(self, event: Event) -> None:
        record = self._book.trials.get(event.trial_id) if event.trial_id is not None else None
        attempt = event.payload.get("attempt")
        if (not self.config.confirm_reset or record is None or record.closed
                or attempt != record.attempt or record.reset_confirmed == attempt):
            raise self._diverged(event, f"reset confirmation of trial {event.trial_id} attempt {attempt}, but that "
                                 f"run is not open ({None if record is None else (record.trial_id, record.attempt)})")
        self._book.apply(event)

    def _on_score_accepted(self, event: Event) -> None:
        record = self._book.trials[event.trial_id]  # type: ignore[index]
        first = event.kind in ("score_accepted", "post_decision_score") and record.score is None
        self._book.apply(event)
        self._sync(record, first_score=first)

    _on_post_decision_score = _on_score_accepted
    _on_correction = _on_score_accepted

    def _on_void(self, event: Event) -> None:
        had_score = self._book.trials[event.trial_id].score is not None  # type: ignore[index]
        self._on_score_accepted(event)
        if had_score or self._adastop is not None:
            self._schedule.add_rerun(int(event.trial_id))  # type: ignore[arg-type]

    def _on_active_embeddings(self, event: Event) -> None:
        if self.config.schedule != "active" or self._schedule.embeddings is not None:
            raise self._diverged(event, "embeddings outside schedule 'active', or twice")
        self._schedule.embeddings = {"policy": event.payload["policy"], "task": event.payload["task"]}

    def _on_schedule_choice(self, event: Event) -> None:
        round_number = int(event.payload["round"])
        if self.config.schedule != "active" or round_number != self._schedule.state.round + 1 or round_number in self._schedule.choices:
            raise self._diverged(event, f"choice for round {round_number} while round {self._schedule.state.round} runs")
        if event.payload["task"] not in self._schedule.active_tasks():
            raise self._diverged(event, f"task {event.payload['task']!r} is not in the rotation")
        self._schedule.choices[round_number] = dict(event.payload)

    def _on_score_rejected(self, event: Event) -> None:
        """Audit only."""

    _on_score_duplicate = _on_score_rejected

    def _on_decision(self, event: Event) -> None:
        index = int(event.payload["test"])
        test = self._tests[index] if 0 <= index < len(self._tests) else None
        if test is None:
            raise self._diverged(event, f"unknown test {index}")
        replayed = {"decision": test.decision.name, "n": test.n, "stopping_trial": test.stopping_trial}
        journaled = {key: event.payload.get(key) for key in replayed}
        if replayed != journaled:
            raise self._diverged(event, f"{test.label}: journal has {journaled}, replay gives {replayed}")
        self._announced.add(index)

    def _sync(self, record: TrialRecord, *, first_score: bool = False) -> None:
        """Feed the tests a change to ``record``'s score can affect, then decide what it implies.

        A trial's first score usually only appends pairs (O(1), :class:`~.trials.Pairing`); a
        correction or a void re-forms the affected tests' pair lists.
        """
        if self._adastop is not None:
            self._adastop.sync(self._book)
            return
        for test in self._tests:
            if isinstance(test, PairedTest) and test.feeds(record):
                test.follow(self._book, self.config.design, record if first_score else None)
        for family in self._families:
            family.resolve()
