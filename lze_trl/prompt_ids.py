"""Stable prompt ids, read from the rows TRL hands around: no column is added to the data.

A prompt's id keys its per-prompt state. It is a content hash of the row's `prompt` (a string or chat messages; the
whole row when it has none, as when an `environment_factory` owns the prompts), so it needs nothing but the rows
`GRPOTrainer` passes to `_generate_and_score_completions`, and rows that hold the same prompt share one state. For a
map-style train dataset the id is the index of the first row holding the prompt (so the prompt table joins the
dataset's columns, and the sampler maps ids back to rows); for an iterable one it is the hash itself. Plain numpy and
hashlib, no TRL import.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def content_hash(prompt: Any) -> int:
    """Non-negative 63-bit hash of a prompt (string or conversational messages), stable across processes and runs."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def row_key(row: dict[str, Any]) -> int:
    """The content hash of a dataset row's `prompt`, or of the whole row when it has no `prompt`."""
    return content_hash(row["prompt"] if "prompt" in row else {k: row[k] for k in sorted(row)})


def has_prompt_column(dataset: Any) -> bool:
    """Whether the dataset has a `prompt` column (peeking at the first row when an iterable's columns are unknown)."""
    names = dataset.column_names
    if names is None:
        first = next(iter(dataset), None)
        names = list(first) if first is not None else []
    return "prompt" in names


class PromptIds:
    """
    The prompt ids of a run's train dataset.

    Args:
        dataset (`datasets.Dataset` or `None`):
            A map-style train dataset: ids are row indices, the first row of each distinct prompt. `None` (an
            iterable dataset): ids are the prompts' content hashes.

    Attributes:
        row_ids (`np.ndarray` or `None`):
            The id of every row of the map-style dataset (`row_ids[i] == i` unless row `i` repeats an earlier prompt).
        fingerprint (`dict` or `None`):
            `size` and `hash` of the map-style dataset's prompts, recorded with the state so that a resumed run can
            tell whether its state belongs to the same prompts in the same rows.
    """

    def __init__(self, dataset: Any = None) -> None:
        self.row_ids = self.fingerprint = None
        if dataset is None:
            return
        size = len(dataset)
        keys = np.fromiter((row_key(row) for row in _rows(dataset)), dtype=np.int64, count=size)
        unique, first = np.unique(keys, return_index=True)
        self._sorted_keys, self._first_rows = unique, first.astype(np.int64)
        self.row_ids = self._first_rows[np.searchsorted(unique, keys)]
        self.fingerprint = {"size": int(size), "hash": hashlib.blake2b(keys.tobytes(), digest_size=16).hexdigest()}

    def of_rows(self, rows: list[dict[str, Any]]) -> np.ndarray:
        """
        The ids of dataset rows (as `GRPOTrainer` passes them to `_generate_and_score_completions`). A row whose prompt
        the map-style dataset does not hold (rewritten by user code) gets its content hash, which no row index can
        equal in practice.
        """
        keys = np.fromiter((row_key(row) for row in rows), dtype=np.int64, count=len(rows))
        if self.row_ids is None or len(self._sorted_keys) == 0:
            return keys
        pos = np.minimum(np.searchsorted(self._sorted_keys, keys), len(self._sorted_keys) - 1)
        return np.where(self._sorted_keys[pos] == keys, self._first_rows[pos], keys)


def _rows(dataset: Any):
    """The rows of a map-style dataset (only its `prompt` when it has one), read in chunks."""
    names = ["prompt"] if "prompt" in dataset.column_names else dataset.column_names
    for start in range(0, len(dataset), 4096):
        chunk = dataset.select_columns(names)[start : start + 4096]
        yield from ({k: chunk[k][i] for k in names} for i in range(len(chunk[names[0]])))
