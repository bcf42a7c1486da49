"""Authenticated scores and controls: per-operator keys, HMAC-SHA256 signatures, replay counters.

One module for the manager, the operator terminal, the runner and the audit, so all sign and check
the same bytes; what is signed and the key files are in docs/integrity.md and docs/session.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import os
import pathlib
import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import SessionError

__all__ = [
    "AuthError",
    "Check",
    "Gate",
    "Signer",
    "canonical",
    "message_fields",
    "new_keys",
    "read_identity",
    "read_keys",
    "sign",
    "signed_score_problem",
    "summary",
    "write_keys",
]

#: Message fields that are not signed: the signature itself, its counter, and the header stamp.
UNSIGNED = frozenset({"header", "counter", "mac"})
#: Operator ids: short, printable, no spaces.
OPERATOR_ID = re.compile(r"[A-Za-z0-9_.:@+-]{1,64}")
#: Smallest key accepted (bytes).
MIN_KEY_BYTES = 16
#: Bytes of a generated key.
KEY_BYTES = 32
#: Domain separation of the MAC input.
_DOMAIN = b"evalstop-auth-v1\0"
#: Strings kept of a rejected message in the journal.
_SUMMARY_CHARS = 64


class AuthError(SessionError, ValueError):
    """A key file that cannot be read or is malformed; the message names the file and the line.

    (A ``ValueError`` too: a node given a bad key file exits like for any invalid parameter.)
    """


# -- key files -------------------------------------------------------------------------------
def _parse(path: str | os.PathLike[str]) -> dict[str, bytes]:
    file = pathlib.Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise AuthError(f"cannot read key file {str(file)!r}: {err}") from err
    keys: dict[str, bytes] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"key file {str(file)!r}, line {number}"
        if len(parts) != 2:
            raise AuthError(f"{where}: expected `OPERATOR HEXKEY`")
        operator, hexkey = parts
        if not OPERATOR_ID.fullmatch(operator):
            raise AuthError(f"{where}: operator id must be 1-64 characters of [A-Za-z0-9_.:@+-]")
        try:
            key = bytes.fromhex(hexkey)
        except ValueError:
            raise AuthError(f"{where}: the key of {operator!r} is not hexadecimal") from None
        if len(key) < MIN_KEY_BYTES:
            raise AuthError(f"{where}: the key of {operator!r} has {len(key)} bytes; at least {MIN_KEY_BYTES} needed")
        if operator in keys:
            raise AuthError(f"{where}: operator {operator!r} is listed twice")
        keys[operator] = key
    return keys


def read_keys(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """The manager's key file: ``{operator: key}`` of every authorized operator (at least one)."""
    keys = _parse(path)
    if not keys:
        raise AuthError(f"key file {str(path)!r} lists no operator")
    return keys


def read_identity(path: str | os.PathLike[str]) -> tuple[str, bytes]:
    """A client's key file: its one ``(operator, key)``."""
    keys = _parse(path)
    if len(keys) != 1:
        raise AuthError(f"key file {str(path)!r} must hold exactly one `OPERATOR HEXKEY` line; found {len(keys)}")
    return next(iter(keys.items()))


def new_keys(operators: Iterable[str]) -> dict[str, bytes]:
    """A fresh random key (from the OS) for each operator id.

    >>> sorted(new_keys(["alice", "auto:runner"]))
    ['alice', 'auto:runner']
    """
    keys = {}
    for operator in operators:
        if not OPERATOR_ID.fullmatch(operator):
            raise AuthError(f"invalid operator id {operator!r}: 1-64 characters of [A-Za-z0-9_.:@+-]")
        keys[operator] = secrets.token_bytes(KEY_BYTES)
    return keys


def write_keys(path: str | os.PathLike[str], keys: Mapping[str, bytes]) -> pathlib.Path:
    """Write ``keys`` as a key file readable by its owner only (mode 0600); returns the path."""
    file = pathlib.Path(path)
    text = "".join(f"{operator} {key.hex()}\n" for operator, key in keys.items())
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("# evalstop operator keys: OPERATOR HEXKEY (keep secret)\n" + text)
    except OSError as err:
        raise AuthError(f"cannot write key file {str(file)!r}: {err}") from err
    return file


# -- canonical content and MACs ------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """A message field value as JSON can carry it exactly (floats by ``repr``, arrays as lists)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy scalars and arrays (rclpy's array fields)
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "get_fields_and_field_types"):
        return message_fields(value, unsigned=frozenset())
    return repr(value)


