"""``evaluation_manager``'s ``session_control`` and ``correct_score`` requests as session calls, answered ``(ok, message)``.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalstop.srv import CorrectScore, SessionControl

from ..session import EditOutcome, EvaluationSession, SessionError, SessionState

__all__ = ["Controlled", "apply_control", "apply_correction", "control_command"]

#: ``SessionControl`` command -> its name.
_COMMANDS = {SessionControl.Request.COMMAND_PAUSE: "pause", SessionControl.Request.COMMAND_RESUME: "resume",
             SessionControl.Request.COMMAND_ABORT: "abort", SessionControl.Request.COMMAND_CONFIRM_RESET: "confirm_reset"}


def control_command(command: int) -> tuple[str | None, str]:
    """``(name, "")`` of a ``SessionControl`` command, or ``(None, why not)``."""
    name = _COMMANDS.get(command)
    return name, "" if name else f"unknown command {command} (1 pause, 2 resume, 3 abort, 4 confirm reset)"


class Controlled(Protocol):
    """What ``session_control`` acts on: a local session or a hub station's."""

    @property
    def session_id(self) -> str: ...
    @property
    def state(self) -> SessionState: ...
    def pause(self, reason: str = "") -> None: ...
    def resume(self) -> None: ...
    def abort(self, reason: str) -> None: ...
    def confirm_reset(self, trial_id: int, attempt: int = 0) -> EditOutcome: ...


def apply_control(session: Controlled | None, command: str, request: Any) -> tuple[bool, str]:
    """Pause, resume, abort, or confirm the reset of the pending trial; a request sent again (its
    answer was lost) gets the same answer."""
    if session is None:
        return False, "no session"
    if command == "confirm_reset":
        outcome = session.confirm_reset(int(request.trial_id), int(request.attempt))
        return outcome.applied, outcome.reason
    try:
        if command == "pause":
            session.pause(request.reason)
        elif command == "resume":
            session.resume()
        else:
            session.abort(request.reason)
    except SessionError as err:
        return False, str(err)
    return True, f"session {session.session_id} {session.state.value}"


def apply_correction(session: EvaluationSession | None, request: Any) -> tuple[bool, str]:
    """Correct, void or undo a score (``CorrectScore``); the reason is journaled with its scorer."""
    reason = request.reason.strip()
    if reason and request.scorer:
        reason = f"{reason} (by {request.scorer})"
    if session is None:
        return False, "no session"
    if request.action == CorrectScore.Request.ACTION_CORRECT:
        outcome = session.correct_score(int(request.trial_id), bool(request.success), float(request.progress), reason)
    elif request.action == CorrectScore.Request.ACTION_VOID:
        outcome = session.void_score(int(request.trial_id), reason)
    elif request.action == CorrectScore.Request.ACTION_UNDO:
        if request.trial_id:
            return False, "ACTION_UNDO takes trial_id 0 (it voids the latest score); use ACTION_VOID for a given trial"
        outcome = session.undo_last(reason)
    else:
        return False, f"unknown action {request.action} (1 correct, 2 void, 3 undo)"
    return outcome.applied, outcome.reason
