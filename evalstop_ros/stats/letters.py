"""The compact letter display (CLD) of a family of pairwise decisions (Piepho 2004).

Policies that share a letter were not found different; policies with no letter in common were
(seed 000 §VI-B, Fig. 2 shows such a family's outcome; :mod:`.families` runs the family).
"""

from __future__ import annotations

import string
from collections.abc import Collection, Hashable, Sequence

import numpy as np

from .errors import StatsInputError
from .validation import check_policies

__all__ = ["LETTERS", "compact_letter_display"]

#: Letters of a compact letter display, in order of use.
LETTERS = string.ascii_lowercase + string.ascii_uppercase


def _check_differs(names: tuple[str, ...], differs: Collection[Collection[Hashable]]) -> set[frozenset[str]]:
    known = set(names)
    pairs: set[frozenset[str]] = set()
    for pair in differs:
        members = frozenset(pair) if isinstance(pair, Collection) and not isinstance(pair, str) else frozenset()
        if len(members) != 2 or not members <= known:
            raise StatsInputError(f"`differs` must hold pairs of two distinct known policies; found {pair!r}")
        pairs.add(members)  # type: ignore[arg-type]
    return pairs


def compact_letter_display(
    policies: Sequence[str],
    means: Sequence[float],
    differs: Collection[Collection[str]],
    *,
    sweep: bool = True,
) -> dict[str, str]:
    """Compact letter display (CLD) of a family of pairwise decisions.

    Policies that share a letter were not found different; policies with no letter in common
    were.  Letters are ordered by mean: the best policy carries ``a``.

    Parameters
    ----------
    policies : sequence of str
        Distinct policy names.
    means : sequence of float
        Empirical mean score of each policy, aligned with ``policies``.
    differs : collection of pairs
        The pairs found different (e.g. ``{frozenset({"pi0", "pi2"})}``), whatever the
        direction.
    sweep : bool, optional
        Apply Piepho's sweeping step, which drops letters that no pair needs, so a policy does
        not carry more letters than necessary.  Without it the columns are all maximal sets of
        mutually non-different policies.

    Returns
    -------
    dict of str to str
        Letters per policy, in the order of decreasing mean (ties keep the input order).

    Notes
    -----
    Insert-and-absorb [1]_ (seed 000 §VI-B, Fig. 2): start from one column
    (letter) holding every policy; for each different pair, split every column that holds both
    into a copy without the one and a copy without the other, and absorb any column contained in
    another.  The result is the set of maximal groups of mutually non-different policies, which
    does not depend on the order of the pairs.  Sweeping [1]_ then visits the columns in letter
    order and removes a policy from a column when every other policy of that column shares another
    letter with it, deleting columns that become empty.  Columns are lettered in the order of
    their best-ranked member (then the next, and so on), ranks being by decreasing mean.

    References
    ----------
    .. [1] Piepho, H.-P. "An Algorithm for a Letter-Based Representation of All-Pairwise
           Comparisons". *Journal of Computational and Graphical Statistics* 13(2), 456-466, 2004.

    Examples
    --------
    >>> compact_letter_display(["A", "B", "C"], [0.5, 0.8, 0.2], {frozenset({"B", "C"})})
    {'B': 'a', 'A': 'ab', 'C': 'b'}
    """
    names = check_policies(policies)
    values = np.asarray(means, dtype=np.float64)
    if values.shape != (len(names),):
        raise StatsInputError(
            f"`means` must hold one value per policy ({len(names)}); found shape {values.shape}"
        )
    if not np.isfinite(values).all():
        index = int(np.argmax(~np.isfinite(values)))
        raise StatsInputError(f"`means` must be finite; found {float(values[index])!r} for policy {names[index]!r}")
    pairs = _check_differs(names, differs)

    ranked = [names[i] for i in np.argsort(-values, kind="stable")]
    rank = {name: r for r, name in enumerate(ranked)}
    # Columns are sets of ranks; insert-and-absorb (Piepho 2004, Sec. 3).
    columns: list[frozenset[int]] = [frozenset(range(len(ranked)))]
    for pair in sorted(pairs, key=lambda p: sorted(rank[n] for n in p)):
        i, j = sorted(rank[n] for n in pair)
        split: list[frozenset[int]] = []
        for column in columns:
            split.extend((column - {i}, column - {j}) if i in column and j in column else (column,))
        columns = [c for c in split if not any(c < other for other in split)]
        columns = list(dict.fromkeys(columns))  # identical copies absorb each other
    columns.sort(key=sorted)
    if sweep:
        columns = _sweep(columns)
    if len(columns) > len(LETTERS):
        raise StatsInputError(f"the display needs {len(columns)} letters; at most {len(LETTERS)} are available")
    return {
        name: "".join(LETTERS[k] for k, column in enumerate(columns) if rank[name] in column)
        for name in ranked
    }


def _sweep(columns: list[frozenset[int]]) -> list[frozenset[int]]:
    """Piepho's (2004) sweeping step: drop letters that connect no pair on their own."""
    swept = [set(column) for column in columns]
    for k, column in enumerate(swept):
        for member in sorted(column):
            others = [c for i, c in enumerate(swept) if i != k and member in c]
            if not others:
                continue  # the member's only letter
            if all(any(partner in c for c in others) for partner in column - {member}):
                column.discard(member)
    return sorted((frozenset(c) for c in swept if c), key=sorted)
