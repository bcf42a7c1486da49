"""Session logic between the ROS nodes and the statistics core (plain Python, no ROS imports).

The configuration, the seeded plan, the journal and the journaled state machine the manager node
drives (:class:`EvaluationSession`); docs/session.md and docs/protocol.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:  # the real imports, for type checkers; at run time each name loads on first use
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

#: Public name -> submodule that defines it.  Importing a submodule (``session.errors``, the
#: journal, goal sealing) loads only that one: a node does not pay for the whole engine (PEP 562).
_EXPORTS: dict[str, str] = {
    "ConfigError": "config",
    "SessionConfig": "config",
    "load_config": "config",
    "parse_config": "config",
    "config_diff": "config_input",
    "AdaStopConfig": "config_sections",
    "MetricConfig": "config_sections",
    "JournalError": "errors",
    "SessionError": "errors",
    "Event": "journal",
    "Journal": "journal",
    "JournalContents": "journal",
    "read_journal": "journal",
    "OfflineClaim": "offline",
    "OfflineResult": "offline",
    "offline_claims": "offline",
    "offline_decisions": "offline",
    "offline_letters": "offline",
    "Plan": "plan",
    "ClaimSnapshot": "session",
    "ComparisonSnapshot": "session",
    "EditOutcome": "session",
    "EvaluationSession": "session",
    "OperatorPrompt": "session",
    "PendingTrial": "session",
    "ScoreOutcome": "session",
    "SessionState": "session",
    "StatusSnapshot": "session",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


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
