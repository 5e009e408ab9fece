"""The paper's random control: `"uniform"` (uniform-40%, dead groups included). LZE's own control, `"uniform_live"`
(its quota drawn among live groups), ships with the package (`lze_trl/method/selectors/builtin.py`)."""

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