def message_fields(msg: Any, *, unsigned: frozenset[str] = UNSIGNED) -> dict[str, Any]:
    """The signed fields of a ROS message (or a mapping): every field but ``unsigned`` ones.

    Duck-typed on rclpy's ``get_fields_and_field_types()``, so this module imports no ROS.

    >>> message_fields({"trial_id": 3, "mac": "ab", "counter": 7, "progress": 0.5})
    {'progress': 0.5, 'trial_id': 3}
    """
    items: Iterable[tuple[str, Any]]
    if isinstance(msg, Mapping):
        items = msg.items()
    else:
        items = [(name, getattr(msg, name)) for name in msg.get_fields_and_field_types()]
    return {name: _plain(value) for name, value in sorted(items) if name not in unsigned}


def canonical(kind: str, session_id: str, operator: str, counter: int, fields: Mapping[str, Any]) -> bytes:
    """The bytes a MAC covers: kind, session id, operator, counter and the fields, as sorted JSON.

    >>> canonical("session_control", "s1", "alice", 5, {"command": 1, "reason": ""})
    b'evalstop-auth-v1\\x00{"counter":5,"fields":{"command":1,"reason":""},"kind":"session_control","operator":"alice","session_id":"s1"}'
    """
    body = {"kind": kind, "session_id": session_id, "operator": operator, "counter": int(counter),
            "fields": {k: _plain(v) for k, v in fields.items()}}
    return _DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def sign(key: bytes, kind: str, session_id: str, operator: str, counter: int, fields: Mapping[str, Any]) -> str:
    """HMAC-SHA256 (hex) of :func:`canonical` under ``key``."""
    return hmac.new(key, canonical(kind, session_id, operator, counter, fields), hashlib.sha256).hexdigest()


def _verify(key: bytes, mac: str, kind: str, session_id: str, operator: str, counter: int,
            fields: Mapping[str, Any]) -> bool:
    return isinstance(mac, str) and hmac.compare_digest(mac.encode("ascii", "replace"),
                                                        sign(key, kind, session_id, operator, counter, fields).encode())


