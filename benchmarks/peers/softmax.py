"""`"softmax"`: every group weighted by `softmax(-|ema - 0.5| / tau)`, the skill card's soft allocation."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import GroupBatch, Selector, check_setting, is_finite_number, register_selector


@register_selector
class SoftmaxSelector(Selector):
    """
    `"softmax"`: the skill card's soft variant. Each group's weight is `softmax(score / softmax_temperature)` over the
    batch, times the number of groups, with `score = -|ema - 0.5|` (peaking at 50% accuracy) and `ema` the prompt's
    pass-rate EMA after this observation (the per-prompt table's: the first observation sets it, then
    `ema <- d * ema + (1 - d) * p`, `d = energy_ema_decay`). Weights average 1 over the batch, so the loss keeps its
    scale. Every group takes part in the update (only its advantages are scaled), except groups with no scorable
    rollout (weight 0).

    The card also allocates rollouts per prompt in proportion to these weights. TRL's GRPO generates a fixed
    `num_generations` rollouts per group, so with `softmax_allocate_rollouts=True` the budget is shared out in whole
    groups instead (see [`~SoftmaxSelector.plan_epoch`]): at each epoch's start a prompt gets as many groups as its
    weight earns, 0 skipping it for the epoch and 2 or more rolling it out that many times.
    """

    name = "softmax"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self._last_weight_max = 0.0
        self._last_count_max = 0
        # Allocating rollouts changes which prompts an epoch rolls out: a map-style dataset is then required.
        self.plans_rollouts = bool(getattr(args, "softmax_allocate_rollouts", False))

    @classmethod
    def check_args(cls, args: Any) -> None:
        check_setting(
            is_finite_number(args.softmax_temperature) and args.softmax_temperature > 0,
            "softmax_temperature",
            args.softmax_temperature,
            "use a finite temperature > 0, e.g. 0.2 (0.1-0.3 is typical).",
        )
        check_setting(
            not args.softmax_allocate_rollouts or args.selector == "softmax",
            "softmax_allocate_rollouts",
            args.softmax_allocate_rollouts,
            f"use it with selector='softmax' (got selector={args.selector!r}), or leave it False.",
        )

    def select(self, batch: GroupBatch) -> np.ndarray:
        weights = np.zeros(batch.num_groups)
        valid = np.isfinite(batch.pass_rates)
        if valid.any():
            z = -np.abs(batch.ema_pass_rates[valid] - 0.5) / self.args.softmax_temperature
            e = np.exp(z - z.max())
            weights[valid] = valid.sum() * e / e.sum()
        self._last_weight_max = float(weights.max()) if len(weights) else 0.0
        return weights

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: Any) -> np.ndarray:
        """
        The epoch's rows with their groups in proportion to the weights (`softmax_allocate_rollouts=True`).

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
            z = -np.abs(ema[seen] - 0.5) / self.args.softmax_temperature
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
