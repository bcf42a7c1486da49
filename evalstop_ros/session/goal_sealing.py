"""Sealed ``RunTrial`` goals: what identifies a policy reaches the runner only, under AEAD (RFC 8439).

Runner key, per-session seal key, the runner's proof of opening: docs/session.md and docs/deploying.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import os
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .auth import AuthError, read_identity
from .errors import SessionError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

__all__ = ["PAD", "GoalSealer", "Opened", "SealError", "journal_seal", "open_goal", "read_runner_key",
           "result_proof", "seal_identity", "seal_problem", "session_seal_key", "wrap_seal_key"]

#: A sealed identity is padded to a multiple of this many bytes (ids and addresses differ in length).
PAD = 256
_NONCE = 12
_KEY = 32


class SealError(SessionError):
    """A goal that cannot be sealed or opened (no runner key, a wrong one, a damaged seal)."""


def _aead(key: bytes) -> ChaCha20Poly1305:
    """ChaCha20-Poly1305 under ``key``, imported on first use: a node that never meets a sealed
    goal does not load cryptography at start-up."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    return ChaCha20Poly1305(key)


def _unseal(key: bytes, box: bytes, place: bytes) -> bytes:
    """The plain text of ``box`` (``nonce || cipher text``); ``ValueError`` when it does not open."""
    from cryptography.exceptions import InvalidTag

    try:
        return _aead(key).decrypt(box[:_NONCE], box[_NONCE:], place)
    except InvalidTag as err:
        raise ValueError("the authentication tag does not match") from err


def read_runner_key(path: str | os.PathLike[str]) -> bytes:
    """The runner key from its file (one ``NAME HEXKEY`` line, ``evalstop keys new runner``); at least
    32 bytes. :class:`SealError` names the problem."""
    try:
        _, key = read_identity(path)
    except AuthError as err:
        raise SealError(f"runner key: {err}") from err
    if len(key) < _KEY:
        raise SealError(f"runner key file {str(path)!r}: the key has {len(key)} bytes; {_KEY} needed")
    return key[:_KEY]


def session_seal_key(session_key: bytes, session_id: str) -> bytes:
    """``S`` of a session: ``HMAC-SHA256(session key, "evalstop-goal-seal\\0" + session id)``."""
    return hmac.new(session_key, b"evalstop-goal-seal\0" + session_id.encode(), hashlib.sha256).digest()


def _place(session_id: str, trial_id: int, attempt: int) -> bytes:
    return f"evalstop-goal\0{session_id}\0{int(trial_id)}\0{int(attempt)}".encode()


def seal_identity(seal_key: bytes, session_id: str, trial_id: int, attempt: int, identity: str) -> bytes:
    """``nonce || ChaCha20-Poly1305(S, padded identity)`` bound to ``(session, trial, attempt)``.

    >>> s = bytes(32); box = seal_identity(s, "s1", 3, 1, "pi0_fast_droid")
    >>> len(box), box == seal_identity(s, "s1", 3, 1, "pi0_fast_droid"), len(seal_identity(s, "s1", 3, 1, "x"))
    (284, True, 284)
    """
    place = _place(session_id, trial_id, attempt)
    nonce = hmac.new(seal_key, b"nonce\0" + place, hashlib.sha256).digest()[:_NONCE]
    raw = identity.encode()
    size = len(raw) + 2
    padded = len(raw).to_bytes(2, "big") + raw + bytes(-size % PAD)
    return nonce + _aead(seal_key).encrypt(nonce, padded, place)


def _open_identity(seal_key: bytes, session_id: str, trial_id: int, attempt: int, sealed: bytes) -> str:
    try:
        padded = _unseal(seal_key, sealed, _place(session_id, trial_id, attempt))
        return padded[2:2 + int.from_bytes(padded[:2], "big")].decode()
    except (ValueError, UnicodeDecodeError) as err:
        raise SealError("the goal's seal does not open with its seal key (damaged, or moved from another "
                        "trial)") from err


def _wrap_place(session_id: str) -> bytes:
    return b"evalstop-seal-key\0" + session_id.encode()


def wrap_seal_key(runner_key: bytes, seal_key: bytes, session_id: str) -> bytes:
    """``S`` sealed under the runner key ``R`` for ``session_id`` (random nonce)."""
    nonce = secrets.token_bytes(_NONCE)
    return nonce + _aead(runner_key).encrypt(nonce, seal_key, _wrap_place(session_id))


@dataclasses.dataclass(frozen=True)
class Opened:
    """A goal opened by the runner: the policy's identity and the session's seal key (for the proof)."""

    identity: str
    seal_key: bytes


