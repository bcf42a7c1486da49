"""Simulated recordings: the messages evaluation_manager publishes for an in-process session.

For tests, benchmarks and documentation without ROS.  :func:`simulate_recording` drives a real
:class:`~evalstop_ros.session.EvaluationSession` (journal and all) through a simulated lab and
returns the messages the manager would have published, in order, as rosbags message objects;
:func:`write_bag` writes them as a rosbag2 bag (sqlite3 or mcap) with the rosbags writer.

The publishing mirrors ``evaluation_manager``: ``session_config`` at start; the journal events
on ``session_event`` as they are committed; ``trial_request`` per new trial or attempt;
``score_ack`` per score; after every step a ``session_status`` and one ``comparison_status``
per comparison whose pair count or decision changed; ``trial_request`` with trial 0 at the end.
With ``scoring: operator`` the operator's scores travel on ``trial_score``; with ``auto`` the
manager takes the runner's score, which only the journal stream shows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import tempfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from .. import __version__
from ..session import EvaluationSession, SessionConfig, SessionState
from ..session.journal import Event, Journal, encode_payload
from .interfaces import TOPICS, rosbags_qos, typestore

__all__ = ["Message", "SimulatedLab", "rewrite_bag", "simulate_recording", "write_bag"]

_STATE_CODES = {SessionState.IDLE: 0, SessionState.RUNNING: 1, SessionState.PAUSED: 2, SessionState.FINISHED: 3,
                SessionState.ABORTED: 4}
_MSGTYPES = {t.name: t.msgtype for t in TOPICS}
#: Journal kinds after which the comparisons may have changed.
_SCORE_CHANGES = frozenset({"score_accepted", "post_decision_score", "correction", "void", "decision"})


class Message(NamedTuple):
    """One recorded message: topic (relative to the namespace), receive stamp (ns), content."""

    topic: str
    stamp_ns: int
    msg: Any

    @property
    def msgtype(self) -> str:
        """The ROS type of ``topic``."""
        return _MSGTYPES[self.topic]


def _has_field(cls: Any, name: str) -> bool:
    """Whether the generated message class ``cls`` has field ``name`` (definitions differ by version)."""
    return name in {field.name for field in dataclasses.fields(cls)}


class SimulatedLab:
    """Deterministic rollouts: success ~ Bernoulli(rate); a failure's progress ~ Beta(mean).

    :param rates: Success probability per policy.
    :param progress_means: Mean progress of a failed rollout per policy (default 0.4).
    :param seed: Seed of the outcomes; each is a pure function of (seed, policy, trial id).
    :param fail_every: About one first attempt in ``fail_every`` is a runner fault (0: never).

    >>> lab = SimulatedLab({"a": 1.0, "b": 0.0})
    >>> lab.outcome("a", 3), lab.outcome("b", 4)[0]
    ((True, 1.0), False)
    """

    def __init__(self, rates: Mapping[str, float], progress_means: Mapping[str, float] | None = None, *,
                 seed: int = 0, fail_every: int = 0) -> None:
        self.rates = dict(rates)
        self.progress_means = dict(progress_means or {})
        self.seed = seed
        self.fail_every = fail_every

    def _rng(self, *keys: int | str) -> np.random.Generator:
        return np.random.default_rng([self.seed, *(k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys)])

    def outcome(self, policy: str, trial_id: int) -> tuple[bool, float]:
        """``(success, progress)`` of one rollout."""
        rng = self._rng("outcome", policy, trial_id)
        if rng.random() < self.rates[policy]:
            return True, 1.0
        mean = self.progress_means.get(policy, 0.4)
        return False, round(float(rng.beta(8 * mean, 8 * (1 - mean))), 4)

    def run_fails(self, trial_id: int, attempt: int) -> bool:
        """Whether this attempt is a runner fault (first attempts only)."""
        return self.fail_every > 0 and attempt == 1 and self._rng("fault", trial_id).random() < 1 / self.fail_every


class _TapJournal(Journal):
    """A journal that remembers what it appended, for ``session_event``."""

    appended: list[Event]
    #: Appended events after which the comparisons may have changed.
    changes: int = 0

    def append(self, kind: str, trial_id: int | None = None, **payload: Any) -> int:
        seq = super().append(kind, trial_id, **payload)
        self.changes += kind in _SCORE_CHANGES
        if not hasattr(self, "appended"):
            self.appended = []
        # the canonical round trip, exactly what the journal stores
        self.appended.append(Event(seq, 0, kind, trial_id, json.loads(encode_payload(payload))))
        return seq


class _Recorder:
    """Builds the manager's messages (the ``_publish_*`` methods of evaluation_manager)."""

    def __init__(self, session: EvaluationSession, journal: _TapJournal, *, start_ns: int, step_ns: int) -> None:
        self.session = session
        self.journal = journal
        self.store = typestore()
        self.types = self.store.types
        self.clock = start_ns
        self.step_ns = step_ns
        self.out: list[Message] = []
        self.published_request: tuple[int, int] | None = None
        self.published_comparisons: list[tuple[int, int]] = []
        self.next_event = 0
        self.config_event_sent = False
        self._memo: tuple[int, Any, dict[str, str]] | None = None

    def tick(self) -> int:
        self.clock += self.step_ns
        return self.clock

    def header(self, stamp_ns: int) -> Any:
        time = self.types["builtin_interfaces/msg/Time"](sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
        return self.types["std_msgs/msg/Header"](stamp=time, frame_id="")

    def emit(self, topic: str, **fields: Any) -> Any:
        stamp = self.tick()
        cls: Any = self.types[_MSGTYPES[topic]]  # a generated dataclass
        if "header" in {field.name for field in dataclasses.fields(cls)}:
            fields["header"] = self.header(stamp)
        msg = cls(**fields)
        self.out.append(Message(topic, stamp, msg))
        return msg

    def config(self) -> None:
        cfg = self.session.config
        self.emit("session_config", session_id=self.session.session_id, config_json=cfg.canonical_json(),
                  config_hash=cfg.config_hash, version=__version__)

    def events(self) -> None:
        if not self.config_event_sent:  # the config event is written by Journal.open, not append()
            self.config_event_sent = True
            for event in self.journal.events():
                if event.kind == "config":
                    self._event(event)
        appended = getattr(self.journal, "appended", [])
        for event in appended[self.next_event:]:
            self._event(event)
        self.next_event = len(appended)

    def _event(self, event: Event) -> None:
        self.emit("session_event", session_id=self.session.session_id, seq=event.seq, kind=event.kind,
                  trial_id=event.trial_id or 0,
                  payload_json=json.dumps(event.payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False))

    def request(self, trial: Any) -> None:
        key = (trial.trial_id, trial.attempt)
        if key == self.published_request:
            return
        self.emit("trial_request", session_id=trial.session_id, trial_id=trial.trial_id, round=trial.round,
                  attempt=trial.attempt, label=trial.label, task=trial.task, task_description=trial.task_description,
                  initial_condition=trial.initial_condition, reset_instructions=trial.reset_instructions,
                  token=trial.token)
        self.published_request = key

    def end_request(self) -> None:
        self.emit("trial_request", session_id=self.session.session_id, trial_id=0, round=0, attempt=0, label="",
                  task="", task_description="", initial_condition="", reset_instructions="", token="")

    def _comparison(self, c: Any) -> Any:
        def nan(value: float | None) -> float:
            return math.nan if value is None else float(value)

        cls: Any = self.types["evalstop/msg/ComparisonStatus"]
        extra = {"task": c.task} if _has_field(cls, "task") else {}  # msg/ before and after multi-task claims
        return cls(
            policy_a=c.policy_a, policy_b=c.policy_b, metric=c.metric, method=c.method, alpha=c.alpha, n=c.n,
            decision=int(c.decision), pvalue=nan(c.pvalue), evalue=nan(c.evalue), mean_a=nan(c.mean_a),
            mean_b=nan(c.mean_b), stopping_trial=c.stopping_trial or 0, **extra)

    def _comparisons(self) -> tuple[Any, dict[str, str]]:
        """``session.comparisons()`` and ``letters()``, recomputed only after a change of scores."""
        changes = self.journal.changes
        if self._memo is None or self._memo[0] != changes:
            # the tests, then (multi-task claims) one claim row per pair x metric, task "*", as the manager
            rows = [*self.session.comparisons(), *(claim.as_comparison() for claim in self.session.claims())]
            self._memo = (changes, rows, self.session.letters())
        return self._memo[1], self._memo[2]

    def status(self) -> None:
        session = self.session
        status = session.status()
        comparisons, letters = self._comparisons()
        state_name = (f"{status.state.value}:awaiting_{status.awaiting}" if status.awaiting
                      and status.state == SessionState.RUNNING else status.state.value)
        extra = ({"active_tasks": list(status.active_tasks)}
                 if _has_field(self.types["evalstop/msg/SessionStatus"], "active_tasks") else {})
        self.emit("session_status", **extra, session_id=session.session_id, state=_STATE_CODES[status.state],
                  state_name=state_name, trials_done=status.trials_scored, budget_left=status.max_trials_left,
                  pending_trial_id=status.pending_trial_id or 0, active_policies=list(status.active_policies),
                  comparisons=[self._comparison(c) for c in comparisons], letter_policies=list(letters),
                  letters=list(letters.values()))
        keys = [(c.n, int(c.decision)) for c in comparisons]
        for index, (c, key) in enumerate(zip(comparisons, keys)):
            before = self.published_comparisons[index] if index < len(self.published_comparisons) else None
            if key != before:
                stamp = self.tick()
                self.out.append(Message("comparison_status", stamp, self._comparison(c)))
        self.published_comparisons = keys


def simulate_recording(
    config: SessionConfig,
    lab: SimulatedLab,
    *,
    session_id: str = "sim",
    workdir: str | pathlib.Path | None = None,
    start_ns: int = 1_750_000_000_000_000_000,
    step_ns: int = 1_000_000,
    edits: Mapping[int, Callable[[EvaluationSession], object]] | None = None,
    scorer: str = "operator",
    max_trials: int | None = None,
) -> list[Message]:
    """Run a session through ``lab`` and return what the manager would publish, in order.

    :param config: The session configuration (``scoring`` decides whether scores go on the wire).
    :param lab: The simulated rollouts.
    :param session_id: Session id (also keys the tokens).
    :param workdir: Where the session journal goes (default: a temporary directory, removed).
    :param start_ns: Stamp of the first message; later ones are ``step_ns`` apart (strictly
        increasing, so every storage orders them alike).
    :param step_ns: Time between two messages (ns).
    :param edits: ``{trial_id: action}``: after trial ``trial_id`` is scored, ``action(session)``
        runs (a correction or void; its events and status are published like the manager's
        ``correct_score`` service does).
    :param scorer: ``TrialScore.scorer`` of operator scores.
    :param max_trials: Stop after this many trials (an unfinished session), if given.
    :returns: The messages, :class:`Message` each.
    """
    with tempfile.TemporaryDirectory(prefix="evalstop-sim-") as tmp:
        directory = pathlib.Path(workdir or tmp)
        journal = _TapJournal.open(directory / f"{session_id}.db", session_id, config, durable=False)
        assert isinstance(journal, _TapJournal)  # Journal.open builds ``cls``
        try:
            session = EvaluationSession(config, journal, session_id)
            rec = _Recorder(session, journal, start_ns=start_ns, step_ns=step_ns)
            _drive(session, rec, lab, edits or {}, scorer, max_trials)
        finally:
            journal.close()
        return rec.out


def _drive(session: EvaluationSession, rec: _Recorder, lab: SimulatedLab,
           edits: Mapping[int, Callable[[EvaluationSession], object]], scorer: str, max_trials: int | None) -> None:
    rec.config()
    session.start()
    rec.events()
    rec.status()
    auto = session.config.scoring == "auto"
    while True:
        trial = session.next_trial()
        rec.events()
        if trial is None or (max_trials is not None and trial.trial_id > max_trials):
            break
        rec.request(trial)
        rec.status()
        ok = not lab.run_fails(trial.trial_id, trial.attempt)
        session.record_runner_result(trial.trial_id, ok, 1.0, "" if ok else "simulated runner fault")
        rec.events()
        if not ok:
            rec.status()
            continue
        success, progress = lab.outcome(trial.policy_id, trial.trial_id)
        name = "auto:run_trial" if auto else scorer
        if not auto:
            rec.emit("trial_score", trial_id=trial.trial_id, token=trial.token, success=success, progress=progress,
                     preference="", notes="", scorer=name)
        outcome = session.submit_score(trial.trial_id, trial.token, success, progress, name, "")
        rec.events()
        reason = "" if outcome.accepted and not outcome.duplicate and not outcome.post_decision else outcome.reason
        rec.emit("score_ack", session_id=session.session_id, trial_id=trial.trial_id, accepted=outcome.accepted,
                 duplicate=outcome.duplicate, reason=reason)
        if trial.trial_id in edits:
            edits[trial.trial_id](session)
            rec.events()
        rec.status()
    rec.end_request()
    rec.status()


def write_bag(path: str | pathlib.Path, messages: Iterable[Message], *, storage: str = "mcap",
              namespace: str = "") -> pathlib.Path:
    """Write ``messages`` as a rosbag2 bag with the rosbags writer.

    :param path: The bag directory to create (must not exist).
    :param messages: From :func:`simulate_recording` (possibly edited).
    :param storage: ``"mcap"`` or ``"sqlite3"``.
    :param namespace: Prefix of every topic, e.g. ``/lab1`` (default: the root namespace).
    :returns: ``path``.
    """
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    store = typestore()
    topics = {t.name: t for t in TOPICS}
    with Writer(pathlib.Path(path), version=Writer.VERSION_LATEST, storage_plugin=plugin) as writer:
        connections: dict[str, Any] = {}
        for message in messages:
            connection = connections.get(message.topic)
            if connection is None:
                topic = topics[message.topic]
                connection = connections[message.topic] = writer.add_connection(
                    f"{namespace}/{topic.name}", topic.msgtype, typestore=store,
                    offered_qos_profiles=[rosbags_qos(topic)])
            writer.write(connection, message.stamp_ns, store.serialize_cdr(message.msg, message.msgtype))
    return pathlib.Path(path)



def rewrite_bag(source: str | pathlib.Path, target: str | pathlib.Path,
                edit: Callable[[str, int, Any], Iterable[tuple[int, Any]]], *, storage: str | None = None
                ) -> pathlib.Path:
    """Copy a bag message by message through ``edit`` (tamper drills, redaction).

    :param source: An existing bag (any recorder).
    :param target: The bag to create.
    :param edit: ``edit(topic, stamp_ns, msg)`` returns the ``(stamp_ns, msg)`` to write instead:
        none (drop it), the message itself, a changed copy, or more (inject).  ``topic`` is the
        bag's full topic name.
    :param storage: ``"mcap"`` or ``"sqlite3"`` (default: the source's).
    :returns: ``target``.
    """
    from rosbags.highlevel import AnyReader  # noqa: PLC0415

    from .bag import _storage  # noqa: PLC0415

    src = pathlib.Path(source)
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage or _storage(src)]
    with AnyReader([src]) as reader, Writer(pathlib.Path(target), version=Writer.VERSION_LATEST,
                                            storage_plugin=plugin) as writer:
        store = reader.typestore
        connections = {}
        for conn in reader.connections:
            ext = conn.ext
            connections[conn.id] = writer.add_connection(
                conn.topic, conn.msgtype, typestore=store,
                offered_qos_profiles=list(getattr(ext, "offered_qos_profiles", []) or []))
        for conn, stamp, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            for new_stamp, new_msg in edit(conn.topic, stamp, msg):
                writer.write(connections[conn.id], new_stamp, store.serialize_cdr(new_msg, conn.msgtype))
    return pathlib.Path(target)
