"""Blinding on the wire: what the operator-visible journal stream may carry, and how the audit
restores it once the session's key is revealed (commit-reveal, :mod:`.plan`).

While a session runs, ``session_event`` republishes every journal event; a ``trial_requested``
event's ``policy_id`` (which policy is behind the label) and ``token`` are *sealed*: removed from
the published payload, which says ``"sealed": true`` instead.  The journal keeps them.  After
the end the ``key_revealed`` event publishes the key; :func:`unseal` then recomputes both from
the plan (the policy whose label in that round is the published label, and the trial's token),
so a recording audits completely, and :func:`revealed_key` checks the key against the
commitment the ``config`` event published before the first trial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .config import SessionConfig
from .journal import Event
from .plan import Plan, verify_key

__all__ = ["SEALED_FIELDS", "revealed_key", "seal", "unseal"]

#: Fields of a ``trial_requested`` payload withheld from the wire while the session runs.
SEALED_FIELDS = ("policy_id", "token")


def seal(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as ``session_event`` may publish it (a copy; the journal is unchanged)."""
    if kind != "trial_requested":
        return payload
    return {**{k: v for k, v in payload.items() if k not in SEALED_FIELDS}, "sealed": True}


def revealed_key(events: Sequence[Event], session_id: str) -> tuple[bytes | None, str]:
    """The key revealed at the end, checked against the commitment: ``(key, problem)``.

    ``key`` is ``None`` when no ``key_revealed`` event is present or the key does not match
    its commitment; ``problem`` then says which ("" when the key checks out).
    """
    commitment = next((e.payload.get("key_commitment") for e in events if e.kind == "config"), None)
    reveal = next((e for e in events if e.kind == "key_revealed"), None)
    if reveal is None:
        return None, ("the session's randomization key was not revealed (the session has not ended, or the "
                      "recording stops before its end)")
    key = reveal.payload.get("key")
    if commitment is None:
        return None, "no key commitment was recorded (the config event is missing)"
    if not verify_key(key, commitment, session_id):
        return None, (f"the revealed key does not match the commitment {str(commitment)[:12]} published at the "
                      "start: the plan may have been changed mid-session")
    return bytes.fromhex(str(key)), ""


def unseal(events: Sequence[Event], config: SessionConfig, key: bytes, session_id: str) -> list[Event]:
    """The events with every sealed ``trial_requested`` payload restored from the plan of ``key``.

    A label that is no label of its round gets ``policy_id`` ``""`` (the audit flags it).
    """
    plan = Plan(config, key)
    out = []
    for event in events:
        payload = event.payload
        if event.kind == "trial_requested" and payload.get("sealed") is True and event.trial_id is not None:
            round_number = int(payload.get("round", 0))
            policy = next((p for p in config.policies if round_number >= 1
                           and plan.label(p, round_number) == payload.get("label")), "")
            restored = {k: v for k, v in payload.items() if k != "sealed"}
            restored.update(policy_id=policy, token=plan.token(session_id, event.trial_id))
            event = dataclasses.replace(event, payload=restored)
        out.append(event)
    return out
