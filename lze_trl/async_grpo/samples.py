"""What travels between LZE's async trainer and its rollout worker: orders one way, tagged rows the other.

The trainer draws the prompts and decides, on one process: it sends the worker [`Order`]s (roll out the
`num_generations` rollouts of group `group_id`, from dataset row `index`), and the worker sends back each group's rows
as TRL's `RolloutSample`s, one training row each, with LZE's tags ([`LZERolloutSample`]): a rollout may make several
rows (a multi-turn rollout that forks) or none (one with no trained token), and a row's `metrics` hold its own rewards
as floats, which the trainer averages into its logs. LZE needs, per row, the group's prompt key (a 63-bit integer,
which a float metric would round), which rollout of the group the row comes from, how many rows the group made, and
the rewards of every rollout of the group (so that a rollout with no row still counts in the pass rate). A group that
made no row at all sends one placeholder ([`empty_group`]), which the trainer never trains on. The advantages are
recomputed over the group once LZE has weighed it ([`group_advantages`], TRL's formula), scaled by the selector's
weight. Plain numpy; TRL's `RolloutSample` is the base class.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .upstream import RolloutSample


TAGS = ("prompt_key", "rollout", "group_rows", "group_rewards")
"""The attributes a rollout sample must carry for LZE, besides TRL's `RolloutSample` fields."""
ARRAY_FIELDS = ("input_ids", "completion_mask", "old_log_probs")
SCALAR_FIELDS = ("advantage", "model_version", "group_id", "prompt_key", "rollout", "group_rows")
JSON_FIELDS = ("prompt", "completion", "metrics", "group_rewards")


@dataclass(frozen=True)
class Order:
    """
    One group for the rollout worker to roll out (its `num_generations` rollouts), reward and send back.

    Attributes:
        group_id (`int`): The group (unique in the run; TRL's `group_id` of its rows).
        index (`int`): The train dataset row of its prompt.
        prompt_key (`int`): That row's prompt key ([`~lze_trl.method.prompt_keys.PromptKeys`]).
    """

    group_id: int
    index: int
    prompt_key: int


@dataclass(slots=True)
class LZERolloutSample(RolloutSample):
    """
    TRL's `RolloutSample` with LZE's tags.

    Attributes:
        prompt_key (`int`):
            The group's prompt key.
        rollout (`int`):
            The rollout of the group this row comes from (`-1` for an [`empty_group`] placeholder).
        group_rows (`int`):
            How many rows the group's rollouts made (`0` for a placeholder).
        group_rewards (`tuple[tuple[float, ...], ...]`):
            Every rollout's rewards of the group, one row per rollout and one value per reward function (in the
            worker's `reward_funcs` order), NaN where a function returned `None`.
    """

    prompt_key: int = -1
    rollout: int = -1
    group_rows: int = 0
    group_rewards: tuple = ()


def frozen_rewards(rewards: Any) -> tuple:
    """`rewards` of shape `(rollouts, reward functions)` as nested tuples of floats (NaN kept)."""
    table = np.asarray(rewards, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"rewards must have shape (rollouts, reward functions), not {table.shape}.")
    return tuple(tuple(float(v) for v in row) for row in table)


def tag_group(
    samples: Sequence[RolloutSample], order: Order, rewards: Any, rollouts: Sequence[int]
) -> list[LZERolloutSample]:
    """
    The rows of one scored group (every row of it, in order) as [`LZERolloutSample`]s, each row's TRL fields
    unchanged: `rewards` has shape `(rollouts of the group, reward functions)` and `rollouts[i]` is the rollout of the
    group row `i` comes from. A group without rows gives its [`empty_group`] (policy version 0: the caller sets the
    group's).
    """
    frozen = frozen_rewards(rewards)
    if not samples:
        return [empty_group(order, frozen, 0)]
    names = [f.name for f in fields(RolloutSample)]
    return [
        LZERolloutSample(
            **{name: getattr(s, name) for name in names},
            prompt_key=int(order.prompt_key),
            rollout=int(r),
            group_rows=len(samples),
            group_rewards=frozen,
        )
        for s, r in zip(samples, rollouts, strict=True)
    ]


def empty_group(order: Order, rewards: Any, model_version: int) -> LZERolloutSample:
    """The placeholder of a group whose rollouts made no training row: it carries the group's rewards only."""
    nothing = np.empty(0, dtype=np.int64)
    return LZERolloutSample(
        prompt=[],
        completion=[],
        input_ids=nothing,
        completion_mask=nothing,
        old_log_probs=np.empty(0, dtype=np.float32),
        advantage=0.0,
        model_version=int(model_version),
        group_id=order.group_id,
        metrics={},
        prompt_key=int(order.prompt_key),
        rollout=-1,
        group_rows=0,
        group_rewards=frozen_rewards(rewards),
    )


