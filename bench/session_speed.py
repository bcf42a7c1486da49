#!/usr/bin/env python3
"""Session speed: a long session driven through the session API, per action and in total.

Issue 8 goal: a 10 000-trial session in well under a minute (O(1) amortized work per score).
The driver is what evaluation_manager does per trial (``next_trial``, ``record_runner_result``,
``submit_score``, ``status``) on a real journal (SQLite, fsync off), for two equal policies so
that no test stops (paired design, success by theta-SAVI, progress by N-SCORE, ``n_max`` half
the trials: ``bench/audit_speed.py``'s session).  The baseline is the same driver on the package as of ``--baseline`` (default:
the commit before the engine work), extracted with ``git archive`` and run in a subprocess in
the same run, at the sizes where it finishes in reasonable time.

Run: ``.venv/bin/python bench/session_speed.py [--trials 10000] [--baseline REV]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

from audit_speed import config  # the same 10 000-trial session the audit bench records

REPO = pathlib.Path(__file__).resolve().parents[1]
BASELINE = "bfcdce5"
GOAL_S = 60.0


def drive(trials: int, report_every: int) -> list[tuple[int, float]]:
    """Run ``trials`` trials; (trials done, seconds per trial over the last ``report_every``)."""
    from evalstop_ros.session import EvaluationSession, parse_config

    cfg = parse_config(config(trials))
    out: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        session = EvaluationSession.open(pathlib.Path(tmp) / "s.db", cfg, "bench", durable=False)
        session.start()
        started = time.perf_counter()
        for n in range(1, trials + 1):
            trial = session.next_trial()
            assert trial is not None
            session.record_runner_result(trial.trial_id, True, 1.0)
            success = (trial.trial_id * 7919) % 3 == 0
            session.submit_score(trial.trial_id, trial.token, success, 0.3 + 0.4 * success, "bench")
            session.status()
            if n % report_every == 0:
                now = time.perf_counter()
                out.append((n, (now - started) / report_every))
                started = now
        session.close()
    return out


def measure(trials: int, report_every: int, source: pathlib.Path | None) -> tuple[float, list[tuple[int, float]]]:
    """Wall time and per-action profile of :func:`drive`, in a fresh interpreter on ``source``."""
    code = (f"import json, sys; sys.path.insert(0, {str(source or REPO)!r}); sys.path.insert(1, {str(REPO / 'bench')!r}); "
            f"import session_speed as s, time; t = time.perf_counter(); p = s.drive({trials}, {report_every}); "
            "print(json.dumps([time.perf_counter() - t, p]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=source or REPO)
    total, profile = json.loads(done.stdout.splitlines()[-1])
    return total, [tuple(p) for p in profile]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the baseline (default %(default)s)")
    parser.add_argument("--baseline-trials", type=int, default=4000,
                        help="trials of the baseline run (its cost grows with n^2; default %(default)s)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline, "evalstop_ros"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        print(f"baseline {args.baseline}: {args.baseline_trials} trials ...", flush=True)
        base_total, base_profile = measure(args.baseline_trials, 500, base)
    print(f"ours: {args.trials} trials ...", flush=True)
    ours_total, ours_profile = measure(args.trials, 500, None)
    ours_at = dict(ours_profile)
    print(f"{'trials':>7} {'baseline ms/trial':>18} {'ours ms/trial':>14} {'ratio':>7}")
    for n, seconds in base_profile:
        if n in ours_at:
            print(f"{n:>7} {seconds * 1e3:>18.3f} {ours_at[n] * 1e3:>14.3f} {seconds / ours_at[n]:>7.1f}")
    print(f"baseline: {args.baseline_trials} trials in {base_total:.1f} s")
    verdict = "met" if ours_total < GOAL_S else "MISSED"
    print(f"ours: {args.trials} trials in {ours_total:.1f} s (goal < {GOAL_S:.0f} s: {verdict}); "
          f"last 500 at {ours_profile[-1][1] * 1e3:.3f} ms/trial")
    return 0 if ours_total < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
