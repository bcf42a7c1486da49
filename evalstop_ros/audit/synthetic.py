"""Simulated recordings: the messages evaluation_manager publishes for an in-process session, driven by
:class:`~evalstop_ros.session.driver.TrialDriver` (tests, benchmarks and docs without ROS).
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import tempfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from .. import __version__
from ..session import EvaluationSession, SessionConfig
from ..session.driver import Action, TrialDriver, Verdict
from ..session.journal import Journal
from ..session.publishing import SessionPublisher
from .interfaces import TOPICS, rosbags_qos, typestore

__all__ = ["Message", "SimulatedLab", "rewrite_bag", "simulate_recording", "simulated_key", "write_bag"]

_MSGTYPES = {t.name: t.msgtype for t in TOPICS}


class Message(NamedTuple):
    """One recorded message: topic (relative to the namespace), receive stamp (ns), content."""

    topic: str
    stamp_ns: int
    msg: Any

    @property
    def msgtype(self) -> str:
        """The ROS type of ``topic``."""
        return _MSGTYPES[self.topic]


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

    @staticmethod
    def preference(first: tuple[str, float], second: tuple[str, float], *, margin: float = 0.05) -> str:
        """``design: ab``: the operator's preference after a round's two ``(label, progress)``:
        the label with more progress, ``=`` within ``margin``.

        >>> SimulatedLab.preference(("X", 0.2), ("Y", 0.9)), SimulatedLab.preference(("X", 1.0), ("Y", 1.0))
        ('Y', '=')
        """
        if abs(first[1] - second[1]) < margin:
            return "="
        return first[0] if first[1] > second[1] else second[0]

    def run_fails(self, trial_id: int, attempt: int) -> bool:
        """Whether this attempt is a runner fault (first attempts only)."""
        return self.fail_every > 0 and attempt == 1 and self._rng("fault", trial_id).random() < 1 / self.fail_every


class _Recorder:
    """Turns :class:`~evalstop_ros.session.publishing.SessionPublisher`'s field mappings into
    rosbags messages, stamped ``step_ns`` apart: the same publisher the manager node uses."""

    def __init__(self, *, start_ns: int, step_ns: int) -> None:
        self.types = typestore().types
        self.clock = start_ns
        self.step_ns = step_ns
        self.out: list[Message] = []
        self.publisher = SessionPublisher(self.send)

    def _build(self, msgtype: str, fields: Mapping[str, Any]) -> Any:
        cls: Any = self.types[msgtype]  # a generated dataclass
        names = {field.name for field in dataclasses.fields(cls)}
        values = {k: v for k, v in fields.items() if k in names}  # msg/ before multi-task claims lacks `task`
        if "comparisons" in values:
            values["comparisons"] = [self._build("evalstop/msg/ComparisonStatus", c) for c in values["comparisons"]]
        if "header" in names:
            stamp = self.clock
            time = self.types["builtin_interfaces/msg/Time"](sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000)
            values["header"] = self.types["std_msgs/msg/Header"](stamp=time, frame_id="")
        return cls(**values)

    def send(self, topic: str, fields: Mapping[str, Any], _stamp_ns: int | None = None) -> None:
        """Record one message; stamps strictly increase, so every storage orders them alike."""
        self.clock += self.step_ns
        self.out.append(Message(topic, self.clock, self._build(_MSGTYPES[topic], fields)))


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
    plan_key: bytes | None = None,
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
    :param plan_key: The session's randomization key; default :func:`simulated_key` of the session
        id, so a simulated recording is reproducible (a simulation hides nothing from anyone).
    :returns: The messages, :class:`Message` each.
    """
    with tempfile.TemporaryDirectory(prefix="evalstop-sim-") as tmp:
        directory = pathlib.Path(workdir or tmp)
        journal = Journal.open(directory / f"{session_id}.db", session_id, config, durable=False,
                               plan_key=plan_key or simulated_key(session_id))
        try:
            rec = _Recorder(start_ns=start_ns, step_ns=step_ns)
            session = EvaluationSession(config, journal, session_id)
            _drive(session, rec, lab, edits or {}, scorer, max_trials)
        finally:
            journal.close()
        return rec.out


def simulated_key(session_id: str) -> bytes:
    """The fixed randomization key of a simulated recording of ``session_id``."""
    return hashlib.sha256(f"evalstop-simulated-plan-key\0{session_id}".encode()).digest()


def _drive(session: EvaluationSession, rec: _Recorder, lab: SimulatedLab,
           edits: Mapping[int, Callable[[EvaluationSession], object]], scorer: str, max_trials: int | None) -> None:
    """Run the session through the manager node's trial loop (:class:`~evalstop_ros.session.driver.TrialDriver`:
    its fault limit and automatic scoring), publishing through the same :class:`SessionPublisher`."""
    publisher, session_id = rec.publisher, session.session_id
    publisher.config(session, __version__)
    for event in session.events():  # the config event, journaled when the session was created
        publisher.event(session_id, event)
    session.on_commit = lambda event: publisher.event(session_id, event)
    session.start()
    publisher.status(session)
    driver = TrialDriver(session)
    rounds: dict[int, tuple[str, float]] = {}  # design ab: the round's first scored (label, progress)
    while True:
        upcoming = driver.advance()
        trial = upcoming.trial
        if upcoming.action in (Action.DONE, Action.WAIT) or trial is None:
            break  # over, or paused at the fault limit (an unfinished recording)
        if max_trials is not None and trial.trial_id > max_trials:
            break
        publisher.request(trial)
        publisher.status(session)
        if upcoming.action is Action.RESET:  # confirm_reset: the simulated operator reset the scene
            session.confirm_reset(trial.trial_id, trial.attempt)
            publisher.status(session)
            continue
        success, progress = lab.outcome(trial.policy_id, trial.trial_id)
        preference = ""
        if session.config.design == "ab":
            earlier = rounds.setdefault(trial.round, (trial.label, progress))
            if earlier[0] != trial.label:
                preference = lab.preference(earlier, (trial.label, progress))
        if upcoming.action is Action.RUN:
            ok = not lab.run_fails(trial.trial_id, trial.attempt)
            verdict = driver.run_done(trial, ok, 1.0, "" if ok else "simulated runner fault",
                                      auto_score=(success, progress) if driver.auto else None)
            if verdict.verdict not in (Verdict.RAN, Verdict.OPERATOR):  # a fault: retried, or paused at the limit
                publisher.status(session)
                continue
        auto = driver.submit_held()
        if auto is not None:
            publisher.ack(session_id, trial.trial_id, auto.outcome)
        else:  # the operator scores it
            rec.send("trial_score", {"trial_id": trial.trial_id, "token": trial.token, "success": success,
                                     "progress": progress, "preference": preference, "notes": "", "scorer": scorer,
                                     "instruction": "", "pair_invalid": False, "counter": 0, "mac": ""})
            outcome = session.submit_score(trial.trial_id, trial.token, success, progress, scorer, "",
                                           preference=preference)
            publisher.ack(session_id, trial.trial_id, outcome)
        if trial.trial_id in edits:
            edits[trial.trial_id](session)
        publisher.status(session)
    publisher.end(session_id)
    publisher.status(session)


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
    from rosbags.highlevel import AnyReader

    from .bag import _storage

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
