# Everything a fresh machine needs is done by these targets themselves (see README.md).
#   make test     lint, unit tests, pytest --nbval over notebooks/ and exercises/, the budget
#   make run      execute every notebook with papermill into build/ (summary.json + report)
#   make refresh  re-execute the committed notebooks in place (their stored outputs)
#   make lab      JupyterLab on the collection
#   make book     the collection as a static site in build/book/ (from the stored outputs)
#   make nbval    only pytest --nbval (NB=exercises/01-cpu-vs-gpu-matmul.ipynb for one notebook)
#   make lint     ruff check + ruff format --check (part of make test)
#   make bench    the measurements that are not gates: timing tests and the batch overhead
# NB=... limits run/refresh/nbval to some notebooks or folders.
# GPU=1 installs tensorflow[and-cuda] instead of tensorflow-cpu (for a GPU machine).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
GPU    ?= 0
REQS   := requirements.txt
STAMP  := $(VENV)/.installed-gpu$(GPU)
NB     ?= notebooks exercises

# One venv per Python: `make test PYTHON=python3.10 VENV=.venv-3.10` (.ci/run does this for each
# Python it tests). A PYTHON given on the command line must be the Python of an existing $(VENV):
# otherwise make would quietly test the venv's own Python.
ifeq ($(origin PYTHON),command line)
ifneq ($(wildcard $(PY)),)
python_version = $(or $(shell $(1) -c 'import sys; print("Python %d.%d" % sys.version_info[:2])' \
  2>/dev/null),not a working Python)
WANTED := $(call python_version,$(PYTHON))
HELD   := $(call python_version,$(PY))
ifneq ($(WANTED),$(HELD))
$(error PYTHON=$(PYTHON) is $(WANTED) but $(VENV) holds $(HELD): give it a venv of its own \
  (VENV=.venv-X.Y) or remove $(VENV))
endif
endif
endif

# The notebooks' kernel (capture_fd_output off, TF quiet: tools/nbrun/kernel.py) is found before any
# other python3 kernel. The kernelspec carries the notebooks' environment; tests/conftest.py gives
# it to the test processes.
export JUPYTER_PATH := $(abspath $(VENV))/share/jupyter
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# The maintainer tools (batch runner nbrun, gpucheck) live in tools/, not in the package. This is
# the one place that puts tools/ on PYTHONPATH: every target and every process they start inherit it
# (outside make: PYTHONPATH=tools, see README.md).
export PYTHONPATH := $(abspath tools)$(if $(PYTHONPATH),:$(PYTHONPATH))
NBVAL := --nbval --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout 600
# Two pytest-xdist workers; --dist loadscope keeps each notebook's cells (and each test module) on
# one worker, in order. XDIST= runs everything in one process.
XDIST ?= -n 2 --dist loadscope

.PHONY: test lint nbval run refresh lab book bench clean venv gpu-check

# tensorflow (GPU=1) and tensorflow-cpu install into the same tensorflow/ folder: when the other
# build is there, remove both before installing one (the nvidia-* CUDA wheels may stay).
define drop_tf_if
	@if $(PY) -m pip show --quiet $(1) >/dev/null 2>&1; then \
	  echo 'switching TensorFlow build: removing $(1)'; \
	  $(PY) -m pip uninstall --quiet --yes tensorflow tensorflow-cpu; fi
endef

venv: $(STAMP)

$(STAMP): $(REQS) pyproject.toml tools/nbrun/kernel.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is needed"'
	$(PY) -m pip install --quiet --upgrade pip
ifeq ($(GPU),1)
	sed 's/^tensorflow-cpu==/tensorflow[and-cuda]==/' $(REQS) > $(VENV)/requirements-gpu.txt
	$(call drop_tf_if,tensorflow-cpu)
	$(PY) -m pip install --quiet -r $(VENV)/requirements-gpu.txt
else
	$(call drop_tf_if,tensorflow)
	$(PY) -m pip install --quiet -r $(REQS)
endif
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m nbrun.kernel $(VENV)
	@rm -f $(VENV)/.installed-gpu*
	@touch $@

