#!/usr/bin/env bash
# Install Debian's ccache for the colcon builds (tools/ros/build.sh compiles through it when present),
# if missing. Optional: without it (or without root) the builds compile everything, as before.
#
# Idempotent: does nothing when ccache is on PATH. Always exits 0; says so when it cannot install.
#
#   tools/ros/install_ccache.sh        # what `make ros` / `make ros-jazzy` run before colcon
set -euo pipefail

command -v ccache >/dev/null && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install_ccache: no ccache (optional: the ROS builds then compile everything; apt-get install ccache)" >&2
  exit 0
fi
echo "install_ccache: installing Debian's ccache (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get install -y -qq ccache >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq ccache >/dev/null; }; } ||
  echo "install_ccache: apt-get could not install ccache; the ROS builds compile everything" >&2
exit 0
