# shellcheck shell=sh
# Runtime environment for ROS 2 (Kilted or Jazzy) from PyPI wheels + a colcon --merge-install tree.
#
#   . tools/ros/env.sh VENV_DIR INSTALL_DIR          # bash/zsh (args to `.`)
#   EVALSTOP_VENV=V EVALSTOP_INSTALL=I . tools/ros/env.sh   # POSIX sh/dash: `.` takes no args
#   python -c "import rclpy; from evalstop.msg import Foo"
#   "$INSTALL_DIR/lib/evalstop/<node>"
#
# POSIX sh; safe to source twice (prepends again, harmless). In bash, always pass
# both args: a bare `. env.sh` inside a script would read that script's $1/$2.
# Replaces both `source install/setup.sh` and the ros-wheels-bootstrapper re-exec.
_ros_venv=$(cd "${1:-${EVALSTOP_VENV:?usage: . env.sh VENV_DIR INSTALL_DIR}}" && pwd) || return 1
_ros_inst=$(cd "${2:-${EVALSTOP_INSTALL:?usage: . env.sh VENV_DIR INSTALL_DIR}}" && pwd) || return 1
_ros_sp=$(_ROS_WHEELS_BOOTSTRAP_COMPLETE=1 "$_ros_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' 2>/dev/null) \
  || _ros_sp="$_ros_venv/lib/python3.11/site-packages"
# Python path of the --merge-install tree ("lib/python3.11/site-packages").
_ros_isp="$_ros_inst/lib/$(basename "$(dirname "$_ros_sp")")/site-packages"

# Shared libs: our generated typesupport libs, the wheels' prefix lib/, and the
# auditwheel-vendored deps (site-packages/ros_*.libs: hashed libssl, tinyxml2, lttng, ...).
# The wheels' RPATH ($ORIGIN/../../../ros_X.libs) is wrong once pip puts lib/ in the
# venv root, which is why these dirs must be on LD_LIBRARY_PATH.
_ros_ld="$_ros_inst/lib:$_ros_venv/lib"
for _d in "$_ros_sp"/ros_*.libs; do [ -d "$_d" ] && _ros_ld="$_ros_ld:$_d"; done
export LD_LIBRARY_PATH="$_ros_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# We set LD_LIBRARY_PATH ourselves, so tell ros-wheels-bootstrapper (a .pth hook that
# otherwise re-execs every venv python with LD_LIBRARY_PATH) to do nothing.
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1

export PATH="$_ros_venv/bin${PATH:+:$PATH}"
export PYTHONPATH="$_ros_isp${PYTHONPATH:+:$PYTHONPATH}"
# `ros2` (launch, ros2cli: `make ros-tools`, the test environment) beside the install tree, if there.
if [ -d "$_ros_inst/../tools" ]; then
  _d=$(cd "$_ros_inst/../tools" && pwd)
  export PATH="$_d/bin:$PATH" PYTHONPATH="$_ros_isp:$_d${PYTHONPATH#"$_ros_isp"}"
fi
export AMENT_PREFIX_PATH="$_ros_inst:$_ros_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$_ros_inst:$_ros_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
# The distribution of the venv's wheels: requirements-ros-jazzy.txt installs ros-jazzy-* meta wheels.
ROS_DISTRO=kilted
for _d in "$_ros_sp"/ros_jazzy_rclpy-*.dist-info; do [ -d "$_d" ] && ROS_DISTRO=jazzy; done
export ROS_VERSION=2 ROS_PYTHON_VERSION=3 ROS_DISTRO
unset _ros_venv _ros_inst _ros_sp _ros_isp _ros_ld _d
