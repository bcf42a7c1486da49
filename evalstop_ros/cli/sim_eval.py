"""``evalstop sim-eval``: an evaluation session of served policies on robosuite tasks, rollouts on Ray workers.

A thin layer over :func:`evalstop_ros.parallel.sim_eval.run_sim_eval`; Ray, robosuite and the
session are imported only when the verb runs (``--help`` loads none of them).
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys

from ._common import CliError, bounded_int, print_json

DESCRIPTION = """\
Run the evaluation session of CONFIG (a session configuration with a `simulation` section:
robosuite task per session task, policy server per policy; docs/sim_eval.md) with its rollouts
on Ray workers: on this machine by default (ray.init with one CPU per worker), on a cluster
with --address. The session's own tests decide when each task stops and the multi-task claim;
its journal (OUT/SESSION.db) is audited and reported like a robot session's:
`evalstop audit OUT/SESSION.db`, `evalstop report OUT/SESSION.db`. A worker that dies is a
runner fault: the trial runs again on another worker. One progress line per rollout on stderr."""
EPILOG = """\
example (--check: validate the configuration and print the plan, start nothing):
  evalstop sim-eval examples/sim_eval.yaml --check

a run: evalstop sim-eval examples/sim_eval.yaml --workers 2 --out sim_eval_out

exit status: 0 the session finished (every test decided or out of budget), 1 it was aborted
(the fault limit: rollouts kept failing), 2 usage, configuration or Ray start-up error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``evalstop sim-eval``."""
    parser.add_argument("config", metavar="CONFIG", help="session configuration with a `simulation` section (YAML)")
    parser.add_argument("--workers", type=bounded_int(1, 1024), default=2,
                        help="rollout workers (Ray actors, one CPU each) (default %(default)s)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (e.g. ray://head:10001); default: Ray on this machine")
    parser.add_argument("--out", default="sim_eval", help="directory of the journal and error log (default %(default)s)")
    parser.add_argument("--session-id", default=None, help="session id (default: sim-<UTC time>)")
    parser.add_argument("--serve-host", default="127.0.0.1",
                        help="address the scripted policies are served on; on a cluster, one the workers reach "
                             "(default %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="validate CONFIG and print what would run (tasks, policies, budgets); start nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")


def run(args: argparse.Namespace) -> int:
    """Run ``evalstop sim-eval``."""
    from ..parallel.errors import ParallelError
    from ..parallel.ray_pool import RayPool
    from ..parallel.sim_config import load_sim_eval
    from ..parallel.sim_eval import fixed_n_rollouts, run_sim_eval, served_policies
    from ..runner.errors import ErrorLog
    from ..session.errors import SessionError
    from ..session.values import SessionState

    try:
        config, simulation = load_sim_eval(args.config, workers=args.workers)
    except SessionError as err:
        raise CliError(str(err)) from err
    if args.check:
        print(f"{args.config}: valid; {len(config.policies)} policies, {len(config.tasks)} tasks, claim "
              f"{config.claim!r}, n_max {config.n_max}: at most {fixed_n_rollouts(config)} rollouts (the fixed-N batch)")
        for task in config.tasks:
            sim = simulation.tasks[task.id]
            print(f"  task {task.id}: robosuite {sim.env}, spread {sim.spread:g} m, {sim.max_steps} actions at "
                  f"{simulation.rate:g} Hz ({sim.max_steps / simulation.rate:g} s simulated)")
        return 0
    session_id = args.session_id or "sim-" + datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = pathlib.Path(args.out)
    journal = out / f"{session_id}.db"
    if journal.exists():
        raise CliError(f"{journal} exists: choose another --session-id or --out")
    out.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    say(f"sim-eval {session_id}: starting Ray with {args.workers} workers"
        + (f" at {args.address}" if args.address else " on this machine"))
    try:
        with served_policies(simulation, host=args.serve_host) as addresses, \
                RayPool(args.workers, address=args.address) as pool:
            result = run_sim_eval(config, simulation, pool, journal_path=journal, session_id=session_id,
                                  addresses=addresses, error_log=ErrorLog(out / "errors"), progress=say)
    except (ParallelError, SessionError, ValueError) as err:
        raise CliError(str(err)) from err
    payload = {
        "session_id": result.session_id, "journal": str(result.journal), "state": result.state.value,
        "rollouts": result.rollouts, "faults": result.faults, "per_task": result.per_task,
        "fixed_n_rollouts": result.fixed_n, "wall_s": round(result.wall_s, 3), "rollout_s": round(result.rollout_s, 3),
        "workers": args.workers, "after_stop": result.after_stop, "cancelled": result.cancelled,
        "comparisons": [c.to_dict() for c in result.comparisons],
        "claims": [{"policy_a": c.policy_a, "policy_b": c.policy_b, "metric": c.metric, "claim": c.claim,
                    "established": c.established, "final": c.final, "n": c.n,
                    "task_claims": [t.name for t in c.task_claims]} for c in result.claims],
    }
    if args.json:
        print_json(payload)
    else:
        print(f"session {result.session_id}: {result.state.value} after {result.rollouts} rollouts "
              f"({result.faults} failed and run again) in {result.wall_s:.0f} s with {args.workers} workers; "
              f"the fixed-N batch runs {result.fixed_n}")
        for name, count in sorted(result.per_task.items()):
            print(f"  task {name}: {count} rollouts")
        for c in result.comparisons:
            print(f"  {c.metric} {c.policy_a} vs {c.policy_b}" + (f" on {c.task}" if c.task else "")
                  + f": {c.decision.name} after {c.n} pairs")
        for claim in result.claims:
            print(f"  claim '{claim.claim}' {claim.metric} {claim.policy_a} vs {claim.policy_b}: "
                  f"{'established' if claim.established else 'not established'} over {claim.n} pairs")
        print(f"journal: {result.journal} (evalstop audit {result.journal}; evalstop report {result.journal})")
    return 0 if result.state == SessionState.FINISHED else 1
