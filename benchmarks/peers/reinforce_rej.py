"""`"reinforce_rej"`: Reinforce-Rej's online rejection of all-correct / all-wrong prompts."""

from __future__ import annotations

from typing import Any

import numpy as np

from lze_trl.method.selectors.base import GroupBatch, Selector, register_selector


@register_selector
class ReinforceRejSelector(Selector):
    """
    `"reinforce_rej"`: Reinforce-Rej's online rejection. A group that is not live (for binary rewards: all rollouts
    right or all wrong) is dropped from the update the first time it is detected, and its prompt is rejected for good:
    it is never rolled out again (from the next epoch on, through [`~Selector.plan_epoch`]) and, should it still reach
    a batch, never updated on. Groups with no scorable rollout are dropped from the update but not rejected.

    The rejected prompts are saved in checkpoints. When fewer prompts than a generation batch remain, an epoch has no
    batch left and the Trainer stops training (with a warning).
    """

    name = "reinforce_rej"
    plans_rollouts = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.rejected = np.empty(0, dtype=np.int64)  # sorted prompt ids

    def select(self, batch: GroupBatch) -> np.ndarray:
        ids = np.asarray(batch.prompt_keys, dtype=np.int64)
        dead = np.isfinite(batch.pass_rates) & ~batch.eligible
        already = np.isin(ids, self.rejected)
        self.rejected = np.union1d(self.rejected, ids[dead])
        return (batch.eligible & ~already).astype(np.float64)

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: Any) -> np.ndarray:
        return order[~np.isin(ids, self.rejected)]

    def metrics(self) -> dict[str, float]:
        return {"rejected_prompts": float(len(self.rejected))}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"rejected": self.rejected.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.rejected = np.asarray(state.get("rejected", np.empty(0)), dtype=np.int64).copy()
