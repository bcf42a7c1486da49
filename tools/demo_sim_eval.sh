#!/bin/sh
# The Ray part of `make demo-parallel`: `evalstop sim-eval` of two served scripted physics policies
# on three robosuite Lift tasks (examples/sim_eval.yaml) with 2 Ray workers on this machine, until
# every task is decided; then the audit of its journal (VERIFIED, exit 0) and the HTML report.
# This checkout's code runs (PYTHONPATH), with the venv's packages (ray, robosuite: the physics extra).
#   tools/demo_sim_eval.sh [VENV] [OUT]   (defaults: .venv, build/demo-sim-eval)
set -eu
VENV=${1:-.venv}
OUT=${2:-build/demo-sim-eval}
SESSION=demo-$(date -u +%Y%m%dT%H%M%SZ)
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
export MUJOCO_GL=${MUJOCO_GL:-egl}
"$VENV/bin/evalstop" sim-eval examples/sim_eval.yaml --workers 2 --out "$OUT" --session-id "$SESSION"
"$VENV/bin/evalstop" audit "$OUT/$SESSION.db"
"$VENV/bin/evalstop" report "$OUT/$SESSION.db" -o "$OUT/$SESSION-report"
echo "demo-sim-eval: journal $OUT/$SESSION.db, report $OUT/$SESSION-report/index.html"
