"""Pytest setup: offline environment, the `tiny` fixture and the vLLM hooks; the helpers are in `testing_utils`."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from testing_utils import TEST_PATHS


sys.path[:0] = [str(p) for p in TEST_PATHS[1:]]  # a test module imports one of another folder by name


os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def tiny():
    """A fresh tiny Qwen2 and its character tokenizer."""
    from lze_examples.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer()
    return tiny_qwen2(tokenizer), tokenizer


def pytest_runtest_setup(item):
    """Tests marked `vllm` run where vLLM is installed (`make test-vllm`), with the CPU workarounds of `vllm_cpu`."""
    if item.get_closest_marker("vllm") is None:
        return
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed: `make test-vllm` runs these tests in their own environment")
    from vllm_cpu import apply_cpu_workarounds, track_vllm_engines

    apply_cpu_workarounds()
    track_vllm_engines()


def pytest_runtest_teardown(item):
    if item.get_closest_marker("vllm") is not None and importlib.util.find_spec("vllm") is not None:
        from vllm_cpu import release_vllm_engines

        release_vllm_engines()
