# evalstop — set-up and entry points. `make demo` runs the main job, `make test` the tests;
# both create or reuse the project's virtualenv in .venv and install what they need.
VENV    ?= .venv
PYTHON  ?= python3.11
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.evalstop-installed

# ROS 2 Kilted comes from PyPI wheels (cp311 only) into the same venv; colcon builds the
# `evalstop` package (interfaces + evalstop_ros + node executables) into build/ros/install.
# See tools/ros/NOTES.md. Everything that runs ROS runs inside tools/ros/env.sh.
ROS_REQ     := tools/ros/requirements-ros.txt
ROS_BUILD   := build/ros
ROS_INSTALL := $(ROS_BUILD)/install
ROS_STAMP   := $(ROS_BUILD)/.evalstop-built
# colcon builds a view of the package in build/ros/src/evalstop rather than the repo root: the
# venv lives in the repo, and CMake refuses exported include dirs (the venv's numpy) that lie
# inside the package's source directory. Files are copied (ament installs package.xml with
# install(FILES), which would copy a symlink as such); directories are symlinked, and
# CMakeLists.txt installs their real paths.
ROS_PKG_SRC := $(ROS_BUILD)/src/evalstop
ROS_PKG_FILES := package.xml CMakeLists.txt
ROS_PKG_DIRS  := msg srv action evalstop_ros scripts launch config
# Everything colcon installs: a change to any of it rebuilds (incremental, a few seconds).
ROS_SOURCES := Makefile package.xml CMakeLists.txt tools/ros/build.sh \
  $(shell find msg srv action launch config scripts evalstop_ros -type f \
            ! -name '*.pyc' ! -path '*/__pycache__/*' 2>/dev/null)
# POSIX sh form of `. tools/ros/env.sh VENV INSTALL` (make runs recipes with /bin/sh).
ROS_ENV     := EVALSTOP_VENV=$(VENV) EVALSTOP_INSTALL=$(ROS_INSTALL) . tools/ros/env.sh &&

.PHONY: venv ros demo demo-policy demo-physics demo-hub demo-hub-ros test lint bench tables clean

venv: $(STAMP)

# ros-wheels-bootstrapper's .pth would re-exec EVERY venv python with LD_LIBRARY_PATH set;
# tools/ros/env.sh sets that environment explicitly for ROS processes instead, so drop it.
$(STAMP): setup.py constraints.txt $(ROS_REQ)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --constraint constraints.txt --editable '.[test,report,categories,active,runner,hub]' \
	  --requirement $(ROS_REQ)
	rm -f $(VENV)/lib/python3.11/site-packages/ros_wheels_bootstrapper.pth
	$(PY) tools/ros/fix_wheel_paths.py $(VENV)
	touch $@

ros: $(ROS_STAMP)

$(ROS_STAMP): $(STAMP) $(ROS_SOURCES)
	@mkdir -p $(ROS_PKG_SRC)
	@for f in $(ROS_PKG_FILES); do rm -f $(ROS_PKG_SRC)/$$f; cp -p $$f $(ROS_PKG_SRC)/$$f; done
	@for d in $(ROS_PKG_DIRS); do ln -sfn ../../../../$$d $(ROS_PKG_SRC)/$$d; done
	@echo "colcon build of the ROS package into $(ROS_INSTALL) (log: $(ROS_BUILD)/build.log)"
	tools/ros/build.sh $(VENV) $(ROS_PKG_SRC) $(ROS_BUILD) > $(ROS_BUILD)/build.log 2>&1 \
	  || { tail -n 60 $(ROS_BUILD)/build.log; exit 1; }
	touch $@

demo: venv ros
	$(ROS_ENV) $(ROS_INSTALL)/lib/evalstop/evalstop_demo

# Second demo: two scripted policies served by openpi's own WebsocketPolicyServer (openpi-server
# from PyPI, in the separate venv of tools/openpi_venv.sh) and run by policy_runner on its
# simulated arm over the openpi protocol.
demo-policy: venv ros
	$(ROS_ENV) $(ROS_INSTALL)/lib/evalstop/evalstop_demo --robot sim_policy \
	  --server-command "$$(tools/openpi_venv.sh) tools/openpi_policy_server.py"

# Real physics: two scripted grasping policies (openpi's own server) on a simulated Franka Panda
# (robosuite Lift in MuJoCo, rendered offscreen through EGL), stopped by STEP and N-SCORE; the
# journal is audited and the HTML report shows the episode videos. tools/install_physics.sh adds
# robosuite and MuJoCo to the venv (and Debian's EGL/Mesa if missing).
demo-physics: venv ros
	tools/install_physics.sh $(VENV)
	$(ROS_ENV) $(ROS_INSTALL)/lib/evalstop/evalstop_demo --robot physics \
	  --server-command "$$(tools/openpi_venv.sh) tools/openpi_policy_server.py"

# Second demo: the evaluation hub on a local PostgreSQL server with three simulated stations.
demo-hub: venv
	$(PY) tools/hub/demo.py

# The same with ROS stations: evaluation_manager in hub mode + sim_robot, one ROS domain each.
demo-hub-ros: venv ros
	$(ROS_ENV) ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-0} $(PY) tools/hub/demo.py --ros-stations

# The report tests render HTML in Debian's headless Chromium (installed here if missing); the physics
# tests need robosuite and EGL (tools/install_physics.sh): required, never skipped, under make test.
test: venv ros lint
	tools/install_chromium.sh
	tools/install_physics.sh $(VENV)
	$(ROS_ENV) EVALSTOP_ROS_REQUIRED=1 EVALSTOP_REPORT_REQUIRED=1 EVALSTOP_PHYSICS_REQUIRED=1 $(PY) -m pytest

# The gates that keep the code as it is: ruff over the tree, mypy --strict over the ROS-free
# core (stats, session, audit; pyproject.toml [tool.ruff], [tool.mypy]).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: venv ros
	$(ROS_ENV) $(PY) bench/run_all.py

tables: venv
	$(PY) tools/make_step_tables.py

clean:
	rm -rf $(VENV) build install log *.egg-info
