"""openpi's wire format: msgpack with a numpy extension, re-implemented for numpy 2 (docs/policy_runner.md)."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from .errors import Category, RunnerError

__all__ = ["pack", "unpack"]

_ARRAY, _SCALAR = b"__ndarray__", b"__npgeneric__"


def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in "VOc":
        raise RunnerError(f"cannot send numpy dtype {obj.dtype} over the openpi protocol", category=Category.PROTOCOL)
    if isinstance(obj, np.ndarray):
        return {_ARRAY: True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {_SCALAR: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot serialize {type(obj).__name__}")


def _decode(obj: dict[Any, Any]) -> Any:
    if _ARRAY in obj:
        return np.frombuffer(obj[b"data"], dtype=np.dtype(obj[b"dtype"])).reshape(obj[b"shape"])
    if _SCALAR in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def pack(message: Any) -> bytes:
    """One openpi frame's payload.

    >>> unpack(pack({"actions": np.zeros((2, 8), np.float32)}))["actions"].shape
    (2, 8)
    """
    packed: bytes = msgpack.packb(message, default=_encode, use_bin_type=True)
    return packed


def unpack(payload: bytes) -> Any:
    """Decode one openpi frame (arrays come back read-only, as views of the frame).

    >>> unpack(pack({"x": np.float32(1.5), "n": np.arange(3)}))
    {'x': np.float32(1.5), 'n': array([0, 1, 2])}
    """
    try:
        return msgpack.unpackb(payload, object_hook=_decode, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as err:
        raise RunnerError(f"malformed reply from the policy server ({err})", category=Category.PROTOCOL) from err
