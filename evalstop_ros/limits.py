"""Size limits of every user-given number (session configs, CLI options): one table, no imports."""

from __future__ import annotations

#: Largest trial budget ``n_max`` (a comparison's horizon).
N_MAX_LIMIT = 100_000
#: Largest STEP horizon: STEP's tables take O(n_max^2) memory and minutes already at 500.
STEP_N_MAX_LIMIT = 5_000
#: Largest number of N-SCORE bins ``K`` (seed 000 uses 2 and 21).
BINS_LIMIT = 10_000
#: Largest seed (numpy's generators take any non-negative integer; 64 bits is plenty).
SEED_LIMIT = 2**64 - 1
#: AdaStop (seed 002): scores per agent per interim, interims, permutation paths (10^4 in the paper).
INTERIM_SIZE_LIMIT = 10_000
INTERIMS_LIMIT = 1_000
PERMUTATIONS_LIMIT = 100_000
#: Tasks of a session, initial conditions of a task.
TASKS_LIMIT = 1_000
CONDITIONS_LIMIT = 1_000
#: Characters of a free text shown to the operator (task description, reset instructions).
TEXT_LIMIT = 4_000
#: Longest runner timeout of one trial (s): a day.
TIMEOUT_LIMIT_S = 86_400.0
#: Simulated sequences (``evalstop simulate --reps``) and sequences per chunk.
REPS_LIMIT = 10_000_000
#: Bootstrap resamples, EM buckets, grid points and similar counts of the CLI.
COUNT_LIMIT = 1_000_000
