"""Prompt keys, read from the examples TRL hands around: no column is added to the data.

A prompt's key (`prompt_key`) keys its per-prompt state. It is a content hash of the **whole example** (the `prompt`
and whatever else defines the task: an answer, a parameter the reward reads, an image), so only identical examples
share one state. For a map-style train dataset the key is the index of the first example with that content; for an
iterable one, the hash. (TRL's `prompt_ids` are token ids, another thing.)
"""

from __future__ import annotations

import hashlib
import json
import warnings
from typing import Any

import numpy as np

from .errors import LZEWarning


def _encode(value: Any) -> list:
    """A JSON-able stand-in of a value JSON cannot write: an image by its pixels, a tensor or array by its values."""
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "size"):  # a PIL image
        return ["image", value.mode, list(value.size), hashlib.blake2b(value.tobytes()).hexdigest()]
    array = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
    if array.dtype == object:
        raise TypeError(
            f"A train dataset value of type {type(value).__name__} cannot be hashed into a prompt key (supported: "
            "strings, numbers, lists, dicts, images, arrays)."
        )
    digest = hashlib.blake2b(np.ascontiguousarray(array).tobytes()).hexdigest()
    return ["array", str(array.dtype), list(array.shape), digest]


def content_key(example: dict[str, Any]) -> int:
    """Non-negative 63-bit content hash of a dataset example (every column), stable across processes and runs."""
    text = json.dumps(example, sort_keys=True, default=_encode)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def has_prompt_column(dataset: Any) -> bool:
    """Whether the dataset has a `prompt` column (peeking at the first row when an iterable's columns are unknown)."""
    names = dataset.column_names
    if names is None:
        first = next(iter(dataset), None)
        names = list(first) if first is not None else []
    return "prompt" in names


class PromptKeys:
    """
    The prompt keys of a run's train dataset: a map-style `dataset`, or `None` for an iterable one. An example's
    identity is its `columns` (those TRL hands to `_generate_and_score_completions`; all by default). With
    `environments` (an `environment_factory` makes the tasks), identical examples are said, once, to share one state.

    `dataset_keys` holds the key of every example of a map-style dataset (`dataset_keys[i] == i` unless example `i`
    repeats an earlier one), `fingerprint` its size and a hash of its examples, saved with the state to check a resumed
    run's dataset.
    """

    def __init__(self, dataset: Any = None, columns: list[str] | None = None, environments: bool = False) -> None:
        self.dataset_keys = self.fingerprint = None
        self.columns = columns
        if dataset is None:
            return
        size = len(dataset)
        names = [c for c in dataset.column_names if columns is None or c in columns]
        keys = np.fromiter((content_key(e) for e in _examples(dataset, names)), dtype=np.int64, count=size)
        unique, first = np.unique(keys, return_index=True)
        self._sorted_keys, self._first_index = unique, first.astype(np.int64)
        self.dataset_keys = self._first_index[np.searchsorted(unique, keys)]
        self.fingerprint = {"size": int(size), "hash": hashlib.blake2b(keys.tobytes(), digest_size=16).hexdigest()}
        if environments and len(unique) < size:
            warnings.warn(
                f"The train dataset has {size} examples but only {len(unique)} distinct ones, and an "
                "environment_factory makes the tasks: LZE keys its per-prompt state by the example's content, so "
                "identical examples share one pass-rate history. If your environment draws a new task at each reset, "
                "that history mixes tasks and LZE cannot tell them apart; add a column that identifies the task (e.g. "
                "a seed or task id that `reset` reads), or use selector='none'.",
                LZEWarning,
                stacklevel=3,
            )

    def of(self, examples: list[dict[str, Any]]) -> np.ndarray:
        """The keys of dataset examples as TRL hands them around (its `inputs`); an example the map-style dataset does
        not hold gets its content hash."""
        if self.columns is not None:
            examples = [{k: e[k] for k in self.columns if k in e} for e in examples]
        keys = np.fromiter((content_key(e) for e in examples), dtype=np.int64, count=len(examples))
        if self.dataset_keys is None or len(self._sorted_keys) == 0:
            return keys
        pos = np.minimum(np.searchsorted(self._sorted_keys, keys), len(self._sorted_keys) - 1)
        return np.where(self._sorted_keys[pos] == keys, self._first_index[pos], keys)


def _examples(dataset: Any, names: list[str]):
    """The examples of a map-style dataset (its columns `names`), read in chunks."""
    for start in range(0, len(dataset), 1024):
        chunk = dataset.select_columns(names)[start : start + 1024]
        yield from ({k: chunk[k][i] for k in names} for i in range(len(chunk[names[0]])))
