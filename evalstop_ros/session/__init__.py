"""Session logic between the ROS nodes and the statistics core (plain Python, no ROS imports).

The configuration, the seeded plan, the journal and the journaled state machine the manager node
drives (:class:`EvaluationSession`); docs/session.md and docs/protocol.md.
"""

from .config import ConfigError, SessionConfig, load_config, parse_config
from .config_input import config_diff
from .config_sections import AdaStopConfig, MetricConfig
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
