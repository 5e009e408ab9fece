"""Random controls: `"uniform"` (the paper's uniform-40%) and `"uniform_live"` (LZE's quota drawn among live
groups, which isolates LZE's ranking from its removal of dead groups)."""

from __future__ import annotations

import numpy as np

from lze_trl.method.selection import num_to_select
from lze_trl.method.selectors.base import GroupBatch, Selector, register_selector


@register_selector
class UniformSelector(Selector):
    """
    `"uniform"`: a uniformly random `selection_ratio` of the groups, the paper's "uniform sampling at the same 40%"
    control (the gain of LZE must come from which groups it keeps, not from how many).

    The quota is that of `"lze"` with every group counted as active, `k = max(int(n * selection_ratio), 1)` of the `n`
    groups, drawn without replacement from all of them: dead groups (pass rate 0 or 1) are not excluded, as in the
    paper's control. The draw uses the batch's generator, so every process keeps the same groups.
    """

    name = "uniform"
    needs_pass_rates = False

    def select(self, batch: GroupBatch) -> np.ndarray:
        n = batch.num_groups
        k = min(num_to_select(batch.num_groups, n, self.args.selection_ratio), n)
        weights = np.zeros(n)
        weights[batch.rng.choice(n, size=k, replace=False)] = 1.0
        return weights


@register_selector
class UniformLiveSelector(Selector):
    """
    `"uniform_live"`: LZE's quota drawn uniformly at random among the live groups only, the control that separates
    LZE's ranking from its removal of dead groups (live: [`~lze_trl.method.selection.live_groups`], as for LZE).

    It keeps exactly as many groups as `"lze"` would on the same batch, `k = min(max(int(n * selection_ratio),
    1), n_live)` of the `n` groups, so the two differ only in which live groups they
    keep: by energy, or at random. When fewer than `k` groups are live it keeps all of them, as LZE and DAPO do. The
    draw uses the batch's generator, so every process keeps the same groups.
    """

    name = "uniform_live"

    def select(self, batch: GroupBatch) -> np.ndarray:
        live = np.flatnonzero(batch.eligible)
        n = batch.num_groups
        k = num_to_select(batch.num_groups, len(live), self.args.selection_ratio)
        weights = np.zeros(n)
        if k:
            weights[batch.rng.choice(live, size=k, replace=False)] = 1.0
        return weights