def check_tags(sample: Any) -> None:
    """Refuses a row without LZE's tags ([`TAGS`]), naming the workers that tag theirs."""
    missing = [tag for tag in TAGS if getattr(sample, tag, None) is None]
    if missing:
        raise TypeError(
            f"A rollout sample of type {type(sample).__name__} lacks LZE's tags {missing}: LZE needs each row's "
            "prompt key, rollout, and its group's rows and rewards. Use a rollout worker that takes LZE's orders and "
            "pushes LZERolloutSample rows (lze_trl.async_grpo.worker.LZERolloutWorker, or "
            "lze_trl.testing.async_stand_ins.StandInRolloutWorker)."
        )


def group_rewards(rows: Sequence[LZERolloutSample], num_generations: int, reward_names: list[str]) -> np.ndarray:
    """The rewards of a group that arrived whole (`rows`: every row of it, or its placeholder), shaped
    `(num_generations, reward functions)`; refuses a group whose rewards or rollouts do not fit the run."""
    group_id = rows[0].group_id
    rewards = np.array(rows[0].group_rewards, dtype=np.float64)
    if rewards.shape != (num_generations, len(reward_names)):
        raise ValueError(
            f"Group {group_id} carries rewards of shape {rewards.shape}: LZE needs one row per rollout "
            f"({num_generations}, num_generations) and one column per reward function of the run ({reward_names}, "
            "in order)."
        )
    outside = sorted({s.rollout for s in rows if s.group_rows > 0} - set(range(num_generations)))
    if outside:
        raise ValueError(
            f"Group {group_id} has rows of rollouts {outside}: a group's rollouts are 0 to num_generations - 1 = "
            f"{num_generations - 1}."
        )
    return rewards


def group_advantages(totals: np.ndarray) -> np.ndarray:
    """A group's advantages from its rollouts' total rewards, exactly as TRL's `_score_group` computes them:
    `(r - mean) / (std + 1e-8)` over the scorable rollouts, 0 for an unscorable (NaN) one. A copy, because TRL computes
    them inline in `_score_group` (which also calls the reward functions) and has no function to call; a test pins
    TRL's line."""
    totals = np.asarray(totals, dtype=np.float64)
    advantages = np.zeros_like(totals)
    scored = ~np.isnan(totals)
    if scored.any():
        advantages[scored] = (totals[scored] - totals[scored].mean()) / (totals[scored].std() + 1e-8)
    return advantages


def rows_state(rows: Sequence[LZERolloutSample], prefix: str) -> tuple[dict[str, np.ndarray], str]:
    """`rows` as arrays (names prefixed `prefix`) and one JSON text (their prompts, completions, metrics and group
    rewards), for a checkpoint; a row whose JSON fields cannot be written raises a `TypeError`."""
    arrays = {f"{prefix}{name}": _concat([getattr(s, name) for s in rows]) for name in ARRAY_FIELDS}
    arrays[f"{prefix}lengths"] = np.array([len(s.input_ids) for s in rows], dtype=np.int64)
    for name in SCALAR_FIELDS:
        dtype = np.float64 if name == "advantage" else np.int64
        arrays[f"{prefix}{name}"] = np.array([getattr(s, name) for s in rows], dtype=dtype)
    enqueued = [math.nan if s.enqueued_at is None else s.enqueued_at for s in rows]
    arrays[f"{prefix}enqueued_at"] = np.array(enqueued, dtype=np.float64)
    return arrays, json.dumps([[_plain(getattr(s, name)) for name in JSON_FIELDS] for s in rows])


def rows_from_state(arrays: dict[str, np.ndarray], text: str, make_sample: Callable, prefix: str) -> list:
    """The rows [`rows_state`] wrote, each built by `make_sample(**fields)`."""
    lengths = arrays[f"{prefix}lengths"]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    rows = []
    for i, values in enumerate(json.loads(text)):
        fields = {name: arrays[f"{prefix}{name}"][starts[i] : ends[i]] for name in ARRAY_FIELDS}
        for name in SCALAR_FIELDS:
            value = arrays[f"{prefix}{name}"][i]
            fields[name] = float(value) if name == "advantage" else int(value)
        enqueued = float(arrays[f"{prefix}enqueued_at"][i])
        fields["enqueued_at"] = None if math.isnan(enqueued) else enqueued
        fields.update(zip(JSON_FIELDS, values))
        fields["group_rewards"] = tuple(tuple(r) for r in fields["group_rewards"])
        rows.append(make_sample(**fields))
    return rows


def _concat(values: list[Any]) -> np.ndarray:
    arrays = [np.asarray(v).reshape(-1) for v in values]
    return np.concatenate(arrays) if arrays else np.empty(0)


def _plain(value: Any) -> Any:
    """A JSON-writable copy of a row's prompt, completion, metrics or rewards (tuples as lists, NaN kept)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value
