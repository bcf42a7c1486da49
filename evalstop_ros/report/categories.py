"""Task categories of A/B instructions, offline, by sentence-model similarity (seed 001 Sec. 3.3, App. E, Fig. 9)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..sentence_model import SentenceModelUnavailable, sentence_model

__all__ = ["CATEGORIES", "CategoryError", "CategoryGuess", "Categorizer"]

#: The 11 categories of seed 001 (Sec. 5.4, App. E) with example instructions of each.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "Pick and Place": ("put the cup in the bowl", "place the carrot on the plate", "put the yellow ducks in the mug",
                       "pick up the marker and put it in the box", "put the apple in the basket",
                       "move the sponge into the sink", "put the toy car on the shelf", "place the fork in the drawer"),
    "Open/Close": ("open the top drawer", "close the cabinet door", "open the lid of the box", "close the laptop",
                   "shut the oven door", "open the jar"),
    "Move/Slide": ("push the bowl to the left", "slide the block across the table", "move the cup next to the plate",
                   "push the box forward", "drag the towel to the edge", "nudge the bottle to the right"),
    "Knock Over/Topple": ("knock over the bottle", "topple the tower of blocks", "tip the cup over",
                          "knock down the can", "push the stack of cups over"),
    "Cover/Drape/Fold": ("fold the towel in half", "cover the bowl with the cloth", "drape the towel over the box",
                         "fold the shirt", "unfold the napkin", "hide the toy under the cloth"),
    "Group/Organize/Stack": ("stack the red block on the blue block", "put all the fruit together",
                             "organize the pens in a row", "stack the cups", "put the blocks in a pile",
                             "line up the bottles", "tidy up the desk"),
    "Find/Search": ("find the creeper toy", "look for the hidden ball", "search the shelf for the keys",
                    "find the blue marker", "locate the red block among the toys", "which cup hides the coin"),
    "Minimal or No Action": ("do absolutely nothing", "do not move", "stay still", "don't do anything",
                             "remain where you are"),
    "Object Manipulation": ("pour the beans into the pot", "flip the cup right side up", "turn the bottle cap",
                            "rotate the block", "pour the water into the bowl", "unscrew the lid",
                            "squeeze the sponge", "turn the knob"),
    "Sorting/Classification": ("sort the blocks by colour", "put the red objects on the left and the blue on the right",
                               "separate the fruit from the vegetables", "sort the toys by shape",
                               "put each marker in the cup of its colour"),
    "Tool Use": ("wipe the table with the sponge", "erase the board with the eraser", "stir the pot with the spoon",
                 "use the marker to hit the robot", "clean the table with the towel", "scoop the beans with the spoon",
                 "use the spatula to flip the pancake", "sweep the crumbs with the brush"),
}


class CategoryError(RuntimeError):
    """The sentence model is not installed or cannot be loaded."""


@dataclasses.dataclass(frozen=True)
class CategoryGuess:
    """The category of one instruction, its cosine similarity, and whether the operator set it."""

    instruction: str
    category: str
    similarity: float
    confirmed: bool


class Categorizer:
    """Nearest-example categories with the bundled all-MiniLM-L6-v2 (loaded on first use)."""

    def __init__(self, categories: Mapping[str, Sequence[str]] = CATEGORIES) -> None:
        self.categories = {name: tuple(examples) for name, examples in categories.items()}
        self._model: Any = None
        self._examples: np.ndarray | None = None
        self._owner: list[str] = [name for name, examples in self.categories.items() for _ in examples]

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            try:
                self._model = sentence_model()
            except SentenceModelUnavailable as err:
                raise CategoryError(f"task categories need the sentence model: {err}; "
                                    "pip install 'evalstop[categories]'") from err
        return np.asarray(self._model.encode(list(texts), normalize_embeddings=True,
                                                 show_progress_bar=False), dtype=np.float64)

    def assign(self, instructions: Sequence[str], overrides: Mapping[str, str] | None = None) -> list[CategoryGuess]:
        """The category of each instruction (``overrides`` first: the operator's confirmed answers)."""
        overrides = dict(overrides or {})
        for instruction, category in overrides.items():
            if category not in self.categories:
                raise CategoryError(f"override of {instruction!r}: unknown category {category!r}; "
                                    f"expected one of {tuple(self.categories)}")
        unique = sorted({text for text in instructions if text not in overrides})
        guesses: dict[str, tuple[str, float]] = {}
        if unique:
            if self._examples is None:
                self._examples = self._encode([e for examples in self.categories.values() for e in examples])
            similarity = self._encode(unique) @ self._examples.T
            for text, row in zip(unique, similarity):
                best = int(np.argmax(row))
                guesses[text] = (self._owner[best], float(row[best]))
        return [
            CategoryGuess(text, overrides[text], 1.0, True) if text in overrides
            else CategoryGuess(text, guesses[text][0], guesses[text][1], False)
            for text in instructions
        ]
