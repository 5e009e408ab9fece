"""The two core selectors: `"lze"` (top-k by Learning-Zone Energy) and `"none"` (plain GRPO)."""

from __future__ import annotations

import numpy as np

from ..selection import select_top_k
from .base import GroupBatch, Selector, register_selector


@register_selector
class NoSelector(Selector):
    """`"none"`: every group takes part in the update, exactly as in `GRPOTrainer`."""

    name = "none"
    needs_pass_rates = False

    def select(self, batch: GroupBatch) -> np.ndarray:
        return np.ones(batch.num_groups)


@register_selector
class LZESelector(Selector):
    """
    `"lze"`: the top `selection_ratio` of the groups by energy, with Gumbel exploration noise; only eligible (live)
    groups are selected (see [`select_top_k`]).
    """

    name = "lze"

    def select(self, batch: GroupBatch) -> np.ndarray:
        args = self.args
        mask = select_top_k(batch.energies, batch.eligible, args.selection_ratio, args.selection_noise, batch.rng)
        return mask.astype(np.float64)