def open_goal(runner_key: bytes | None, goal: Any) -> Opened:
    """The identity of ``goal`` (a ``RunTrial`` goal): opened with the runner key, or its ``policy_id``
    when the manager sent it unsealed. :class:`SealError` when a runner without a key gets a sealed
    goal, or the seal does not open (another lab's runner key, a forged or damaged goal)."""
    sealed, wrapped = bytes(goal.sealed), bytes(goal.seal_key)
    if not sealed and not wrapped:
        return Opened(str(goal.policy_id), b"")
    if runner_key is None:
        raise SealError("the goal is sealed and this runner has no runner key (set `goal_key_file` to the "
                        "manager's runner key file)")
    try:
        seal_key = _unseal(runner_key, wrapped, _wrap_place(str(goal.session_id)))
    except ValueError as err:
        raise SealError("the goal's seal key does not open with this runner's key (the manager has another "
                        "runner key, or the goal was forged)") from err
    identity = _open_identity(seal_key, str(goal.session_id), int(goal.trial_id), int(goal.attempt), sealed)
    return Opened(identity, seal_key)


def _number(value: float) -> str:
    return repr(float(value)) if math.isfinite(float(value)) else str(float(value))


def result_proof(seal_key: bytes, goal: Any, result: Any) -> bytes:
    """HMAC-SHA256 under ``S`` over the goal's ``(session, trial, attempt, sealed)`` and the result's
    ``ok``, ``message``, ``duration``, ``auto_scored``, ``auto_success`` and ``auto_progress``."""
    fields = {"session_id": str(goal.session_id), "trial_id": int(goal.trial_id), "attempt": int(goal.attempt),
              "sealed": bytes(goal.sealed).hex(), "ok": bool(result.ok), "message": str(result.message),
              "duration": _number(result.duration), "auto_scored": bool(result.auto_scored),
              "auto_success": bool(result.auto_success), "auto_progress": _number(result.auto_progress)}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(seal_key, b"evalstop-result\0" + text.encode(), hashlib.sha256).digest()


class GoalSealer:
    """The manager's side: the identity fields of each goal, and the check of each result's proof.

    ``runner_key`` ``None``: goals go unsealed (``policy_id`` in clear; ``allow_unsealed``), and a
    result needs no proof.
    """

    def __init__(self, runner_key: bytes | None, seal_key: bytes, session_id: str) -> None:
        self.sealing = runner_key is not None
        self.session_id = session_id
        self._seal_key = seal_key
        self._wrapped = wrap_seal_key(runner_key, seal_key, session_id) if runner_key is not None else b""

    def goal_fields(self, trial_id: int, attempt: int, identity: str) -> dict[str, Any]:
        """``sealed``/``seal_key`` (or, unsealed, ``policy_id``) of the goal of one run."""
        if not self.sealing:
            return {"policy_id": identity}
        return {"sealed": list(seal_identity(self._seal_key, self.session_id, trial_id, attempt, identity)),
                "seal_key": list(self._wrapped)}

    def result_problem(self, goal: Any, result: Any) -> str:
        """Why ``result`` is not the runner's answer to ``goal`` ("" when its proof checks out): ``"no runner
        proof"`` or ``"a wrong runner proof"`` (a node without the runner key answered the goal)."""
        if not self.sealing:
            return ""
        proof = bytes(result.proof)
        if not proof:
            return "no runner proof"
        if not hmac.compare_digest(proof, result_proof(self._seal_key, goal, result)):
            return "a wrong runner proof"
        return ""


def journal_seal(sealed: bytes, attempt: int) -> dict[str, Any] | None:
    """What the journal records of a run's seal (``None`` for an unsealed goal)."""
    return {"attempt": int(attempt), "sealed": sealed.hex()} if sealed else None


def seal_problem(record: Mapping[str, Any], seal_key: bytes, session_id: str, trial_id: int, policy: str) -> str:
    """Why a journaled ``goal_seal`` is not the seal of ``policy`` for that trial ("" when it is)."""
    try:
        attempt, sealed = int(record["attempt"]), bytes.fromhex(str(record["sealed"]))
    except (KeyError, TypeError, ValueError):
        return f"trial {trial_id}: the journaled goal seal is malformed"
    if sealed != seal_identity(seal_key, session_id, trial_id, attempt, policy):
        return (f"trial {trial_id} attempt {attempt}: the goal sent to the runner is not the seal of the "
                "planned policy")
    return ""
