"""`"reinforce_rej"`: Reinforce-Rej's online rejection of all-correct / all-wrong prompts."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..selection import is_dead
from .base import GroupBatch, Selector, register_selector


@register_selector
class ReinforceRejSelector(Selector):
    """
    `"reinforce_rej"`: Reinforce-Rej's online rejection. A group whose pass rate is 0 or 1 is dropped from the update
    the first time it is detected, and its prompt is rejected for good: it is never rolled out again (from the next
    epoch on, through [`~Selector.rollout_mask`]) and, should it still reach a batch, never updated on. Groups with
    no scorable rollout are dropped from the update but not rejected.

    The rejected prompts are saved in checkpoints. When fewer prompts than a generation batch remain, an epoch has no
    batch left and the Trainer stops training (with a warning).
    """

    name = "reinforce_rej"
    masks_rollouts = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.rejected = np.empty(0, dtype=np.int64)  # sorted prompt ids

    def select(self, batch: GroupBatch) -> np.ndarray:
        ids = np.asarray(batch.prompt_ids, dtype=np.int64)
        p = np.asarray(batch.pass_rates, dtype=np.float64)
        extreme = is_dead(p)  # False for NaN
        already = np.isin(ids, self.rejected)
        self.rejected = np.union1d(self.rejected, ids[extreme])
        return (np.isfinite(p) & ~extreme & ~already).astype(np.float64)

    def rollout_mask(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        keep = np.ones(num_prompts, dtype=bool)
        keep[self.rejected[(self.rejected >= 0) & (self.rejected < num_prompts)]] = False
        return keep

    def metrics(self) -> dict[str, float]:
        return {"rejected_prompts": float(len(self.rejected))}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"rejected": self.rejected.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.rejected = np.asarray(state.get("rejected", np.empty(0)), dtype=np.int64).copy()
