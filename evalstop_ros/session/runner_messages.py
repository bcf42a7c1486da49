"""What of a runner's result message an operator may see: a fixed category and an opaque id.

The full text is journaled sealed (:func:`~.blinding.seal_text`); docs/session.md.
"""

from __future__ import annotations

import re
import secrets

__all__ = ["CATEGORIES", "RUNNER_ERROR", "operator_text"]

#: Categories of a runner's operator message (policy_runner's ``runner.errors.Category`` words).
CATEGORIES = ("unreachable", "too slow", "protocol error", "server error", "refused by the command guard",
              "robot fault", "emergency stop", "canceled", "runner shut down", "sealed goal")
#: The category of a message in no known form.
RUNNER_ERROR = "runner error"
_OPERATOR = re.compile(r"(?:" + "|".join(map(re.escape, CATEGORIES)) + r") \(error [0-9a-f]{8}\)")
#: Messages the manager writes itself about a run (nodes/runner_link.py): fixed words and numbers only.
_MANAGER = re.compile(r"goal rejected by the runner|no answer from the runner to \d+ goal requests|runner timed out"
                      r"|the runner went away during the run|goal ended with status \d+"
                      r"|result refused: (?:no|a wrong) runner proof")


def operator_text(message: str, ok: bool) -> str:
    """The part of a run's ``message`` an operator channel may carry (module docstring).

    A successful run shows nothing of its message (its text is for the report, sealed).

    >>> operator_text("server error (error 3fa2c19b)", False)
    'server error (error 3fa2c19b)'
    >>> operator_text("refused by the command guard (error 0123abcd): panda_joint4 above its limit", False)
    'refused by the command guard (error 0123abcd)'
    >>> operator_text("runner timed out", False), operator_text("42 steps; recorded in /data/x", True)
    ('runner timed out', '')
    >>> operator_text("KeyError: 'pi0_fast_droid'", False)[:20]
    'runner error (error '
    """
    if not message:
        return ""
    if ok:
        return ""
    if _MANAGER.fullmatch(message):
        return message
    known = _OPERATOR.match(message)
    if known is not None:
        return known.group(0)
    return f"{RUNNER_ERROR} (error {secrets.token_hex(4)})"
