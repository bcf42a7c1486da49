# evalstop — set-up and entry points. `make demo` runs the main job, `make test` the tests;
# both create or reuse the project's virtualenv in .venv and install what they need.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.evalstop-installed

.PHONY: venv demo test bench tables clean

venv: $(STAMP)

$(STAMP): setup.py constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --constraint constraints.txt --editable '.[test,report]'
	touch $@

# The statistics core on the embedded examples (the ROS node suite is not built yet).
demo: venv
	$(VENV)/bin/evalstop step oc --n-max 200 --alpha 0.05 --alternative greater --p0 0.56 --p1 0.92
	$(VENV)/bin/evalstop analyze examples/towel_like.csv --method step --alpha 0.05 --n-max 200
	$(VENV)/bin/evalstop analyze examples/progress_like.csv --method nscore --bins 21 --alpha 0.05
	$(VENV)/bin/evalstop simulate --method nscore --p0 0.45 --p1 0.6 --n-max 500 --alpha 0.05 --reps 20000

test: venv
	$(PY) -m pytest

bench: venv
	$(PY) bench/run_all.py

tables: venv
	$(PY) tools/make_step_tables.py

clean:
	rm -rf $(VENV) build install log *.egg-info
