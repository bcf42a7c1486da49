"""What the operator's channels may say about the policies while a session runs: sealed stand-ins.

Until the key is revealed every operator-reachable channel names policy *i* as ``policy:i``;
why, and what is left alone: docs/session.md and docs/integrity.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["PUBLIC_TOPICS", "PublicView", "public_config_json"]

#: Fields never rewritten: they are no policy name and must stay exact (signatures, ids, labels).
KEEP = frozenset({"session_id", "token", "mac", "scorer", "label", "round_labels", "header", "seq", "key",
                  "key_commitment"})
#: The manager's topics whose fields go through the view (``score_ack`` reasons and the trial
#: request's texts too: a reason may quote a comparison).
PUBLIC_TOPICS = frozenset({"session_config", "session_event", "session_status", "comparison_status", "trial_request",
                           "score_ack"})
#: Characters of an identifier (:data:`~.config.Identifier`, without ``.``: a sentence's full stop).
_WORD = r"A-Za-z0-9_:/\-"


def _json(value: Any) -> str:
    """Canonical JSON, as the journal and ``session_config`` write it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def public_config_json(config_json: str, view: PublicView) -> str:
    """A config's canonical JSON with the policies replaced by their stand-ins."""
    return _json(view.value(json.loads(config_json)))


class PublicView:
    """Real policy ids <-> stand-ins ``policy:1`` ... ``policy:K`` in a sealed order.

    :param policies: The session's policies (configuration order).
    :param key: The session's secret randomization key (:attr:`.plan.Plan.key`); ``None`` only
        for a session without one (then the order is a hash of the session id: not sealed).
    :param session_id: The session id (the order differs between sessions of one key).

    >>> view = PublicView(["pi0", "octo"], bytes(32), "s1")
    >>> sorted(view.standins.values())
    ['policy:1', 'policy:2']
    >>> view.text("comparison pi0 vs octo (success): A_BETTER") == (
    ...     f"comparison {view.standins['pi0']} vs {view.standins['octo']} (success): A_BETTER")
    True
    >>> view.restore(view.text("pi0 vs octo; pi0.5 is no policy")), view.text("pi01 and xpi0")
    ('pi0 vs octo; pi0.5 is no policy', 'pi01 and xpi0')
    """

    def __init__(self, policies: Sequence[str], key: bytes | None, session_id: str) -> None:
        secret = key if key is not None else hashlib.sha256(session_id.encode()).digest()
        rank = sorted(policies, key=lambda p: hmac.new(
            secret, b"evalstop-public-view\0" + session_id.encode() + b"\0" + p.encode(), hashlib.sha256).digest())
        prefix = "policy:"
        while any(p.startswith(prefix) for p in policies):  # a real id of the stand-ins' form: another prefix
            prefix = "_" + prefix
        self.prefix = prefix
        #: real id -> stand-in.
        self.standins: dict[str, str] = {p: f"{prefix}{i}" for i, p in enumerate(rank, 1)}
        self._real = {s: p for p, s in self.standins.items()}
        names = sorted(self.standins, key=len, reverse=True)  # longest first: "pi0.5" before "pi0"
        self._forward = re.compile(rf"(?<![{_WORD}])(?:{'|'.join(map(re.escape, names))})(?![{_WORD}])")
        self._backward = re.compile(rf"(?<![{_WORD}]){re.escape(prefix)}[0-9]+(?![0-9])")

    # -- real -> public --------------------------------------------------------------------
    def text(self, text: str) -> str:
        """``text`` with every whole policy id replaced by its stand-in."""
        return self._forward.sub(lambda m: self.standins[m.group(0)], text)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with the policy ids replaced (strings and list items, not keys)."""
        return _walk(value, self.text)

    def fields(self, topic: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The message fields of ``topic`` (:mod:`.publishing`'s mappings) as the operator may see them.

        ``session_config`` gets the public config and *its* hash; ``session_event`` its payload
        through :meth:`event_payload` (the caller decides whether the event precedes the reveal).
        """
        out = {k: (v if k in KEEP else self.value(v)) for k, v in fields.items()}
        if topic == "session_config":
            out["config_json"] = public_config_json(str(fields["config_json"]), self)
            out["config_hash"] = hashlib.sha256(out["config_json"].encode()).hexdigest()
        elif topic == "session_event":
            out["payload_json"] = _json(self.event_payload(str(fields["kind"]), json.loads(str(fields["payload_json"]))))
        return out

    def event_payload(self, kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """A ``session_event`` payload (already sealed, :func:`.blinding.seal`) with the policies replaced.

        The ``config`` event's ``config_hash`` becomes the hash of the public config JSON.
        Idempotent: a payload already public comes back unchanged.
        """
        out = {k: (v if k in KEEP else self.value(v)) for k, v in payload.items()}
        if kind == "config" and isinstance(out.get("config"), dict) and "config_hash" in out:
            out["config_hash"] = hashlib.sha256(_json(out["config"]).encode()).hexdigest()
        return out

    # -- public -> real --------------------------------------------------------------------
    def restore(self, text: str) -> str:
        """``text`` with every stand-in replaced by its real id (the inverse of :meth:`text`)."""
        return self._backward.sub(lambda m: self._real.get(m.group(0), m.group(0)), text)

    def restore_value(self, value: Any) -> Any:
        """The inverse of :meth:`value`."""
        return _walk(value, self.restore)

    def restore_event_payload(self, kind: str, payload: Mapping[str, Any], real_config_hash: str) -> dict[str, Any]:
        """The inverse of :meth:`event_payload` (``real_config_hash``: the ``config`` event's real hash)."""
        out = {k: (v if k in KEEP else self.restore_value(v)) for k, v in payload.items()}
        if kind == "config" and "config_hash" in out:
            out["config_hash"] = real_config_hash
        return out

    def is_public(self, names: Iterable[str]) -> bool:
        """Whether ``names`` are all stand-ins of this view (a record still blinded)."""
        return all(name in self._real for name in names)


def _walk(value: Any, rewrite: Any) -> Any:
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, Mapping):
        return {k: (v if k in KEEP else _walk(v, rewrite)) for k, v in value.items()}  # keys are field names
    if isinstance(value, (list, tuple)):
        return [_walk(v, rewrite) for v in value]
    return value
