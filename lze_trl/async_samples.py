"""LZE's tags on TRL's async rollout samples: what a rollout worker must add to each row for LZE.

TRL's `RolloutSample` is one training row: a conversation of a group may make several rows (a multi-turn rollout that
forks) or none (one with no trained token), and a row's `metrics` hold its own rewards as floats, which the trainer
averages into its logs. LZE needs three things per row that TRL's worker does not give: the prompt key of its group
(a 63-bit integer, which a float metric would round), how many rows its group has (so that the group can be closed
when its last row arrives), and the rewards of every rollout of its group (so that a rollout with no row still
counts in the pass rate). [`LZERolloutSample`] is TRL's `RolloutSample` with these three fields; the trainer reads
TRL's fields only, so the rows train exactly as TRL's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .async_trl import RolloutSample


@dataclass(slots=True)
class LZERolloutSample(RolloutSample):
    """
    TRL's `RolloutSample` with LZE's tags.

    Attributes:
        prompt_key (`int`):
            The group's prompt key ([`~lze_trl.prompt_keys.PromptKeys`] of the train dataset row it was drawn from).
        group_rows (`int`):
            How many rows the group's rollouts made, this one included.
        group_rewards (`tuple[tuple[float, ...], ...]`):
            Every rollout's rewards of the group, `num_generations` rows of one value per reward function (in the
            worker's `reward_funcs` order), NaN where a function returned `None`.
    """

    prompt_key: int = -1
    group_rows: int = 0
    group_rewards: tuple = ()


def tag_group(samples: Sequence[RolloutSample], prompt_key: int, rewards: Any) -> list[LZERolloutSample]:
    """
    The rows of one scored group (as TRL's `_score_group` returns them: every row of the group, in order) as
    [`LZERolloutSample`]s carrying `prompt_key` and `rewards` (shape `(num_generations, reward functions)`, or TRL's
    `(reward functions, num_generations)` transposed by the caller), each row's TRL fields unchanged.
    """
    table = np.asarray(rewards, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"rewards must have shape (num_generations, reward functions), not {table.shape}.")
    frozen = tuple(tuple(float(v) for v in row) for row in table)
    names = [f.name for f in fields(RolloutSample)]
    return [
        LZERolloutSample(
            **{name: getattr(s, name) for name in names},
            prompt_key=int(prompt_key),
            group_rows=len(samples),
            group_rewards=frozen,
        )
        for s in samples
    ]
