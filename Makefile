# Everything installs into a project-local virtual environment (.venv), idempotently.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.lze-installed

.PHONY: install test test-fast demo lint clean

install: $(STAMP)

# torch first: the CPU build the machine offers (`torch==2.13.0`) unless the machine already has a torch, so that
# no multi-GB CUDA wheels are pulled in by the plain `torch` requirement.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: install
	$(PY) -m pytest

# The edit loop: everything but the tests that train a model or launch processes (`slow`, `distributed` markers).
test-fast: install
	$(PY) -m pytest -m "not slow and not distributed"

demo: install
	$(VENV)/bin/lze-trl demo

lint: install
	$(PY) -m ruff check lze_trl tests
	$(PY) -m ruff format --check lze_trl tests

clean:
	rm -rf $(VENV) build *.egg-info
