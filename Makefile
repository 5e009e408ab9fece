# Everything installs into a project-local virtual environment (.venv), idempotently.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.lze-installed
# DeepSpeed for the ZeRO-3 recipes and their CPU tests (tests/test_engines.py). Pinned: the tests rely on its CPU
# accelerator and ZeRO-3 partitioning.
DEEPSPEED := deepspeed==0.19.8

.PHONY: install test demo lint clean

install: $(STAMP)

# torch first: the CPU build the machine offers (`torch==2.13.0`) unless the machine already has a torch, so that
# no multi-GB CUDA wheels are pulled in by the plain `torch` requirement.
# DeepSpeed ships as source only and its setup imports torch: it is built against the torch installed here
# (--no-build-isolation; an isolated build would download another torch). Its ops compile on first use (none on CPU).
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet setuptools wheel
	$(PY) -m pip install --quiet --no-build-isolation "$(DEEPSPEED)"
	touch $(STAMP)

test: install
	$(PY) -m pytest

demo: install
	$(VENV)/bin/lze-trl demo

lint: install
	$(PY) -m ruff check lze_trl tests
	$(PY) -m ruff format --check lze_trl tests

clean:
	rm -rf $(VENV) build *.egg-info
