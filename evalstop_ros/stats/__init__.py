"""The evalstop statistics core: sequential policy comparison with Type-I guarantees.

Pure numpy/scipy (no ROS imports).  Every sequential test is a vectorised
:class:`~evalstop_ros.stats.sequential.PairedProcess` with a one-sequence ``*_test`` wrapper:

* STEP (seed 003): :func:`step_test`, :class:`StepProcess`, tables and exact characteristics.
* N-SCORE (seed 000, Alg. 1): :func:`nscore_test`, :class:`NScoreProcess`.
* Baselines: WSR (seed 000, Alg. 2), theta-SAVI, Lai's test, batch Barnard/Boschloo/Fisher.
* Families of comparisons (Bonferroni, Holm, compact letter display), multi-task claims
  (seed 003 Eq. 11), AdaStop for batches of seeds (seed 002), and the Monte Carlo engine.

Orientation follows both papers: policy A is the baseline (pi_0), policy B the candidate (pi_1).
"""

from .adastop import DECISIONS, PERMUTATIONS, AdaStop, AdaStopResult, adastop_test
from .batch import BatchTestResult, barnard_test, boschloo_test, fisher_test, success_table
from .errors import StatsInputError
from .families import (
    CORRECTIONS,
    Comparison,
    FamilyProcess,
    FamilyResult,
    bonferroni,
    compact_letter_display,
    comparison_pairs,
    run_family,
    split_alpha,
)
from .holm import DirectionalTests, SequentialHolm, holm
from .lai import LaiProcess, lai_test
from .methods import BATCH_METHODS, SEQUENTIAL_METHODS, VALIDITY
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
    "savi_test",
    "split_alpha",
    "step_test",
    "success_table",
    "synthesize_table",
    "task_alpha",
    "wsr_test",
]
