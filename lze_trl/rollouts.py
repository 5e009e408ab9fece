"""[`Rollouts`]: rollouts generated and rewarded once, kept per row until TRL turns them into update rows.

TRL's `GRPOTrainer._generate(prompts)` returns one tuple whose parts are named in [`GENERATED_PARTS`]; every part
holds one entry per row (or is `None`), except `extra_fields` (a dict whose list values hold one entry per row) and
`tool_images` (one entry per row, or `[]` without tools). `tests/test_trl_coupling.py` pins that layout against the
installed TRL. Plain Python/numpy, no TRL import.
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
class Rollouts:
    """
    Rollouts generated and rewarded in one TRL generation call: this process's rows (`inputs` as the sampler drew
    them, `prompts` as TRL prepared them for `_generate`, `generated`: TRL's `_generate` result), and every
    process's `prompt_ids` and `rewards` (rows x reward functions, NaN where a function returned `None`), gathered in
    TRL's order (process 0's rows, then process 1's, ...).
    """

    inputs: list[dict]
    prompts: list
    generated: tuple
    prompt_ids: np.ndarray
    rewards: np.ndarray

    def __len__(self) -> int:
        return len(self.prompts)

    def groups(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The prompt id of each group of `size` consecutive rows (all processes), and the rewards by group, shape
        `(groups, size, reward functions)`."""
        return self.prompt_ids[::size], self.rewards.reshape(-1, size, self.rewards.shape[-1])

    def take(self, index: Sequence[int]) -> tuple[list[dict], list, tuple]:
        """This process's rows `index`: their inputs, prompts and `_generate` result."""
        n = len(self)
        generated = tuple(_rows(p, index, n, name) for p, name in zip(self.generated, GENERATED_PARTS))
        return [self.inputs[i] for i in index], [self.prompts[i] for i in index], generated


def merge_rows(rounds: list[tuple[list[dict], list, tuple]]) -> tuple[list[dict], list, tuple]:
    """Rows of several rounds ([`Rollouts.take`]) one after the other, as one `_generate` call of TRL returns them."""
    inputs, prompts, generated = rounds[0]
    for more_inputs, more_prompts, more_generated in rounds[1:]:
        inputs, prompts = inputs + more_inputs, prompts + more_prompts
        generated = tuple(_concat(a, b, n) for a, b, n in zip(generated, more_generated, GENERATED_PARTS))
    return inputs, prompts, generated