test: $(STAMP) lint
	@start=$$(date +%s); \
	$(PY) -m pytest tests $(NB) $(NBVAL) -m 'not timing' $(XDIST); status=$$?; \
	echo "make test: pytest took $$(( $$(date +%s) - start )) s (exit $$status)"; \
	$(PY) -m nbrun.budget; exit $$status

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Only the notebooks (NB=path/to/one.ipynb for one), no unit tests.
nbval: $(STAMP)
	$(PY) -m pytest $(NB) $(NBVAL)

run: $(STAMP)
	$(PY) -m nbrun $(NB) --out build

refresh: $(STAMP)
	$(PY) -m nbrun $(NB) --inplace --out build/refresh

# JupyterLab (requirements-lab.txt) on top of the project's environment, only for `make lab`:
# installed with requirements.txt as constraints, so the pinned versions (and GPU=1's TensorFlow)
# stay as they are.
LAB_STAMP := $(VENV)/.installed-lab

$(LAB_STAMP): $(STAMP) requirements-lab.txt
	grep -v '^-r' requirements-lab.txt > $(VENV)/requirements-lab-only.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements-lab-only.txt -c $(REQS)
	@touch $@

# As root (a container), Jupyter refuses to start without --allow-root. LAB_ARGS adds options.
LAB_ARGS ?=
lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The collection as a static site (build/book/, home page build/book/index.html): Sphinx, MyST-NB
# and the Sphinx Book Theme (requirements-book.txt, installed like make lab's, only for make book),
# from the notebooks' stored outputs: nothing is executed. Built whole (a warning is an error, and an
# incremental Sphinx build would not repeat the warnings of unchanged pages) whenever a source is
# newer than the last good build; then checked by tools/bookcheck.py; build/book/.built marks it good.
BOOK_STAMP   := $(VENV)/.installed-book
BOOK         := build/book
BOOK_SOURCES := $(wildcard book/*.* book/redirect/* notebooks/*.ipynb exercises/*.ipynb \
  docs/*.md docs/runs/*.md docs/runs/*/*.png d2lhelpers/runs/*.json d2lhelpers/multiworker.py) \
  notebooks exercises docs docs/runs tools/bookcheck.py

$(BOOK_STAMP): $(STAMP) requirements-book.txt
	grep -v '^-r' requirements-book.txt > $(VENV)/requirements-book-only.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements-book-only.txt -c $(REQS)
	@touch $@

book: $(BOOK)/.built

$(BOOK)/.built: $(BOOK_STAMP) $(BOOK_SOURCES)
	rm -rf $(BOOK)
	@start=$$(date +%s); \
	$(PY) -m sphinx -W -q -b html -c book . $(BOOK) && $(PY) -m bookcheck $(BOOK); status=$$?; \
	echo "make book: sphinx-build and bookcheck took $$(( $$(date +%s) - start )) s (exit $$status)"; \
	exit $$status
	@touch $@
	@echo "make book: open $(BOOK)/index.html"

bench: $(STAMP)
	$(PY) -m pytest tests -m timing -q
	$(PY) benchmarks/batch_overhead.py

clean:
	rm -rf build .pytest_cache

# On a GPU machine: every notebook into build/gpu-check/, the tests marked gpu, the run recorded
# (build/gpu-check/run.json) and checked against physics and the GPU's data sheet (tools/gpucheck).
# The driver is asked first, with $(PYTHON) and no environment: no GPU there, one line saying so
# and success. A GPU there: the environment gets TensorFlow's GPU build (GPU=1) unless GPU= is
# given on the command line, and a GPU that TensorFlow cannot use is a failure, not a skip.
GPU_CHECK_BUILD := $(if $(filter command line,$(origin GPU)),$(GPU),1)
gpu-check:
	@$(PYTHON) tools/gpucheck/driver.py; status=$$?; \
	if [ $$status = 3 ]; then exit 0; elif [ $$status != 0 ]; then exit $$status; fi; \
	$(MAKE) --no-print-directory GPU=$(GPU_CHECK_BUILD) venv && \
	$(VENV)/bin/python -m gpucheck
