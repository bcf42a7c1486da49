#!/usr/bin/env python3
"""Score -> status latency and sustained score throughput of evaluation_manager over DDS.

Starts ``sim_robot`` (no automatic scores) and ``evaluation_manager`` (operator scoring) from
the colcon install as processes and plays the operator from this process:

1. **Latency**: for each of ``--trials`` trials, wait until the trial has run, publish its
   ``TrialScore`` and time (a) the ``ScoreAck`` and (b) the first ``SessionStatus`` that
   counts the score. Reports p50/p99/max in ms.
2. **Throughput**: publish ``--burst`` scores back to back (re-sends of the last recorded
   score: each is checked, journaled as a duplicate and acknowledged, like any score) and
   count the acks: scores/s from the first send to the last ack, and how many were lost.

Both with the journal fsynced on every append (the manager's default, ``--no-fsync`` to
compare), on an idle machine and under load (``--load`` CPU-bound processes, one per core by
default: a shared CI machine; started in a session of their own, as another user's or CI job's
are, and in this benchmark's session, see :data:`LOAD_SESSIONS`; then both again with the
manager and this operator under ``SCHED_FIFO`` priority ``--priority``, the manager's
``thread_priority`` parameter), for this tree and for the manager as of ``--baseline`` (its
``evalstop_ros`` extracted with ``git archive`` and put first on the manager's PYTHONPATH;
``chrt -f`` gives it the priority), all in the same run. Run inside the ROS environment (``make bench`` does)::

    . tools/ros/env.sh .venv build/ros/install && python bench/latency.py --trials 200 --burst 2000

Prints a table and, with ``--json``, one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
LIB = REPO / "build" / "ros" / "install" / "lib" / "evalstop"


def _config(path: pathlib.Path, trials: int) -> pathlib.Path:
    # Equal policies and a large budget: the session never stops during the benchmark.
    path.write_text(yaml.safe_dump({
        "policies": ["policy_a", "policy_b"],
        "tasks": [{"id": "t", "initial_conditions": [{"id": "c", "reset_instructions": "reset"}]}],
        "metrics": [{"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}],
        "n_max": trials + 10, "seed": 1, "scoring": "operator",
    }))
    return path


def _percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1e3
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
            "n": int(ms.size)}


BASELINE = "bfcdce5"  # the manager before issue 8


def run(args: argparse.Namespace, *, source: pathlib.Path | None = None, priority: int = 0) -> dict[str, Any]:
    """One measurement; ``priority`` > 0 runs the manager and this operator under SCHED_FIFO
    (ours: its ``thread_priority`` parameter; the baseline, which has none: ``chrt -f``)."""
    import rclpy
    from evalstop.msg import ScoreAck, SessionStatus, TrialRequest, TrialScore
    from rclpy.executors import SingleThreadedExecutor

    from evalstop_ros import qos
    from evalstop_ros.nodes.realtime import schedule_all_threads, set_thread_priority

    work = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-bench-"))
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_LOG_DIR": str(work / "roslog"),
           "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))}
    os.environ.update(env)
    config = _config(work / "bench.yaml", args.trials)
    procs = [
        subprocess.Popen([str(LIB / "sim_robot"), "--ros-args", "-p", "auto_score:=false", "-p", "duration:=0.0"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([*(["chrt", "-f", str(priority)] if priority and source else []),
                          str(LIB / "evaluation_manager"), "--ros-args", "-p", f"config_file:={config}",
                          "-p", "session_id:=bench", "-p", f"journal_dir:={work}",
                          "-p", f"journal_fsync:={'true' if args.fsync else 'false'}",
                          *(["-p", f"thread_priority:={priority}"] if priority and not source else [])],
                         env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [
                             str(source or ""), env.get("PYTHONPATH", "")]))},
                         stdout=(work / "manager.log").open("wb"), stderr=subprocess.STDOUT),
    ]
    try:
        with rclpy.init(args=[]):
            node = rclpy.create_node("latency_bench")
            requests: list[Any] = []
            acks: list[tuple[float, Any]] = []
            statuses: list[tuple[float, Any]] = []
            node.create_subscription(TrialRequest, "trial_request", requests.append, qos.TRIAL_REQUEST_QOS)
            node.create_subscription(ScoreAck, "score_ack", lambda m: acks.append((time.perf_counter(), m)),
                                     qos.SCORE_ACK_QOS)
            node.create_subscription(SessionStatus, "session_status",
                                     lambda m: statuses.append((time.perf_counter(), m)), qos.STATUS_QOS)
            scores = node.create_publisher(TrialScore, "trial_score", qos.SCORE_QOS)
            # one executor for the whole run (rclpy.spin_once adds and removes the node each call)
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            problem = set_thread_priority(priority)  # the operator's end, as teleop_scorer's thread_priority
            if problem:
                raise SystemExit(f"latency.py: {problem}")

            def spin_until(predicate: Any, timeout: float = 30.0) -> None:
                deadline = time.monotonic() + timeout
                while not predicate():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"benchmark stalled; see {work / 'manager.log'}")
                    executor.spin_once(timeout_sec=0.01)

            ack_latency, status_latency = [], []
            for trial in range(1, args.trials + 1):
                # the status and the request of a trial are separate topics: wait for both
                spin_until(lambda t=trial: statuses and statuses[-1][1].pending_trial_id == t
                           and statuses[-1][1].state_name == "running:awaiting_score"
                           and any(r.trial_id == t for r in requests))
                request = next(r for r in reversed(requests) if r.trial_id == trial)
                seen_acks, seen_status = len(acks), len(statuses)
                msg = TrialScore(trial_id=trial, token=request.token, success=bool(trial % 2), progress=0.5,
                                 scorer="bench")
                start = time.perf_counter()
                scores.publish(msg)
                spin_until(lambda: len(acks) > seen_acks and any(s.trials_done >= trial for _, s in statuses[seen_status:]))
                ack_latency.append(acks[seen_acks][0] - start)
                status_latency.append(next(t for t, s in statuses[seen_status:] if s.trials_done >= trial) - start)
                assert acks[seen_acks][1].accepted, acks[seen_acks][1].reason

            # burst: re-send the last recorded score as fast as possible
            seen = len(acks)
            start = time.perf_counter()
            for _ in range(args.burst):
                scores.publish(msg)
                executor.spin_once(timeout_sec=0)
            try:
                spin_until(lambda: len(acks) - seen >= args.burst, timeout=max(30.0, args.burst / 50))
            except TimeoutError:
                pass
            received = acks[seen:]
            elapsed = (received[-1][0] - start) if received else float("nan")
            executor.shutdown()
            node.destroy_node()
    finally:
        schedule_all_threads(os.SCHED_OTHER, 0)  # back to normal scheduling for the next run
        for proc in procs:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:  # a stalled node must not outlive the benchmark
                proc.kill()
                proc.wait()
    return {
        "fsync": args.fsync,
        "score_to_ack": _percentiles(ack_latency),
        "score_to_status": _percentiles(status_latency),
        "burst": {"sent": args.burst, "acked": len(received), "lost": args.burst - len(received),
                  "duplicates": sum(1 for _, a in received if a.duplicate),
                  "scores_per_s": len(received) / elapsed if received else 0.0},
    }


#: Where the loaded runs' CPU-bound processes run: in a session of their own, as another job on a
#: shared machine does (the kernel's autogroup then shares the CPU between the two sessions
#: first), or in the benchmark's own session (the CPU is shared between all processes alike).
LOAD_SESSIONS = {"another session": True, "this session": False}


def _measure(args: argparse.Namespace, source: pathlib.Path | None, load: int, own_session: bool,
             priority: int) -> dict[str, Any]:
    """:func:`run` with ``load`` CPU-bound processes running beside it."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=own_session)
               for _ in range(load)]
    try:
        return run(args, source=source, priority=priority)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="latency samples (default %(default)s)")
    parser.add_argument("--burst", type=int, default=1000, help="scores in the throughput burst (default %(default)s)")
    parser.add_argument("--no-fsync", dest="fsync", action="store_false", help="journal without fsync")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="CPU-bound processes of the loaded runs (default: one per core, %(default)s)")
    parser.add_argument("--priority", type=int, default=10,
                        help="SCHED_FIFO priority of the manager and the operator in the real-time runs (default "
                             "%(default)s; needs CAP_SYS_NICE or an rtprio limit; 0: no such runs)")
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the baseline (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not (LIB / "evaluation_manager").exists():
        print(f"latency.py: {LIB} not built: run `make ros` (or `make test`)", file=sys.stderr)
        return 2
    if args.priority and subprocess.run(["chrt", "-f", str(args.priority), "true"], capture_output=True).returncode:
        print(f"latency.py: no permission for SCHED_FIFO priority {args.priority} (CAP_SYS_NICE or an rtprio limit): "
              "the thread_priority runs are left out", file=sys.stderr)
        args.priority = 0
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline, "evalstop_ros"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for name, source in ((f"baseline {args.baseline}", pathlib.Path(tmp)), ("ours", None)):
            runs = [("idle", 0, False, 0)]
            for priority in dict.fromkeys((0, args.priority)):
                rt = f", thread_priority {priority}" if priority else ""
                runs += [(f"{args.load} CPU-bound processes in {where}{rt}", args.load, own, priority)
                         for where, own in LOAD_SESSIONS.items()]
            for condition, load, own_session, priority in runs:
                label = f"{name}, {condition}"
                print(f"... {label}", file=sys.stderr, flush=True)
                results[label] = _measure(args, source, load, own_session, priority)
    if args.json:
        print(json.dumps(results, sort_keys=True))
        return 0
    print(f"evaluation_manager over DDS (loopback), journal fsync {'on' if args.fsync else 'off'}")
    for label, result in results.items():
        print(f"{label}:")
        for name in ("score_to_ack", "score_to_status"):
            r = result[name]
            print(f"  {name:<16} p50 {r['p50_ms']:6.2f} ms   p99 {r['p99_ms']:6.2f} ms   max {r['max_ms']:6.2f} ms"
                  f"   ({r['n']} scores)")
        b = result["burst"]
        print(f"  burst            {b['sent']} scores sent, {b['acked']} acked ({b['lost']} lost), "
              f"{b['scores_per_s']:.0f} scores/s sustained")
    for condition in dict.fromkeys(label.split(", ", 1)[1] for label in results if "CPU-bound" in label):
        loaded = {name: results[f"{name}, {condition}"]["score_to_status"]["p99_ms"]
                  for name in (f"baseline {args.baseline}", "ours")}
        print(f"score -> status p99, {condition}: ours {loaded['ours']:.2f} ms, baseline "
              f"{loaded[f'baseline {args.baseline}']:.2f} ms (goal < 10 ms: {'met' if loaded['ours'] < 10 else 'MISSED'})")
    return 0 if all(r["burst"]["lost"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
