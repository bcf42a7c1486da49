"""Blinding in the journal and on the wire: what a record may hold in clear, and how the key
revealed at the end restores the rest (commit-reveal, :mod:`.plan`; docs/integrity.md, docs/session.md).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import os
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .config import SessionConfig
from .journal_format import Event
from .plan import Plan, verify_key

__all__ = ["SEALED_FIELDS", "check_reveal", "journal_payload", "open_text", "revealed_key", "seal", "seal_text", "unseal",
           "unseal_event"]

#: Fields of a ``trial_requested`` payload withheld from the journal and the wire while the session runs.
SEALED_FIELDS = ("policy_id", "token")
#: A ``runner_result``'s full message: in clear only in memory (``detail``), sealed in the journal.
DETAIL, DETAIL_SEALED = "detail", "detail_sealed"
_NONCE_BYTES = 12


def _cipher(key: bytes, session_id: str) -> AESGCM:
    """AES-256-GCM under ``HMAC-SHA256(plan key, "evalstop-seal", session id)`` (a key of its own)."""
    return AESGCM(hmac.new(key, b"evalstop-seal\0" + session_id.encode(), hashlib.sha256).digest())


def _where(session_id: str, kind: str, trial_id: int | None, field: str) -> bytes:
    """The associated data: a ciphertext opens only at its own place."""
    return "\0".join((session_id, kind, "" if trial_id is None else str(trial_id), field)).encode()


def seal_text(text: str, key: bytes, session_id: str, kind: str, trial_id: int | None, field: str) -> str:
    """``text`` encrypted for the journal (base64 of a fresh 12-byte nonce and the AES-GCM ciphertext)."""
    nonce = os.urandom(_NONCE_BYTES)
    sealed = _cipher(key, session_id).encrypt(nonce, text.encode(), _where(session_id, kind, trial_id, field))
    return base64.b64encode(nonce + sealed).decode("ascii")


def open_text(sealed: object, key: bytes, session_id: str, kind: str, trial_id: int | None, field: str) -> str | None:
    """The text of :func:`seal_text`, or ``None`` when it does not open (another key or place, or edited).

    >>> k = bytes(32); box = seal_text("KeyError: 'pi0_fast_droid'", k, "s1", "runner_result", 3, "detail")
    >>> open_text(box, k, "s1", "runner_result", 3, "detail"), open_text(box, k, "s1", "runner_result", 4, "detail")
    ("KeyError: 'pi0_fast_droid'", None)
    """
    if not isinstance(sealed, str):
        return None
    try:
        raw = base64.b64decode(sealed, validate=True)
        text = _cipher(key, session_id).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:],
                                                _where(session_id, kind, trial_id, field))
        return text.decode()
    except (binascii.Error, ValueError, InvalidTag, UnicodeDecodeError):
        return None


def journal_payload(kind: str, trial_id: int | None, payload: dict[str, Any], key: bytes,
                    session_id: str) -> dict[str, Any]:
    """The payload as the journal stores it (module docstring); the inverse of :func:`unseal_event`."""
    if kind == "trial_requested":
        return {**{k: v for k, v in payload.items() if k not in SEALED_FIELDS}, "sealed": True}
    if kind == "runner_result" and DETAIL in payload:
        rest = {k: v for k, v in payload.items() if k != DETAIL}
        return {**rest, DETAIL_SEALED: seal_text(str(payload[DETAIL]), key, session_id, kind, trial_id, DETAIL)}
    return payload


def seal(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as ``session_event`` may publish it (a copy; the journal is unchanged)."""
    if kind == "trial_requested":
        return {**{k: v for k, v in payload.items() if k not in SEALED_FIELDS}, "sealed": True}
    if kind == "runner_result" and (DETAIL in payload or DETAIL_SEALED in payload):
        return {k: v for k, v in payload.items() if k not in (DETAIL, DETAIL_SEALED)}
    return payload


def check_reveal(keys: Sequence[object], commitment: object, session_id: str) -> tuple[bytes | None, str]:
    """The one rule of the reveal, for the session's replay (resume) and the audit alike: exactly one
    ``key_revealed`` (``keys``: the key of each, in journal order), whose key matches the commitment.

    Returns ``(key, "")``, or ``(None, problem)`` naming what is wrong.

    >>> from .plan import commit_key
    >>> k = bytes(range(32)); c = commit_key(k, "s1")
    >>> check_reveal([k.hex()], c, "s1")[1], check_reveal([k.hex(), "00" * 32], c, "s1")[1][:37]
    ('', 'the key is revealed 2 times: exactly ')
    """
    if not keys:
        return None, ("the session's randomization key was not revealed (the session has not ended, or the "
                      "recording stops before its end)")
    if len(keys) > 1:
        return None, (f"the key is revealed {len(keys)} times: exactly one `key_revealed` may end a journal "
                      "(an event appended after its end?)")
    if not isinstance(commitment, str):
        return None, "no key commitment was recorded (the config event is missing)"
    if not verify_key(keys[0], commitment, session_id):
        return None, (f"the revealed key does not match the commitment {commitment[:12]} published at the "
                      "start: the plan may have been changed mid-session")
    return bytes.fromhex(str(keys[0])), ""


def revealed_key(events: Sequence[Event], session_id: str) -> tuple[bytes | None, str]:
    """The key revealed at the end, checked against the commitment (:func:`check_reveal`): ``(key, problem)``.

    ``key`` is ``None`` when no ``key_revealed`` event is present, when there are several, or when the key
    does not match its commitment; ``problem`` then says which ("" when the key checks out).
    """
    commitment = next((e.payload.get("key_commitment") for e in events if e.kind == "config"), None)
    return check_reveal([e.payload.get("key") for e in events if e.kind == "key_revealed"], commitment, session_id)


def unseal_event(event: Event, plan: Plan, session_id: str) -> Event:
    """``event`` with what the journal sealed restored from ``plan`` (and its key).

    A sealed request whose label is no label of its round gets ``policy_id`` ``""`` (the audit
    flags it); a sealed message that does not open gets ``detail`` ``None``.
    """
    payload = event.payload
    if event.kind == "trial_requested" and payload.get("sealed") is True and event.trial_id is not None:
        round_number = int(payload.get("round", 0))
        policy = next((p for p in plan.config.policies if round_number >= 1
                       and plan.label(p, round_number) == payload.get("label")), "")
        restored = {k: v for k, v in payload.items() if k != "sealed"}
        restored.update(policy_id=policy, token=plan.token(session_id, event.trial_id))
        return dataclasses.replace(event, payload=restored)
    if event.kind == "runner_result" and DETAIL_SEALED in payload and plan.key is not None:
        detail = open_text(payload[DETAIL_SEALED], plan.key, session_id, event.kind, event.trial_id, DETAIL)
        restored = {k: v for k, v in payload.items() if k != DETAIL_SEALED}
        return dataclasses.replace(event, payload={**restored, DETAIL: detail})
    return event


def unseal(events: Sequence[Event], config: SessionConfig, key: bytes, session_id: str) -> list[Event]:
    """The events with everything sealed restored from the plan of ``key`` (:func:`unseal_event`)."""
    plan = Plan(config, key)
    return [unseal_event(event, plan, session_id) for event in events]
