"""Shared test helpers: a tiny offline Qwen2 + character tokenizer, a prompt dataset and a mixed-pass-rate reward."""

from __future__ import annotations

import os
import zlib

import pytest
from datasets import Dataset


os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def mixed_reward(completions, lze_prompt_id, **kwargs):
    """Deterministic reward whose pass rate depends on the prompt: prompt id % 9 of 8 completion buckets pass."""
    return [float(zlib.crc32(c.encode()) % 8 < pid % 9) for c, pid in zip(completions, lze_prompt_id)]


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
