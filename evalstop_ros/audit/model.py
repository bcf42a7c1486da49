"""One session, as read from a rosbag or a journal: the plain data the verifier works on (journal stream and wire; docs/audit.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from ..session.journal import Event
from ..session.values import ComparisonState

__all__ = [
    "AckRecord",
    "ConfigRecord",
    "RequestRecord",
    "ScoreRecord",
    "SessionRecord",
    "StateRecord",
    "StatusRecord",
]


class ConfigRecord(NamedTuple):
    """One sighting of the session configuration (canonical JSON and its SHA-256)."""

    position: int
    stamp_ns: int
    session_id: str
    config_json: str
    config_hash: str
    #: ``"session_config"`` (topic), ``"journal"`` (meta table or config event), ``"--config"``.
    origin: str


class RequestRecord(NamedTuple):
    """A trial request as published on ``trial_request`` (one per attempt)."""

    position: int
    stamp_ns: int
    session_id: str
    trial_id: int
    round: int
    attempt: int
    label: str
    task: str
    initial_condition: str
    token: str


class ScoreRecord(NamedTuple):
    """A score as sent on ``trial_score`` (before the manager judged it)."""

    position: int
    stamp_ns: int
    trial_id: int
    token: str
    success: bool
    progress: float
    scorer: str
    notes: str
    preference: str
    instruction: str = ""
    pair_invalid: bool = False

    def submission(self) -> dict[str, Any]:
        """The score as the manager journals it (:func:`~evalstop_ros.session.session.score_submission`)."""
        from ..session.limits import score_submission

        return score_submission(self.token, self.success, self.progress, self.scorer, self.notes, self.preference,
                                self.instruction, self.pair_invalid)


class AckRecord(NamedTuple):
    """The manager's answer to one score, from ``score_ack``."""

    position: int
    stamp_ns: int
    session_id: str
    trial_id: int
    accepted: bool
    duplicate: bool
    reason: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class StatusRecord(ComparisonState):
    """A published state of one comparison x metric: the row (:class:`~evalstop_ros.session.values.ComparisonState`)
    as published, and where it was found.

    From a ``comparison_status`` message, an entry of a ``session_status`` message, or a
    ``decision`` journal event (which carries no alpha, means or e-value: ``None``/NaN). Neither
    carries the test's ``alternative`` (``""``).
    ``decision`` is the raw code (a code that is no decision, -1 for an unknown journaled name,
    shows up as a mismatch); ``task`` is ``""`` in bags recorded before the field existed.
    """

    position: int
    stamp_ns: int
    origin: str


class StateRecord(NamedTuple):
    """A session state as published (``session_status``) or journaled (started, finished...)."""

    position: int
    stamp_ns: int
    origin: str
    #: ``"idle"``, ``"running"``, ``"paused"``, ``"finished"`` or ``"aborted"``.
    state: str
    #: Trials scored so far (``SessionStatus.trials_done``; -1 when unknown).
    trials_done: int
    #: Final letter display, policy -> letters (``session_status`` only).
    letters: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class SessionRecord:
    """Everything read from one source about one session (module docstring).

    Attributes
    ----------
    source:
        The path that was read.
    kind:
        ``"bag"`` or ``"journal"``.
    storage:
        ``"sqlite3"``, ``"mcap"`` (bags) or ``"journal"``.
    session_id:
        The session's id.
    configs:
        Every sighting of the configuration, in order (more than one hash is a violation).
    events:
        The journal stream in ``seq`` order (empty for a bag recorded without ``session_event``).
    event_positions:
        Where each of ``events`` is in the source: its ``seq`` in a journal, the index of the
        message that first carried it in a bag (so it orders against the wire).
    event_conflicts:
        ``(seq, first payload, other payload)`` for journal events seen twice with different
        content (a bag only: the manager republishes its journal after a restart).
    requests, scores, acks:
        The wire (bags only), in recording order.
    statuses:
        Published comparison states: wire messages and ``decision`` events.
    states:
        Session states, wire and journal, in order.
    topic_counts:
        Messages per topic read (bags) or events per kind (journals).
    start_ns, end_ns:
        First and last stamp in the source.
    plan_key, chain_break, truncated:
        Journal files only (below).
    """

    source: str
    kind: str
    storage: str
    session_id: str
    configs: tuple[ConfigRecord, ...]
    events: tuple[Event, ...] = ()
    event_positions: tuple[int, ...] = ()
    event_conflicts: tuple[tuple[int, dict[str, Any], dict[str, Any]], ...] = ()
    requests: tuple[RequestRecord, ...] = ()
    scores: tuple[ScoreRecord, ...] = ()
    acks: tuple[AckRecord, ...] = ()
    statuses: tuple[StatusRecord, ...] = ()
    states: tuple[StateRecord, ...] = ()
    topic_counts: tuple[tuple[str, int], ...] = ()
    start_ns: int = 0
    end_ns: int = 0
    #: The session's randomization key as the journal's owner holds it (hex; journals only): lets the
    #: audit replay the plan of a session whose key is not revealed yet.
    plan_key: str = ""
    #: Integrity findings of a journal file: the first event off the hash chain
    #: ``(seq, kind, trial id)``, and why it looks truncated (``""`` if not).
    chain_break: tuple[int, str, int | None] | None = None
    truncated: str = ""
    #: Why the journal's head file does not vouch for its last events (``""`` if it does).
    head_problem: str = ""

    @property
    def has_journal_stream(self) -> bool:
        """True when the journal events are available (always for a journal file)."""
        return bool(self.events)

    @property
    def has_wire(self) -> bool:
        """True for a bag (the topics were recorded)."""
        return self.kind == "bag"
