#!/usr/bin/env bash
# Install Debian's headless-capable Chromium for the report tests (test/report), if missing.
#
# Idempotent: does nothing when /usr/bin/chromium exists. Needs root (apt-get); as another
# user it says what to run instead of failing half-way. Exit status 0 when chromium is
# there afterwards, 1 otherwise.
#
#   tools/install_chromium.sh          # what `make test` runs before pytest
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install_chromium: $CHROMIUM is missing; run as root: apt-get update && apt-get install -y chromium" >&2
  exit 1
fi
echo "install_chromium: installing Debian's chromium (apt-get, about 300 MB unpacked)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "install_chromium: apt-get finished but $CHROMIUM is still missing" >&2
  exit 1
fi
"$CHROMIUM" --version >&2
