"""Shared test helpers: a tiny offline Qwen2 + character tokenizer, a prompt dataset and a mixed-pass-rate reward."""

from __future__ import annotations

import os
import zlib

import pytest
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


def prompt_dataset(n: int = 32) -> Dataset:
    return Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(n)]})


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
