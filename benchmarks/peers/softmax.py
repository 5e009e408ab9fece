"""`"softmax"`: every group weighted by `softmax(-|ema - 0.5| / tau)`, the skill card's soft allocation."""

from __future__ import annotations

from typing import Any

import numpy as np

from lze_trl.method.checks import check_setting, is_finite_number
from lze_trl.method.selectors import GroupBatch, register_selector

from .base import PeerSelector


@register_selector
class SoftmaxSelector(PeerSelector):
    """
    `"softmax"`: the skill card's soft variant. Each group's weight is `softmax(score / temperature)` over the batch,
    times the number of groups, with `score = -|ema - 0.5|` (peaking at 50% accuracy) and `ema` the prompt's pass-rate
    EMA after this observation (the per-prompt table's: the first observation sets it, then
    `ema <- d * ema + (1 - d) * p`, `d = energy_ema_decay`). Weights average 1 over the batch, so the loss keeps its
    scale. Every group takes part in the update (only its advantages are scaled), except groups with no scorable
    rollout (weight 0).

    The card also allocates rollouts per prompt in proportion to these weights. TRL's GRPO generates a fixed
    `num_generations` rollouts per group, so with `allocate_rollouts=True` the budget is shared out in whole groups
    instead (see [`~SoftmaxSelector.plan_epoch`]): at each epoch's start a prompt gets as many groups as its weight
    earns, 0 skipping it for the epoch and 2 or more rolling it out that many times (needs a map-style train dataset).

    Settings (`selector_kwargs`):
        temperature (`float`, defaults to `0.2`):
            Temperature `tau` of the weights, > 0; 0.1-0.3 is typical, lower concentrates the weight on groups near
            50% accuracy.
        allocate_rollouts (`bool`, defaults to `False`):
            Also share each epoch's groups out in proportion to the weights.
    """

    name = "softmax"
    defaults = {"temperature": 0.2, "allocate_rollouts": False}

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.temperature = self.settings["temperature"]
        self._last_weight_max = 0.0
        self._last_count_max = 0
        # Allocating rollouts changes which prompts an epoch rolls out: a map-style dataset is then required.
        self.plans_rollouts = bool(self.settings["allocate_rollouts"])

    @classmethod
    def check_settings(cls, settings: dict[str, Any]) -> None:
        tau = settings["temperature"]
        check_setting(
            is_finite_number(tau) and tau > 0,
            "selector_kwargs['temperature']",
            tau,
            "use a finite temperature > 0, e.g. 0.2 (0.1-0.3 is typical).",
        )
        allocate = settings["allocate_rollouts"]
        check_setting(
            isinstance(allocate, bool), "selector_kwargs['allocate_rollouts']", allocate, "use true or false."
        )

    def select(self, batch: GroupBatch) -> np.ndarray:
        weights = np.zeros(batch.num_groups)
        valid = np.isfinite(batch.pass_rates)
        if valid.any():
            z = -np.abs(batch.ema_pass_rates[valid] - 0.5) / self.temperature
            e = np.exp(z - z.max())
            weights[valid] = valid.sum() * e / e.sum()
        self._last_weight_max = float(weights.max()) if len(weights) else 0.0
        return weights

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: Any) -> np.ndarray:
        """
        The epoch's rows with their groups in proportion to the weights (`allocate_rollouts=True`).

        The `n` prompts of the epoch seen so far share `n` groups: prompt `i` earns `n * w_i` with
        `w = softmax(-|ema - 0.5| / tau)` over them, rounded down, and the groups left go to the largest remainders
        (ties to the lower id). Prompts never seen get one group each, so the epoch keeps its length. The order is
        the epoch's pass over the prompts with at least one group, then its pass over those with at least two, and
        so on, so the copies of a prompt are spread over the epoch.
        """
        unique, inverse = np.unique(ids, return_inverse=True)
        ema = state.get(unique)["ema_pass_rate"]
        counts = np.ones(len(unique), dtype=np.int64)
        seen = np.flatnonzero(np.isfinite(ema))
        if len(seen) > 0:
            z = -np.abs(ema[seen] - 0.5) / self.temperature
            share = np.exp(z - z.max())
            share *= len(seen) / share.sum()
            whole = np.floor(share).astype(np.int64)
            left = len(seen) - int(whole.sum())
            whole[np.argsort(-(share - whole), kind="stable")[:left]] += 1
            counts[seen] = whole
        self._last_count_max = int(counts.max(initial=0))
        per_row = counts[inverse]
        return np.concatenate([order[per_row > copy] for copy in range(self._last_count_max)] or [order[:0]])

    def metrics(self) -> dict[str, float]:
        values = {"softmax_weight_max": self._last_weight_max}
        if self.plans_rollouts:
            values["softmax_groups_max"] = float(self._last_count_max)
        return values
