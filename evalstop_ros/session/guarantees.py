"""What each method's error guarantee is, worded as it holds, for the report, its figures and the CLI's footers.

One wording per method (:data:`~evalstop_ros.stats.methods.VALIDITY` is the short form).
"""

from __future__ import annotations

from ..stats.methods import FACTS
from .config import SessionConfig

__all__ = ["ANYTIME_METHODS", "family_statement", "method_guarantee", "short_guarantee"]

#: Methods whose p-values are anytime-valid (read after every pair, any stopping time).
ANYTIME_METHODS = frozenset(name for name, facts in FACTS.items() if facts.validity == "anytime-valid")


def short_guarantee(method: str, n_max: int | None = None) -> str:
    """A few words for a figure title or a table, e.g. ``valid at its planned looks up to N_max = 100``.

    >>> short_guarantee("step", 100), short_guarantee("nscore")
    ('valid at its planned looks up to N_max = 100, no anytime p-value', 'anytime-valid')
    """
    horizon = f"N_max = {n_max}" if n_max else "N_max"
    return {
        "step": f"valid at its planned looks up to {horizon}, no anytime p-value",
        "lai": f"approximately valid up to {horizon} (calibrated)",
        "adastop": "group-sequential: valid at its interims, no p-value",
    }.get(method, "anytime-valid" if method in ANYTIME_METHODS else FACTS[method].validity if method in FACTS
          else "unknown method")


def method_guarantee(method: str, *, n_max: int | None = None, interims: tuple[int, int] | None = None) -> str:
    """One sentence on ``method``'s guarantee; ``interims`` is AdaStop's ``(N, K)``.

    >>> method_guarantee("nscore").split(":")[:2]
    ['nscore', " anytime-valid (Ville's inequality)"]
    """
    horizon = f"N_max = {n_max}" if n_max else "N_max"
    if method == "step":
        return (f"STEP: exact level at each of its planned looks, pair 1 to {horizon}, for the first stop (seed 003); "
                f"it defines no anytime p-value, and a decision after {horizon} is not covered")
    if method == "lai":
        return f"Lai's boundary: approximately valid up to {horizon} (its constant calibrated by Monte Carlo)"
    if method == "adastop":
        where = f"its {interims[1]} interims of {interims[0]} trials per agent" if interims else "its interims"
        return (f"AdaStop: group-sequential, family-wise at {where}, fixed before the data (seed 002); decisions "
                "only at an interim, no p-value")
    if method in ANYTIME_METHODS:
        return (f"{method}: anytime-valid (Ville's inequality): its p-value may be read after every pair and the "
                "session stopped at any time, with no budget")
    return f"{method}: {FACTS[method].validity}" if method in FACTS else f"{method}: unknown method"


def family_statement(config: SessionConfig, tests: int) -> str:
    """What the session's error guarantee is, in one paragraph, method by method.

    >>> from evalstop_ros.session import parse_config
    >>> c = parse_config({"policies": ["a", "b", "c"], "seed": 1, "tasks": [{"id": "t", "initial_conditions":
    ...     [{"id": "c", "reset_instructions": "r"}]}], "metrics": [{"name": "success"}]})
    >>> family_statement(c, 3).split(":")[0]
    'Family-wise error at most 0.05 over all 3 tests'
    """
    head = f"Family-wise error at most {config.alpha:g} over all {tests} tests"
    if config.design == "adastop" and config.adastop is not None:
        design = config.adastop
        return (f"{head}: the probability that any comparison declares a difference that does not exist is at "
                f"most {config.alpha:g}. "
                f"{method_guarantee('adastop', interims=(design.n_per_interim, design.n_interims))}.")
    how = ("sequential Holm over the comparisons of each metric (seed 003 Sec. V)" if config.correction == "holm"
           else "Bonferroni over the comparisons of each metric")
    metrics = "; ".join(f"{m.name} ({m.method}) at {m.alpha:g}" for m in config.metrics)
    tasks = "" if config.claim == "pooled" else (
        f"; claim '{config.claim}': one test per task, the comparison's level shared among the tasks by "
        f"{config.task_correction} (seed 003 Eq. 11)")
    methods = list(dict.fromkeys(m.method for m in config.metrics))
    each = " ".join(f"{method_guarantee(m, n_max=config.n_max)}." for m in methods)
    if all(m in ANYTIME_METHODS for m in methods):
        when = "at any time the session could have stopped"
    else:
        when = "at every look the session's design allows"
    return (f"{head}: the probability that any of them claims a difference that does not exist, {when}, is at "
            f"most {config.alpha:g} (metrics: {metrics}; {how}{tasks}). {each}")
