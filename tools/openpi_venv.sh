#!/bin/sh
# Create (or reuse) the SEPARATE virtualenv with openpi's own protocol code: `openpi-server`
# (openpi's WebsocketPolicyServer) and `openpi-client` (WebsocketClientPolicy, msgpack_numpy).
# openpi-client 0.1.2 pins numpy<2, which the project's ROS venv cannot use, and forgets its
# typing_extensions dependency; both are installed here explicitly. Used by the protocol
# compatibility tests and `make demo-policy`; prints the venv's python on its last line.
#   tools/openpi_venv.sh [VENV_DIR]   (default: build/openpi-venv)
set -eu
VENV=${1:-build/openpi-venv}
PYTHON=${PYTHON:-python3.11}
STAMP="$VENV/.openpi-installed"
if [ ! -f "$STAMP" ]; then
  test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    'openpi-server==0.1.0' 'openpi-client==0.1.2' 'typing_extensions>=4' 'numpy<2' >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python"
