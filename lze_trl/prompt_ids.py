"""Stable prompt ids: the dataset index for map-style datasets, a content hash for iterable ones."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from datasets import Dataset, IterableDataset


PROMPT_ID_COLUMN = "lze_prompt_id"


def content_hash(prompt: Any) -> int:
    """Non-negative 63-bit hash of a prompt (string or conversational messages), stable across processes and runs."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def _add_hash(example: dict[str, Any]) -> dict[str, Any]:
    return {PROMPT_ID_COLUMN: content_hash(example["prompt"])}


def with_prompt_ids(dataset: Dataset | IterableDataset) -> Dataset | IterableDataset:
    """
    Adds the `lze_prompt_id` column that keys each prompt's LZE state.

    Map-style datasets get their row index, so a prompt keeps its state across epochs and shuffles; iterable
    datasets get a content hash of `prompt`. An existing `lze_prompt_id` column is replaced: the sampler and the
    prune state rely on it being the row index.

    Args:
        dataset (`datasets.Dataset` or `datasets.IterableDataset`):
            Train dataset with a `prompt` column.

    Returns:
        The dataset with the `lze_prompt_id` column.
    """
    if isinstance(dataset, IterableDataset):
        return dataset.map(_add_hash)
    if PROMPT_ID_COLUMN in dataset.column_names:
        dataset = dataset.remove_columns(PROMPT_ID_COLUMN)
    return dataset.add_column(PROMPT_ID_COLUMN, list(range(len(dataset))))


def has_prompt_column(dataset: Dataset | IterableDataset) -> bool:
    """Whether the dataset has a `prompt` column (peeking at the first row when an iterable's columns are unknown)."""
    names = dataset.column_names
    if names is None:
        first = next(iter(dataset), None)
        names = list(first) if first is not None else []
    return "prompt" in names
