"""`"dapo"`: DAPO's dynamic filtering of groups whose rewards do not vary (its refill rounds lost their benchmark,
BENCHMARKS.md section 2, and left the repository)."""

from __future__ import annotations

import numpy as np

from lze_trl.method.selectors.base import GroupBatch, Selector, register_selector


@register_selector
class DAPOSelector(Selector):
    """
    `"dapo"`: DAPO's dynamic filtering. A group that is not live ([`~lze_trl.method.selection.live_groups`]: for binary
    rewards, all rollouts right or all wrong) carries no GRPO signal and is dropped; every live group is kept with
    weight 1. Without DAPO's refill rounds the update simply has fewer groups.
    """

    name = "dapo"

    def select(self, batch: GroupBatch) -> np.ndarray:
        return batch.live.astype(np.float64)
