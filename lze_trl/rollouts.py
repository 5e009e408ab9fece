"""[`Rollouts`]: rollouts generated and rewarded once, kept per row until TRL turns them into update rows.

Every part of TRL's `_generate` result ([`GENERATED_PARTS`]) holds one entry per row (or is `None`), but
`extra_fields` (a dict whose lists hold one entry per row) and `tool_images` (`[]` without tools), as
`tests/test_trl_coupling.py` pins against the installed TRL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


GENERATED_PARTS = (
    "prompt_ids",
    "completion_ids",
    "tool_mask",
    "completions",
    "logprobs",
    "extra_fields",
    "images",
    "tool_images",
)
"""The parts of TRL's `_generate` result, in order."""


def _rows(part: Any, index: Sequence[int], n: int, name: str) -> Any:
    if part is None:
        return None
    if isinstance(part, dict):  # extra_fields: per-row lists and values shared by every row
        return {key: _rows(value, index, n, key) if isinstance(value, list) else value for key, value in part.items()}
    if isinstance(part, list) and len(part) == n:
        return [part[i] for i in index]
    if isinstance(part, list) and not part:  # tool_images without tools
        return []
    raise TypeError(f"TRL's `_generate` returned {name}={type(part).__name__} of length {len(part)} for {n} rows.")


def _concat(first: Any, second: Any, name: str) -> Any:
    if first is None and second is None:
        return None
    if isinstance(first, dict) and isinstance(second, dict) and first.keys() == second.keys():
        return {key: _concat(first[key], second[key], key) for key in first}
    if isinstance(first, list) and isinstance(second, list):
        return first + second
    if first == second:  # a value shared by every row
        return first
    raise TypeError(f"Rollouts of two generation rounds disagree on {name}: they cannot be merged.")


@dataclass
class Rows:
    """This process's rows of rollouts generated before: the `inputs`, the `prompts` TRL prepared, its `_generate`
    result (`generated`) and what reward functions logged for them (`extra_logs`, one list per column)."""

    inputs: list[dict]
    prompts: list
    generated: tuple
    extra_logs: dict[str, list]

    def take(self, index: Sequence[int]) -> Rows:
        """The rows `index`, in that order."""
        n = len(self.prompts)
        return Rows(
            [self.inputs[i] for i in index],
            [self.prompts[i] for i in index],
            tuple(_rows(part, index, n, name) for part, name in zip(self.generated, GENERATED_PARTS)),
            {column: [values[i] for i in index] for column, values in self.extra_logs.items()},
        )


@dataclass
class Rollouts:
    """Rollouts generated and rewarded in one TRL call: this process's [`Rows`], and every process's `prompt_ids` and
    `rewards` (rows x reward functions, NaN where unscored) in TRL's order."""

    rows: Rows
    prompt_ids: np.ndarray
    rewards: np.ndarray

    def groups(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The prompt id of each group of `size` consecutive rows (all processes), and the rewards by group, shape
        `(groups, size, reward functions)`."""
        return self.prompt_ids[::size], self.rewards.reshape(-1, size, self.rewards.shape[-1])


def merge_rows(first: Rows, second: Rows) -> Rows:
    """The rows of two generation rounds one after the other, as one `_generate` call of TRL returns them."""
    columns = sorted(first.extra_logs.keys() | second.extra_logs.keys())
    return Rows(
        first.inputs + second.inputs,
        first.prompts + second.prompts,
        tuple(_concat(a, b, name) for a, b, name in zip(first.generated, second.generated, GENERATED_PARTS)),
        {
            c: [
                *first.extra_logs.get(c, [None] * len(first.prompts)),
                *second.extra_logs.get(c, [None] * len(second.prompts)),
            ]
            for c in columns
        },
    )
