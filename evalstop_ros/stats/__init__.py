"""The evalstop statistics core (numpy/scipy, no ROS): sequential policy comparison with Type-I guarantees.

STEP (seed 003), N-SCORE (seed 000), their baselines, families, multi-task claims, AdaStop
(seed 002) and rankings (seed 001); design notes in docs/statistics.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:  # the real imports, for type checkers; at run time each name loads on first use
    from .adastop import DECISIONS, PERMUTATIONS, AdaStop, AdaStopResult, adastop_test
    from .batch import BatchTestResult, barnard_test, boschloo_test, fisher_test, success_table
    from .errors import StatsInputError
    from .families import (
        CORRECTIONS,
        Comparison,
        FamilyProcess,
        FamilyResult,
        comparison_pairs,
        run_family,
    )
    from .holm import DirectionalTests, SequentialHolm, holm
    from .lai import LaiProcess, lai_test
    from .letters import compact_letter_display
    from .levels import bonferroni, split_alpha
    from .methods import BATCH_METHODS, SEQUENTIAL_METHODS, VALIDITY
    from .mixture import MixtureProcess, mixture_test
    from .multitask import CLAIMS, TASK_CORRECTIONS, MultiTaskResult, combine_tasks, run_multitask, task_alpha
    from .nscore import NScoreProcess, nscore_test
    from .registry import METHODS, Method, make_process, run_test
    from .savi import SaviProcess, savi_test
    from .sequential import BatchOutcome, Decision, PairedProcess, SequentialResult, run_batch, run_sequence
    from .simulate import ScoreModel, SimulationSummary, bernoulli, continuous_beta, monte_carlo, partial_credit
    from .step import (
        StepOC,
        StepProcess,
        StepTable,
        Type1Report,
        check_type1,
        load_table,
        operating_characteristics,
        step_test,
        synthesize_table,
    )
    from .wsr import WsrProcess, wsr_test

#: Public name -> submodule that defines it.  Importing the package (e.g. for
#: ``stats.errors``) loads nothing else: ``evalstop --help`` must not pay for scipy (PEP 562).
_EXPORTS: dict[str, str] = {
    "DECISIONS": "adastop",
    "PERMUTATIONS": "adastop",
    "AdaStop": "adastop",
    "AdaStopResult": "adastop",
    "adastop_test": "adastop",
    "BatchTestResult": "batch",
    "barnard_test": "batch",
    "boschloo_test": "batch",
    "fisher_test": "batch",
    "success_table": "batch",
    "StatsInputError": "errors",
    "CORRECTIONS": "families",
    "Comparison": "families",
    "FamilyProcess": "families",
    "FamilyResult": "families",
    "bonferroni": "levels",
    "compact_letter_display": "letters",
    "comparison_pairs": "families",
    "run_family": "families",
    "split_alpha": "levels",
    "DirectionalTests": "holm",
    "SequentialHolm": "holm",
    "holm": "holm",
    "LaiProcess": "lai",
    "lai_test": "lai",
    "BATCH_METHODS": "methods",
    "SEQUENTIAL_METHODS": "methods",
    "VALIDITY": "methods",
    "MixtureProcess": "mixture",
    "mixture_test": "mixture",
    "CLAIMS": "multitask",
    "TASK_CORRECTIONS": "multitask",
    "MultiTaskResult": "multitask",
    "combine_tasks": "multitask",
    "run_multitask": "multitask",
    "task_alpha": "multitask",
    "NScoreProcess": "nscore",
    "nscore_test": "nscore",
    "METHODS": "registry",
    "Method": "registry",
    "make_process": "registry",
    "run_test": "registry",
    "SaviProcess": "savi",
    "savi_test": "savi",
    "BatchOutcome": "sequential",
    "Decision": "sequential",
    "PairedProcess": "sequential",
    "SequentialResult": "sequential",
    "run_batch": "sequential",
    "run_sequence": "sequential",
    "ScoreModel": "simulate",
    "SimulationSummary": "simulate",
    "bernoulli": "simulate",
    "continuous_beta": "simulate",
    "monte_carlo": "simulate",
    "partial_credit": "simulate",
    "StepOC": "step",
    "StepProcess": "step",
    "StepTable": "step",
    "Type1Report": "step",
    "check_type1": "step",
    "load_table": "step",
    "operating_characteristics": "step",
    "step_test": "step",
    "synthesize_table": "step",
    "WsrProcess": "wsr",
    "wsr_test": "wsr",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "BATCH_METHODS",
    "CLAIMS",
    "CORRECTIONS",
    "DECISIONS",
    "METHODS",
    "PERMUTATIONS",
    "SEQUENTIAL_METHODS",
    "TASK_CORRECTIONS",
    "VALIDITY",
    "AdaStop",
    "AdaStopResult",
    "BatchOutcome",
    "BatchTestResult",
    "Comparison",
    "Decision",
    "FamilyProcess",
    "FamilyResult",
    "LaiProcess",
    "Method",
    "MultiTaskResult",
    "NScoreProcess",
    "PairedProcess",
    "MixtureProcess",
    "SaviProcess",
    "ScoreModel",
    "SequentialResult",
    "SimulationSummary",
    "StatsInputError",
    "StepOC",
    "StepProcess",
    "StepTable",
    "Type1Report",
    "WsrProcess",
    "adastop_test",
    "barnard_test",
    "bernoulli",
    "bonferroni",
    "boschloo_test",
    "check_type1",
    "combine_tasks",
    "compact_letter_display",
    "comparison_pairs",
    "continuous_beta",
    "fisher_test",
    "holm",
    "SequentialHolm",
    "DirectionalTests",
    "lai_test",
    "load_table",
    "make_process",
    "monte_carlo",
    "nscore_test",
    "operating_characteristics",
    "partial_credit",
    "run_batch",
    "run_family",
    "run_multitask",
    "run_sequence",
    "run_test",
    "mixture_test",
    "savi_test",
    "split_alpha",
    "step_test",
    "success_table",
    "synthesize_table",
    "task_alpha",
    "wsr_test",
]
