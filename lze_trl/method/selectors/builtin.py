"""The built-in selectors: `"lze"` (top-k by Learning-Zone Energy), `"none"` (plain GRPO) and `"uniform_live"`
(LZE's quota at random among the live groups: the control of LZE's ranking, to run beside it on your own data)."""

from __future__ import annotations

import numpy as np

from ..selection import num_to_select, select_top_k
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
    `"lze"`: the top `selection_ratio` of the groups by energy, with Gumbel selection noise; only live
    groups are selected (see [`select_top_k`]).
    """

    name = "lze"

    def select(self, batch: GroupBatch) -> np.ndarray:
        args = self.args
        mask = select_top_k(batch.energies, batch.live, args.selection_ratio, args.selection_noise, batch.rng)
        return mask.astype(np.float64)


@register_selector
class UniformLiveSelector(Selector):
    """
    `"uniform_live"`: LZE's quota drawn uniformly at random among the live groups, the control that separates LZE's
    ranking from its removal of dead groups. It keeps as many groups as `"lze"` would on the same batch, `k =
    min(max(int(n * selection_ratio), 1), n_live)` of the `n` groups, so the two differ only in which live groups they
    keep: by energy, or at random. The draw uses the batch's generator, so every process keeps the same groups.
    """

    name = "uniform_live"

    def select(self, batch: GroupBatch) -> np.ndarray:
        live = np.flatnonzero(batch.live)
        k = num_to_select(batch.num_groups, len(live), self.args.selection_ratio)
        weights = np.zeros(batch.num_groups)
        if k:
            weights[batch.rng.choice(live, size=k, replace=False)] = 1.0
        return weights
