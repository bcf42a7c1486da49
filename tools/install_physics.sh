#!/bin/sh
# Install the physics extra into a venv: robosuite 1.5.2 (Franka Panda, table-top tasks) with
# MuJoCo < 3.4 (tools/physics/requirements.txt; robosuite --no-deps, see there why), and the
# Debian packages MuJoCo needs to render offscreen through EGL without a display (Mesa's EGL and
# its software rasteriser). Idempotent (a stamp in the venv); used by `make demo-physics` and
# `make test`. pip then warns that robosuite's declared mink, qpsolvers, pynput, pytest and
# opencv-python are missing: on purpose (see requirements.txt). Checked in a fresh python3.11 venv.
#   tools/install_physics.sh [VENV]   (default: .venv)
set -eu
VENV=${1:-.venv}
HERE=$(dirname "$0")
REQ="$HERE/physics/requirements.txt"
STAMP="$VENV/.evalstop-physics-installed"
if [ -f "$STAMP" ] && [ ! "$REQ" -nt "$STAMP" ] && [ ! "$0" -nt "$STAMP" ]; then
  exit 0
fi
missing=""
for pkg in libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "install_physics: apt-get install$missing (EGL offscreen rendering)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
fi
echo "install_physics: robosuite 1.5.2 and MuJoCo into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --constraint "$HERE/../constraints.txt" \
  --requirement "$REQ"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps 'robosuite==1.5.2'
touch "$STAMP"
