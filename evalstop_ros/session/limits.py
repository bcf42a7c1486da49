"""What a submission to the session may carry: length limits, the journaled form of a score
(:func:`score_submission`, :func:`score_fields`), and the rate limit of rejection warnings."""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = [
    "INSTRUCTION_CHARS", "LOG_BURST", "LOG_WINDOW_S", "NOTES_CHARS", "OPERATOR_CHARS", "REASON_CHARS",
    "REQUEST_KINDS", "SUMMARY_CHARS", "RateLimit", "bounded", "finite_or_none", "json_safe", "score_fields",
    "score_submission",
]
#: Longest operator/scorer name and notes a score may carry (longer ones are rejected).
OPERATOR_CHARS = 64
NOTES_CHARS = 2000
INSTRUCTION_CHARS = 500
#: Strings kept of a rejected submission, and of a rejection reason, in the journal.
SUMMARY_CHARS = 64
REASON_CHARS = 256
#: Rejection warnings logged per window (the rest are counted and summarized in the next one).
LOG_BURST = 10
LOG_WINDOW_S = 60.0


#: Events a request causes directly (the first one carries the request's ``auth``); derived events
#: (decisions, the next trial, the reveal) never do.
REQUEST_KINDS = frozenset({"started", "paused", "resumed", "aborted", "score_accepted", "post_decision_score",
                           "score_held", "score_rejected", "score_duplicate", "correction", "void"})


def bounded(value: object, limit: int = SUMMARY_CHARS) -> object:
    """``value`` with a long string (or repr) cut to ``limit`` characters and its length noted."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}... ({len(value)} characters)"
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        return bounded(repr(value)[:limit + 1], limit)
    return value


class RateLimit:
    """At most ``burst`` events per ``window`` seconds (monotonic clock); counts what it refuses."""

    def __init__(self, burst: int, window: float) -> None:
        self.burst, self.window = burst, window
        self._start, self._used, self._dropped = -math.inf, 0, 0

    def allow(self) -> bool:
        """True if one more event fits in the current window."""
        now = time.monotonic()
        if now - self._start >= self.window:
            self._start, self._used = now, 0
        if self._used < self.burst:
            self._used += 1
            return True
        self._dropped += 1
        return False

    def suppressed(self) -> str:
        """``" (N similar messages suppressed)"`` once, after some were refused; else ``""``."""
        dropped, self._dropped = self._dropped, 0
        return f" ({dropped} similar messages suppressed)" if dropped else ""


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or ``None`` if it is not finite (JSON has no NaN)."""
    return float(value) if math.isfinite(value) else None


def json_safe(value: object) -> object:
    """A submitted value as it can be journaled (non-finite floats and odd types as text)."""
    if isinstance(value, (bool, str, int)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)


def score_submission(token: object, success: object, progress: object, operator: object, notes: object,
                     preference: object, instruction: object = "", pair_invalid: object = False) -> dict[str, Any]:
    """A score as journaled (``submission``), from the fields of a ``TrialScore``.

    ``instruction`` and ``pair_invalid`` appear only when given, so the submissions of every
    other session are as before.  The audit builds the same dictionary from a bag's scores.
    """
    submission: dict[str, Any] = {
        "token": json_safe(token), "success": json_safe(success), "progress": json_safe(progress),
        "operator": json_safe(operator), "notes": json_safe(notes), "preference": json_safe(preference),
    }
    if instruction:
        submission["instruction"] = json_safe(instruction)
    if pair_invalid:
        submission["pair_invalid"] = json_safe(pair_invalid)
    return submission


def score_fields(submission: dict[str, Any]) -> dict[str, Any]:
    """The ``TrialScore`` fields (but ``trial_id``) a journaled ``submission`` was built from: the
    inverse of :func:`score_submission`, which :func:`~.auth.signed_score_problem` checks the
    operator's signature against.

    >>> fields = {"token": "k", "success": True, "progress": 0.5, "preference": "A", "notes": "",
    ...           "scorer": "alice", "instruction": "fold it", "pair_invalid": True}
    >>> score_fields(score_submission(*(fields[k] for k in ("token", "success", "progress", "scorer", "notes",
    ...                                                      "preference", "instruction", "pair_invalid")))) == fields
    True
    """
    return {"token": submission.get("token"), "success": submission.get("success"),
            "progress": submission.get("progress"), "preference": submission.get("preference"),
            "notes": submission.get("notes"), "scorer": submission.get("operator"),
            "instruction": submission.get("instruction", ""), "pair_invalid": submission.get("pair_invalid", False)}
