"""Shared test helpers: a tiny offline Qwen2 + character tokenizer, a prompt dataset and a mixed-pass-rate reward."""

from __future__ import annotations

import importlib.util
import os
import zlib

import pytest
import torch
from datasets import Dataset


os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def prompt_number(prompt: str) -> int:
    """The `i` of a `prompt_dataset` prompt `f"{i}+{i % 7}="`: its row index."""
    return int(prompt.split("+")[0])


def mixed_reward(prompts, completions, **kwargs):
    """Deterministic reward whose pass rate depends on the prompt: (i % 9) of 8 completion buckets pass."""
    return [float(zlib.crc32(c.encode()) % 8 < prompt_number(p) % 9) for p, c in zip(prompts, completions)]


def count_grad_rows(model):
    """Counts the rows that go through a forward pass with gradients enabled (the update's forward/backward)."""
    counter = {"rows": 0}

    def hook(module, args, kwargs):
        if torch.is_grad_enabled():
            counter["rows"] += kwargs["input_ids"].shape[0]

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def prompt_dataset(n: int = 32) -> Dataset:
    return Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(n)]})


def make_trainer(tmp_path, selector="lze", reward=mixed_reward, dataset=None, **overrides):
    """An `LZEGRPOTrainer` of a fresh tiny Qwen2 on `prompt_dataset()` (or `dataset`) with `lze_args(**overrides)`."""
    from lze_trl import LZEGRPOTrainer
    from lze_trl.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer()
    return LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=reward,
        args=lze_args(tmp_path, selector=selector, **overrides),
        train_dataset=prompt_dataset() if dataset is None else dataset,
        processing_class=tokenizer,
    )


@pytest.fixture
def tiny():
    from lze_trl.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer()
    return tiny_qwen2(tokenizer), tokenizer


def lze_args(tmp_path, **overrides):
    from lze_trl import LZEGRPOConfig

    values = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        max_steps=4,
        logging_steps=1,
        report_to="none",
        learning_rate=1e-3,
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    values.update(overrides)
    return LZEGRPOConfig(**values)


def run_torchrun(script, *script_args, timeout: int = 300):
    """
    Runs `script` in two CPU processes with torchrun (gloo) on a free local port; the whole process group is killed
    if it outlives `timeout`, so a hang fails the test instead of leaving workers behind.
    """
    import signal
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    proc = subprocess.Popen(
        [*cmd, str(script), *map(str, script_args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"torchrun {script} timed out after {timeout} s:\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


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
