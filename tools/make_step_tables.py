#!/usr/bin/env python3
"""Regenerate the STEP tables shipped in ``evalstop_ros/stats/step_tables/`` (maintainers only).

One-sided levels 0.05 and 0.01 (the paper's), and their halves 0.025 and 0.005, which two-sided
tests at 0.05 and 0.01 use (see :func:`evalstop_ros.stats.step.table_alpha`).
Run: ``.venv/bin/python tools/make_step_tables.py``  (about 3 minutes on 2 cores).
"""

import time

from evalstop_ros.stats.step_table import SHIPPED_DIR, synthesize_table

N_MAX = (50, 100, 200, 500)
ALPHAS = (0.05, 0.025, 0.01, 0.005)

if __name__ == "__main__":
    for alpha in ALPHAS:
        for n_max in N_MAX:
            start = time.perf_counter()
            path = synthesize_table(n_max, alpha).save(SHIPPED_DIR)
            print(f"{path.name}: {time.perf_counter() - start:.1f} s", flush=True)
