"""Session logic between the ROS nodes and the statistics core (plain Python, no ROS imports).

:mod:`.config` validates the pre-registered design (:class:`SessionConfig`, from YAML),
:mod:`.plan` derives every random choice from its seed, :mod:`.journal` is the append-only
SQLite log, and :mod:`.session` is the journaled state machine the manager node drives
(:class:`EvaluationSession`); a session survives ``kill -9`` by replaying its journal.
"""

from .config import ConfigError, MetricConfig, SessionConfig, config_diff, load_config, parse_config
from .errors import JournalError, SessionError
from .journal import Event, Journal, JournalContents, read_journal
from .plan import Plan
from .session import (
    ComparisonStatus,
    EditOutcome,
    EvaluationSession,
    OfflineResult,
    OperatorPrompt,
    ScoreOutcome,
    SessionState,
    SessionStatus,
    TrialRequest,
    offline_decisions,
)

__all__ = [
    "ComparisonStatus",
    "ConfigError",
    "EditOutcome",
    "EvaluationSession",
    "Event",
    "Journal",
    "JournalContents",
    "JournalError",
    "MetricConfig",
    "OfflineResult",
    "OperatorPrompt",
    "Plan",
    "ScoreOutcome",
    "SessionConfig",
    "SessionError",
    "SessionState",
    "SessionStatus",
    "TrialRequest",
    "config_diff",
    "load_config",
    "offline_decisions",
    "parse_config",
    "read_journal",
]
