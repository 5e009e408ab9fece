"""[`Rollouts`]: rollouts generated and rewarded once, kept per row until TRL turns them into update rows.

Every part of TRL's `_generate` result ([`GENERATED_PARTS`]) holds one entry per row (or is `None`), but
`extra_fields` (a dict whose lists hold one entry per row) and `tool_images` (`[]` without tools), as
`tests/trainer/test_trl_coupling.py` pins against the installed TRL.
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


@dataclass
class GeneratedRows:
    """This process's rows of rollouts generated before: the `inputs`, the `prompts` TRL prepared, its `_generate`
    result (`generated`) and what reward functions logged for them (`extra_logs`, one list per column)."""

    inputs: list[dict]
    prompts: list
    generated: tuple
    extra_logs: dict[str, list]


@dataclass
class Rollouts:
    """Rollouts generated and rewarded in one TRL call: this process's [`GeneratedRows`], and every process's
    `prompt_keys` and `rewards` (rows x reward functions, NaN where unscored) in TRL's order."""

    rows: GeneratedRows
    prompt_keys: np.ndarray
    rewards: np.ndarray

    def groups(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The prompt key of each group of `size` consecutive rows (all processes), and the rewards by group, shape
        `(groups, size, reward functions)`."""
        return self.prompt_keys[::size], self.rewards.reshape(-1, size, self.rewards.shape[-1])


def gather_rows(rounds: Sequence[GeneratedRows], picks: Sequence[tuple[int, int]]) -> GeneratedRows:
    """The rows `picks` (`(round, row)` pairs) of the [`GeneratedRows`] of one or more generation rounds, in that
    order, as one `_generate` call of TRL returns them."""

    def part(values: list, name: str, in_dict: bool = False) -> Any:
        if all(v is None for v in values):
            return None
        if all(isinstance(v, dict) and v.keys() == values[0].keys() for v in values):  # extra_fields
            return {key: part([v[key] for v in values], key, in_dict=True) for key in values[0]}
        if all(isinstance(v, list) and len(v) == len(rows.prompts) for v, rows in zip(values, rounds)):
            return [values[r][i] for r, i in picks]
        if all(isinstance(v, list) and not v for v in values):  # tool_images without tools
            return []
        if in_dict and not any(isinstance(v, list) for v in values) and all(v == values[0] for v in values):
            return values[0]  # an extra field shared by every row
        shapes = ", ".join(type(v).__name__ + (f" of length {len(v)}" if isinstance(v, list) else "") for v in values)
        rows = ", ".join(str(len(r.prompts)) for r in rounds)
        raise TypeError(f"TRL's `_generate` returned {name}={shapes} for {rows} rows: lze-trl cannot keep it per row.")

    columns = sorted(set().union(*(rows.extra_logs for rows in rounds)))
    return GeneratedRows(
        [rounds[r].inputs[i] for r, i in picks],
        [rounds[r].prompts[i] for r, i in picks],
        tuple(part([rows.generated[k] for rows in rounds], name) for k, name in enumerate(GENERATED_PARTS)),
        {c: [rounds[r].extra_logs[c][i] if c in rounds[r].extra_logs else None for r, i in picks] for c in columns},
    )
