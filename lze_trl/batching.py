"""Row bookkeeping for scored generation batches (dicts of per-row tensors and lists), with no TRL import.

Used by the trainer to remove unselected rows from the update: the kept rows are packed into as few micro-batches as
needed, so the micro-steps left over run no forward/backward at all.
"""

from __future__ import annotations

import math
from typing import Any

import torch


Batch = dict[str, Any]


def plan_micro_steps(max_kept: int, max_rows: int, num_steps: int) -> tuple[int, int]:
    """
    Micro-steps and rows per micro-batch that hold `max_kept` rows with the least padding.

    Among `m` in `[ceil(max_kept / max_rows), num_steps]` micro-steps of `ceil(max_kept / m)` rows each, picks the
    one with the fewest rows in total (`m * ceil(max_kept / m)`), and the fewest micro-steps on a tie.

    Args:
        max_kept (`int`):
            Kept rows of the process that keeps the most (every process gets the same layout).
        max_rows (`int`):
            Most rows per micro-batch (`per_device_train_batch_size`: the memory the user planned for).
        num_steps (`int`):
            Micro-steps available (`steps_per_generation`).

    Returns:
        `tuple[int, int]`: `(active_steps, rows_per_step)`; `(0, 0)` when nothing is kept.
    """
    if max_kept <= 0:
        return 0, 0
    if max_kept > max_rows * num_steps:
        raise ValueError(f"{max_kept} kept rows do not fit in {num_steps} micro-batches of {max_rows} rows.")
    best = min(
        range(math.ceil(max_kept / max_rows), num_steps + 1),
        key=lambda m: (m * math.ceil(max_kept / m), m),
    )
    return best, math.ceil(max_kept / best)


def active_positions(active_steps: int, num_steps: int, window: int) -> list[int]:
    """
    Which of a generation batch's `num_steps` micro-steps run, when `active_steps` of them hold kept rows.

    Gradients are accumulated over windows of `window` micro-steps, and DDP all-reduces them in a window's last
    micro-step: a window that runs any micro-step must run its last one, on every process. So the active micro-steps
    are spread evenly over the windows and placed at the end of each; a window left with none is skipped entirely
    (no gradient anywhere, no optimizer movement).

    Args:
        active_steps (`int`):
            Micro-steps that hold kept rows.
        num_steps (`int`):
            Micro-steps of the generation batch (`steps_per_generation`), a multiple of `window`.
        window (`int`):
            Micro-steps per optimizer step (`gradient_accumulation_steps`).

    Returns:
        `list[int]`: the active positions, increasing.
    """
    num_windows = num_steps // window
    base, extra = divmod(active_steps, num_windows)
    positions = []
    for w in range(num_windows):
        count = base + (1 if w >= num_windows - extra else 0)
        positions.extend(range((w + 1) * window - count, (w + 1) * window))
    return positions


def num_rows(batch: Batch) -> int:
    """Rows of a batch: the length of its `prompt_ids`."""
    return len(batch["prompt_ids"])


def take_rows(batch: Batch, index: torch.Tensor) -> Batch:
    """The rows `index` of every per-row tensor and list of `batch`; scalars and other values are kept as they are."""
    n = num_rows(batch)
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n:
            out[key] = value[index.to(value.device)]
        elif isinstance(value, list) and len(value) == n:
            out[key] = [value[i] for i in index.tolist()]
        else:
            out[key] = value
    return out


def concat_batches(batches: list[Batch], pad_token_id: int, sum_keys: tuple[str, ...] = ()) -> Batch:
    """
    Concatenates batches row-wise, padding token tensors to a common width (prompts on the left, completions on the
    right, as `GRPOTrainer` pads them). Scalars are taken from the first batch, except those named in `sum_keys`,
    which are summed (`num_items_in_batch` when merging separately scored batches).
    """
    merged = {}
    for key, first in batches[0].items():
        values = [b[key] for b in batches]
        if key in sum_keys:
            merged[key] = sum(values)
        elif isinstance(first, torch.Tensor) and first.ndim >= 1:
            if first.ndim == 2 and len({v.shape[1] for v in values}) > 1:
                width = max(v.shape[1] for v in values)
                fill = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
                fill = 1 if key == "tool_mask" else fill
                left = key.startswith("prompt")
                values = [
                    torch.nn.functional.pad(
                        v, (width - v.shape[1], 0) if left else (0, width - v.shape[1]), value=fill
                    )
                    for v in values
                ]
            merged[key] = torch.cat(values)
        elif isinstance(first, list):
            merged[key] = [x for v in values for x in v]
        else:
            merged[key] = first
    return merged


def pack_kept_rows(
    batch: Batch, keep: torch.Tensor, positions: list[int], rows_per_step: int, num_steps: int
) -> list[Batch]:
    """
    Lays the kept rows of `batch` out in micro-batches of `rows_per_step` rows at the micro-step `positions`.

    Kept rows come first in their current order; the room left is topped up with zero-weight copies of the first row
    (no loss tokens, zero advantage). The list is `num_steps` long; the entries at other positions are placeholders
    for micro-steps that are skipped.

    Args:
        batch (`dict`):
            A scored generation batch (per-row tensors and lists).
        keep (`torch.Tensor`):
            Boolean mask of the rows to keep.
        positions (`list[int]`):
            Micro-steps that run (the same on every process), see [`active_positions`].
        rows_per_step (`int`):
            Rows per micro-batch.
        num_steps (`int`):
            Length of the returned list (`steps_per_generation`).

    Returns:
        `list[dict]`: the micro-batches.
    """
    kept = torch.nonzero(keep.cpu(), as_tuple=False).flatten()
    total = len(positions) * rows_per_step
    if len(kept) > total:
        raise ValueError(
            f"{len(kept)} kept rows do not fit in {len(positions)} micro-batches of {rows_per_step} rows."
        )
    index = torch.cat([kept, torch.zeros(max(total, 1) - len(kept), dtype=torch.long)])
    packed = take_rows(batch, index)
    pad = slice(len(kept), len(index))
    packed["completion_mask"] = packed["completion_mask"].clone()
    packed["completion_mask"][pad] = 0
    packed["advantages"] = packed["advantages"].clone()
    packed["advantages"][pad] = 0.0
    steps = [
        take_rows(packed, torch.arange(j * rows_per_step, (j + 1) * rows_per_step)) for j in range(len(positions))
    ]
    layout = [steps[0] if steps else packed] * num_steps  # placeholders: never reach the loss
    for j, position in enumerate(positions):
        layout[position] = steps[j]
    return layout
