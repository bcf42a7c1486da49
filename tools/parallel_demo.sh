#!/usr/bin/env bash
# make demo-parallel (the ROS part): two simulated arms serve one session (docs/parallel.md).
# evaluation_manager runs config/parallel_sim.yaml; two sim_robot nodes, in the namespaces arm_1 and
# arm_2, whose successes end sooner than their failures (as with end_on_success); the manager
# dispatches the plan's rounds to both at once and stops when the tests decide. Then the decision,
# the report and `evalstop audit` of the journal (VERIFIED, or this script fails).
# Run inside the ROS environment (tools/ros/env.sh); ROS_DOMAIN_ID as set (default 0), loopback only.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
lib="${EVALSTOP_INSTALL:-$here/build/ros/install}/lib/evalstop"
work="$(mktemp -d /tmp/evalstop-parallel-XXXXXX)"
session="parallel-$(date -u +%Y%m%d-%H%M%S)"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for arm in arm_1 arm_2; do
  "$lib/sim_robot" --ros-args -r "__ns:=/$arm" -p "policies:=[policy_a, policy_b]" \
    -p "success_rates:=[0.5, 0.8]" -p "duration:=0.6" -p "success_duration:=0.15" > "$work/sim_robot_$arm.log" 2>&1 &
  pids+=("$!")
done
echo "evalstop demo-parallel: two arms (sim_robot in /arm_1 and /arm_2), one session; logs in $work"
if ! timeout "${EVALSTOP_DEMO_TIMEOUT:-900}" "$lib/evaluation_manager" --ros-args \
    -p "config_file:=$here/config/parallel_sim.yaml" -p "session_id:=$session" -p "journal_dir:=$work" \
    -p journal_fsync:=false -p exit_on_finish:=true -p exit_linger:=3.0 > "$work/evaluation_manager.log" 2>&1; then
  echo "evalstop demo-parallel: evaluation_manager failed; see $work/evaluation_manager.log" >&2
  tail -20 "$work/evaluation_manager.log" >&2
  exit 1
fi
journal="$work/$session.db"
grep -E "session $session (finished|aborted)|canceled on runner" "$work/evaluation_manager.log" | sed 's/^.*\] //' || true
python - "$journal" <<'PY'
import collections, sys
from evalstop_ros.session import read_journal
events = read_journal(sys.argv[1]).events
runs = collections.Counter(e.payload["runner"] for e in events if e.kind == "trial_dispatched")
late = [e.trial_id for e in events if e.kind == "result_after_stop"]
for e in events:
    if e.kind == "decision":
        p = e.payload
        print(f"decision: {p['policy_a']} vs {p['policy_b']} on {p['metric']} ({p['method']}): {p['decision']} "
              f"after {p['n']} pairs")
print("trials per arm: " + ", ".join(f"{r} {n}" for r, n in sorted(runs.items()))
      + f"; after the stop (journaled, not used): {late or 'none'}")
PY
evalstop report "$journal" -o "$work/report" | tail -3
evalstop audit "$journal" | tail -1 | tee "$work/audit.txt"
grep -q "VERIFIED" "$work/audit.txt"