def summary(operator: object, counter: object, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A rejected message in bounded form for the journal: every string cut to 64 characters."""
    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > _SUMMARY_CHARS:
            return f"{value[:_SUMMARY_CHARS]}... ({len(value)} characters)"
        if isinstance(value, (list, dict)):
            return cut(json.dumps(value))
        return value

    return {"operator": cut(_plain(operator)), "counter": cut(_plain(counter)),
            "fields": {str(k)[:_SUMMARY_CHARS]: cut(_plain(v)) for k, v in list(fields.items())[:16]}}


def signed_score_problem(keys: Mapping[str, bytes], session_id: str, trial_id: int, payload: Mapping[str, Any]
                         ) -> str:
    """Why a journaled score event is not what its operator signed ("" if it is; audit side).

    Rebuilds the ``TrialScore`` fields from the event's ``submission``
    (:func:`~.session.score_fields`) and checks the MAC of its ``auth`` entry with ``keys``
    (:func:`read_keys`).
    """
    from .limits import score_fields
    entry, submission = payload.get("auth"), payload.get("submission")
    if not isinstance(entry, Mapping) or not isinstance(submission, Mapping):
        return "it carries no signature"
    operator, counter, mac = entry.get("operator"), entry.get("counter"), entry.get("mac")
    key = keys.get(operator) if isinstance(operator, str) else None
    if key is None or not isinstance(operator, str):
        return f"operator {operator!r} is not in the key file"
    fields = {"trial_id": trial_id, **score_fields(dict(submission))}
    if not (isinstance(counter, int) and isinstance(mac, str)
            and _verify(key, mac, "trial_score", session_id, operator, counter, fields)):
        return f"the journaled score is not what operator {operator!r} signed (counter {counter})"
    return ""


# -- the manager's side --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Check:
    """What :meth:`Gate.check` made of one request.

    ``ok``: authentic and fresh (or authentication is off); ``reason``: why not; ``record``:
    the ``auth`` entry to journal with the event the request causes (``None`` when off).
    """

    ok: bool
    reason: str
    operator: str = ""
    counter: int = 0
    record: dict[str, Any] | None = None


class Gate:
    """The manager's side: the authorized operators' keys; checks requests and signs answers.

    :param keys: ``{operator: key}`` (:func:`read_keys`), or ``None``: authentication off, every
        request is accepted and answers are not signed (the manager warns about it).
    """

    def __init__(self, keys: Mapping[str, bytes] | None) -> None:
        self._keys = dict(keys) if keys is not None else None
        self._lock = threading.Lock()
        #: Requests refused by :meth:`check`, by cause (for the diagnostics).
        self.rejected: dict[str, int] = {"unsigned": 0, "unknown_operator": 0, "bad_mac": 0, "replay": 0}
        self._seen: dict[str, int] = {}  # highest counter accepted per operator since start-up

    @property
    def enabled(self) -> bool:
        """True when requests must be signed."""
        return self._keys is not None

    @property
    def operators(self) -> tuple[str, ...]:
        """The authorized operator ids (empty when authentication is off)."""
        return tuple(sorted(self._keys or ()))

    def check(self, kind: str, session_id: str, msg: Any, *, last_counter: int = 0) -> Check:
        """Is request ``msg`` (``kind`` e.g. ``"trial_score"``) from an authorized operator, and fresh?

        ``msg`` has ``scorer`` (the operator id), ``counter`` and ``mac`` and its other fields
        (:func:`message_fields`); ``last_counter`` is the highest counter of that operator the
        session journaled (the gate also remembers those it accepted since start-up).
        """
        if self._keys is None:
            return Check(True, "")
        operator, counter, mac = getattr(msg, "scorer", ""), getattr(msg, "counter", 0), getattr(msg, "mac", "")
        shown = repr(operator[:_SUMMARY_CHARS]) if isinstance(operator, str) else "?"
        cause, reason = "", ""
        key = self._keys.get(operator) if isinstance(operator, str) else None
        if not mac:
            cause, reason = "unsigned", f"unauthenticated: the {kind} of operator {shown} carries no signature"
        elif key is None:
            cause, reason = "unknown_operator", f"unauthorized: operator {shown} is not in the manager's key file"
        elif not (isinstance(counter, int) and _verify(key, mac, kind, session_id, operator, counter,
                                                       message_fields(msg))):
            cause, reason = "bad_mac", (f"unauthenticated: the signature of operator {shown} does not verify "
                                        f"(wrong key, altered content, or signed for another session than "
                                        f"{session_id!r})")
        else:
            with self._lock:
                last = max(last_counter, self._seen.get(operator, 0))
                if counter <= last:
                    cause, reason = "replay", (f"replayed: counter {counter} of operator {shown} is not above "
                                               f"the last accepted {last}")
                else:
                    self._seen[operator] = counter
        if cause:
            with self._lock:
                self.rejected[cause] += 1
            return Check(False, reason, operator if isinstance(operator, str) else "", 0)
        return Check(True, "", operator, counter, {"kind": kind, "operator": operator, "counter": counter, "mac": mac})

    def sign_answer(self, kind: str, session_id: str, check: Check, answer: Any) -> str:
        """The MAC of ``answer`` (a ROS message or mapping) to the request ``check`` accepted ("" if off)."""
        if self._keys is None or check.record is None:
            return ""
        return sign(self._keys[check.operator], kind, session_id, check.operator, check.counter,
                    message_fields(answer))

    @property
    def rejected_total(self) -> int:
        """All requests refused so far."""
        return sum(self.rejected.values())


# -- a client's side -----------------------------------------------------------------------------
class Signer:
    """A client's side (operator terminal, runner): signs requests, checks the manager's answers.

    :param operator: The operator id of the key file.
    :param key: Its key.
    :param start: First counter; default the wall clock in ns, so a restarted client still
        counts up from what it sent before.
    """

    def __init__(self, operator: str, key: bytes, start: int | None = None) -> None:
        self.operator, self._key = operator, key
        self._counter = time.time_ns() if start is None else int(start)
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Signer:
        """The signer of a client key file (:func:`read_identity`)."""
        return cls(*read_identity(path))

    def next_counter(self) -> int:
        """A counter above every one handed out before (and not below the wall clock)."""
        with self._lock:
            self._counter = max(self._counter + 1, time.time_ns())
            return self._counter

    def sign(self, kind: str, session_id: str, msg: Any) -> None:
        """Set ``msg.scorer``, a fresh ``msg.counter`` and ``msg.mac`` (call again for every send)."""
        msg.scorer = self.operator
        msg.counter = self.next_counter()
        msg.mac = sign(self._key, kind, session_id, self.operator, msg.counter, message_fields(msg))

    def verify_answer(self, kind: str, session_id: str, request: Any, answer: Any) -> bool:
        """True if ``answer`` carries the manager's valid MAC for ``request`` (as last signed)."""
        mac = getattr(answer, "mac", "")
        return bool(mac) and _verify(self._key, mac, kind, session_id, self.operator, int(request.counter),
                                     message_fields(answer))
