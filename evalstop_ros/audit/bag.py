"""Reading a rosbag2 bag (sqlite3 or mcap) of an evalstop session into a :class:`SessionRecord`, topics found by type.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections import Counter
from typing import Any

import yaml  # type: ignore[import-untyped, unused-ignore]
from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.interfaces import Connection
from rosbags.rosbag2 import ReaderError
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

from ..session.blinding import revealed_key
from ..session.journal import Event
from ..session.public_view import PublicView, public_config_json
from .errors import AuditError
from .interfaces import EVALSTOP_PACKAGE, TOPICS, message_definitions, typestore
from .journal import event_states, event_statuses
from .model import AckRecord, ConfigRecord, RequestRecord, ScoreRecord, SessionRecord, StateRecord, StatusRecord

__all__ = ["is_bag", "read_bag"]

#: SessionStatus.STATE_* -> state name.
STATES = {0: "idle", 1: "running", 2: "paused", 3: "finished", 4: "aborted"}
_TYPES = {t.msgtype: t.name for t in TOPICS}


def is_bag(path: str | os.PathLike[str]) -> bool:
    """True for a rosbag2 directory (it holds ``metadata.yaml``)."""
    return (pathlib.Path(path) / "metadata.yaml").is_file()


def _stamp(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _namespace(topic: str) -> str:
    return topic.rsplit("/", 1)[0] or "/"


def _pick(choices: set[str], chosen: str | None, what: str, option: str, source: str) -> str | None:
    if chosen is not None:
        if chosen not in choices:
            raise AuditError(f"{source}: no {what} {chosen!r} in the bag; found {sorted(choices)}")
        return chosen
    if len(choices) > 1:
        raise AuditError(f"{source}: the bag holds {len(choices)} {what}s {sorted(choices)}; choose one with {option}")
    return next(iter(choices), None)


def _ensure_types(reader: AnyReader, connections: list[Connection]) -> None:
    """Register our definitions for evalstop types the bag carries no definition of."""
    missing = {c.msgtype for c in connections if c.msgtype not in reader.typestore.fielddefs}
    if not missing:
        return
    types = {}
    for name, text in message_definitions().items():
        types.update(get_types_from_msg(text, name))
    reader.typestore.register({k: v for k, v in types.items() if k not in reader.typestore.fielddefs})


def read_bag(path: str | os.PathLike[str], *, namespace: str | None = None,
             session_id: str | None = None) -> SessionRecord:
    """Read one session from a rosbag2 bag.

    :param path: The bag directory (holding ``metadata.yaml``).
    :param namespace: Namespace of the manager's topics (e.g. ``/lab1``), if the bag has several.
    :param session_id: The session to read, if the bag has several.
    :returns: The :class:`SessionRecord` with the wire view and, if recorded, the journal stream.
    :raises AuditError: If the bag cannot be read, holds no evalstop topic, or is ambiguous.
    """
    source = str(path)
    try:
        fallback: Typestore | None = typestore()  # for bags whose connections carry no definition at all
    except AuditError:
        fallback = None
    try:
        with AnyReader([pathlib.Path(path)], default_typestore=fallback) as reader:
            connections = [c for c in reader.connections if c.msgtype in _TYPES]
            if not connections:
                found = sorted({c.msgtype for c in reader.connections})
                raise AuditError(f"{source}: no evalstop topic in the bag (types found: {found or 'none'})")
            chosen = _pick({_namespace(c.topic) for c in connections}, namespace, "namespace", "--namespace", source)
            connections = [c for c in connections if _namespace(c.topic) == chosen]
            _ensure_types(reader, connections)
            messages = []
            for index, (connection, stamp_ns, raw) in enumerate(reader.messages(connections=connections)):
                messages.append((index, int(stamp_ns), connection.msgtype, reader.deserialize(raw, connection.msgtype)))
    except (AnyReaderError, ReaderError, KeyError, ValueError, OSError) as err:
        raise AuditError(f"{source}: cannot read the bag: {err}") from err
    return _build(source, _storage(pathlib.Path(path)), messages, session_id)


def _storage(path: pathlib.Path) -> str:
    """The bag's storage plugin (``mcap`` or ``sqlite3``) from its ``metadata.yaml``."""
    try:
        info = yaml.safe_load((path / "metadata.yaml").read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
        return str(info["storage_identifier"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return "unknown"


def _build(source: str, storage: str, messages: list[tuple[int, int, str, Any]], session_id: str | None) -> SessionRecord:
    """Sort the deserialized messages into a record of one session."""
    sessions = {str(m.session_id) for _, _, _, m in messages if getattr(m, "session_id", "")}
    chosen = _pick(sessions, session_id, "session", "--session", source)
    if chosen is None:
        raise AuditError(f"{source}: the evalstop topics carry no session id (no session was started while recording)")
    if len(sessions) > 1:
        own = [i for i, _, _, m in messages if getattr(m, "session_id", None) == chosen]
        first, last = min(own), max(own)
        messages = [entry for entry in messages if first <= entry[0] <= last
                    and getattr(entry[3], "session_id", chosen) in (chosen, "")]
    configs: list[ConfigRecord] = []
    events: dict[int, Event] = {}
    first_seen: dict[int, int] = {}
    conflicts: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    requests: list[RequestRecord] = []
    scores: list[ScoreRecord] = []
    acks: list[AckRecord] = []
    statuses: list[StatusRecord] = []
    states: list[StateRecord] = []
    counts: Counter[str] = Counter()
    last_comparisons: dict[int, tuple[Any, ...]] = {}
    for index, stamp_ns, msgtype, msg in messages:
        counts[_TYPES[msgtype]] += 1
        kind = msgtype.removeprefix(f"{EVALSTOP_PACKAGE}/msg/")
        if kind == "SessionConfig":
            configs.append(ConfigRecord(index, stamp_ns, msg.session_id, msg.config_json, msg.config_hash,
                                        "session_config"))
        elif kind == "SessionEvent":
            _add_event(events, conflicts, msg)
            first_seen.setdefault(int(msg.seq), index)
        elif kind == "TrialRequest":
            requests.append(RequestRecord(index, stamp_ns, msg.session_id, int(msg.trial_id), int(msg.round),
                                          int(msg.attempt), msg.label, msg.task, msg.initial_condition, msg.token))
        elif kind == "TrialScore":
            scores.append(ScoreRecord(index, stamp_ns, int(msg.trial_id), msg.token, bool(msg.success),
                                      float(msg.progress), msg.scorer, msg.notes, msg.preference,
                                      getattr(msg, "instruction", ""), bool(getattr(msg, "pair_invalid", False))))
        elif kind == "ScoreAck":
            acks.append(AckRecord(index, stamp_ns, msg.session_id, int(msg.trial_id), bool(msg.accepted),
                                  bool(msg.duplicate), msg.reason))
        elif kind == "ComparisonStatus":
            statuses.append(_status(index, stamp_ns, "comparison_status", msg))
        elif kind == "SessionStatus":
            if msg.session_id != chosen:
                continue  # the idle status before a session starts
            letters = tuple(zip(msg.letter_policies, msg.letters))
            states.append(StateRecord(index, stamp_ns, "session_status", STATES.get(int(msg.state), str(msg.state)),
                                      int(msg.trials_done), letters))
            for position, c in enumerate(msg.comparisons):
                # a status repeats unchanged comparisons (one per manager step): keep the changes only
                key = (getattr(c, "task", ""), c.policy_a, c.policy_b, c.metric, c.method, c.alpha, c.n, c.decision,
                       c.stopping_trial,
                       repr(c.pvalue), repr(c.evalue), repr(c.mean_a), repr(c.mean_b))
                if last_comparisons.get(position) != key:
                    last_comparisons[position] = key
                    statuses.append(_status(index, stamp_ns, "session_status", c))
    stream = tuple(events[seq] for seq in sorted(events))
    configs, stream, statuses, states = _unblind(chosen, configs, stream, statuses, states)
    positions = tuple(first_seen[e.seq] for e in stream)
    statuses.extend(event_statuses(stream, positions))
    states.extend(event_states(stream, positions))
    stamps = [m[1] for m in messages] or [0]
    return SessionRecord(
        source=source, kind="bag", storage=storage, session_id=chosen, configs=tuple(configs), events=stream,
        event_positions=positions,
        event_conflicts=tuple(conflicts), requests=tuple(requests), scores=tuple(scores), acks=tuple(acks),
        statuses=tuple(statuses), states=tuple(states), topic_counts=tuple(sorted(counts.items())),
        start_ns=min(stamps), end_ns=max(stamps),
    )


def _unblind(session_id: str, configs: list[ConfigRecord], stream: tuple[Event, ...], statuses: list[StatusRecord],
             states: list[StateRecord]) -> tuple[list[ConfigRecord], tuple[Event, ...], list[StatusRecord],
                                                 list[StateRecord]]:
    """The records with the policies' real names, when the recording holds the revealed key and the
    config republished with them (:mod:`evalstop_ros.session.public_view`); else unchanged.

    A ``session_config`` is restored only if it is exactly the public view of the real one (any
    other difference stays, and the audit reports the change of configuration).
    """
    key, _ = revealed_key(stream, session_id)
    reveal = next((e.seq for e in stream if e.kind == "key_revealed"), None)
    real: ConfigRecord | None = None
    for record in reversed(configs):
        try:
            policies = [str(p) for p in json.loads(record.config_json)["policies"]]
        except (ValueError, KeyError, TypeError):
            continue
        if not PublicView(policies, key, session_id).is_public(policies):
            real = record
            break
    if key is None or reveal is None or real is None:
        return configs, stream, statuses, states
    view = PublicView(json.loads(real.config_json)["policies"], key, session_id)
    public = public_config_json(real.config_json, view)
    configs = [c._replace(config_json=real.config_json, config_hash=real.config_hash) if c.config_json == public
               else c for c in configs]
    stream = tuple(e if e.seq >= reveal else Event(e.seq, e.stamp_ns, e.kind, e.trial_id,
                                                   view.restore_event_payload(e.kind, e.payload, real.config_hash))
                   for e in stream)
    statuses = [dataclasses.replace(s, policy_a=view.restore(s.policy_a), policy_b=view.restore(s.policy_b))
                for s in statuses]
    states = [s._replace(letters=tuple((view.restore(p), letter) for p, letter in s.letters)) for s in states]
    return configs, stream, statuses, states


def _add_event(events: dict[int, Event], conflicts: list[tuple[int, dict[str, Any], dict[str, Any]]], msg: Any) -> None:
    try:
        payload = json.loads(msg.payload_json)
    except json.JSONDecodeError:
        payload = {"unparsable_payload": msg.payload_json}
    event = Event(int(msg.seq), _stamp(msg.header), str(msg.kind), int(msg.trial_id) or None, payload)
    seen = events.get(event.seq)
    if seen is None:
        events[event.seq] = event
    elif (seen.kind, seen.trial_id, seen.payload) != (event.kind, event.trial_id, event.payload):
        conflicts.append((event.seq, {"kind": seen.kind, "trial_id": seen.trial_id, **seen.payload},
                          {"kind": event.kind, "trial_id": event.trial_id, **event.payload}))


def _status(index: int, stamp_ns: int, origin: str, msg: Any) -> StatusRecord:
    return StatusRecord(
        position=index, stamp_ns=stamp_ns, origin=origin, policy_a=msg.policy_a, policy_b=msg.policy_b,
        metric=msg.metric, method=msg.method, alternative="", alpha=float(msg.alpha), n=int(msg.n),
        decision=int(msg.decision),
        pvalue=float(msg.pvalue), evalue=float(msg.evalue), mean_a=float(msg.mean_a), mean_b=float(msg.mean_b),
        stopping_trial=int(msg.stopping_trial) or None,
        task=str(getattr(msg, "task", "") or ""),  # absent from definitions before multi-task claims
    )

