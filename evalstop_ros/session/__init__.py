"""Session logic between the ROS nodes and the statistics core (plain Python, no ROS imports).

:mod:`.config` validates the pre-registered design (:class:`SessionConfig`, from YAML),
:mod:`.plan` derives every random choice from its seed, :mod:`.journal` is the append-only
SQLite log, and :mod:`.session` is the journaled state machine the manager node drives
(:class:`EvaluationSession`; its replay in :mod:`.replay`, edits in :mod:`.edits`, schedule in
:mod:`.schedule`, value types in :mod:`.values`, submission limits in :mod:`.limits`; the
protocol in docs/protocol.md); a session survives ``kill -9`` by replaying its journal.
:mod:`.analysis` holds the live tests (Bonferroni, sequential Holm, multi-task, AdaStop) and
:mod:`.offline` re-runs them from a journal with the statistics core's own drivers.
"""

from .config import AdaStopConfig, ConfigError, MetricConfig, SessionConfig, config_diff, load_config, parse_config
from .errors import JournalError, SessionError
from .journal import Event, Journal, JournalContents, read_journal
from .offline import OfflineClaim, OfflineResult, offline_claims, offline_decisions, offline_letters
from .plan import Plan
from .session import (
    ClaimSnapshot,
    ComparisonSnapshot,
    EditOutcome,
    EvaluationSession,
    OperatorPrompt,
    PendingTrial,
    ScoreOutcome,
    SessionState,
    StatusSnapshot,
)

__all__ = [
    "AdaStopConfig",
    "ClaimSnapshot",
    "ComparisonSnapshot",
    "ConfigError",
    "EditOutcome",
    "EvaluationSession",
    "Event",
    "Journal",
    "JournalContents",
    "JournalError",
    "MetricConfig",
    "OfflineClaim",
    "OfflineResult",
    "OperatorPrompt",
    "Plan",
    "ScoreOutcome",
    "SessionConfig",
    "SessionError",
    "SessionState",
    "StatusSnapshot",
    "PendingTrial",
    "config_diff",
    "load_config",
    "offline_claims",
    "offline_decisions",
    "offline_letters",
    "parse_config",
    "read_journal",
]
