"""Removing unselected rows from TRL's update rows (dicts of per-row tensors and lists): TRL then shuffles and splits
what is left, so the update's forward/backward costs what the kept rows cost."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch


Batch = dict[str, Any]


def take_rows(batch: Batch, index: torch.Tensor) -> Batch:
    """
    The rows `index` of every per-row tensor and list of `batch`; scalars and other values are kept as they are.

    A vision-language batch (`pixel_values` with `num_images`) holds per-patch or per-image tensors: they are cut per
    row with TRL's own split (`split_pixel_values_by_grid`, by `image_grid_thw`, `num_tiles`, ... as TRL splits them
    into micro-batches), taken, and merged back; a per-image tensor that split does not cut raises a `ValueError`
    naming it rather than keep another row's images.
    """
    if "pixel_values" not in batch or "num_images" not in batch:
        return _take(batch, index)
    from trl.trainer.utils import split_pixel_values_by_grid, unsplit_pixel_values_by_grid

    split = split_pixel_values_by_grid(batch)
    n = len(batch["prompt_ids"])
    for key, value in split.items():
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] != n:
            raise ValueError(
                f"lze-trl cannot keep some rows of this processor's `{key}` (shape {tuple(value.shape)} for {n} rows; "
                "TRL's split_pixel_values_by_grid does not cut it per row): set selector='none' for this model."
            )
    return unsplit_pixel_values_by_grid(_take(split, index))


def _take(batch: Batch, index: torch.Tensor) -> Batch:
    n = len(batch["prompt_ids"])
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n:
            out[key] = value[index.to(value.device)]
        elif isinstance(value, list) and len(value) == n:
            out[key] = [value[i] for i in index.tolist()]
        else:
            out[key] = value
    return out


def pad_rows(batch: Batch, keep: torch.Tensor, max_kept: int, multiple: int, accelerator: Any) -> Batch:
    """
    This process's rows `keep` of `batch`, padded to `R` rows: the largest process's kept count `max_kept` rounded up
    to a multiple of `multiple` (at least `multiple`). The kept rows come in their order, then zero-weight copies of
    the first row (no loss token, zero advantage). `num_items_in_batch` is recounted over the kept rows.
    """
    total = max(math.ceil(max_kept / multiple), 1) * multiple
    kept = np.flatnonzero(np.asarray(keep, dtype=bool))
    index = torch.as_tensor(np.concatenate([kept, np.zeros(total - len(kept), dtype=np.int64)]), dtype=torch.long)
    out = take_rows(batch, index)
    pad = slice(len(kept), total)
    out["completion_mask"] = out["completion_mask"].clone()
    out["completion_mask"][pad] = 0
    out["advantages"] = out["advantages"].clone()
    out["advantages"][pad] = 0.0
    loss_mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = accelerator.gather(loss_mask.sum()).sum()
    return out
