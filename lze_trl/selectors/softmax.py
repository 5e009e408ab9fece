"""`"softmax"`: every group weighted by `softmax(-|ema - 0.5| / tau)`, the skill card's soft allocation."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..energy import PromptIndex
from .base import GroupBatch, Selector, check_setting, is_finite_number, register_selector


@register_selector
class SoftmaxSelector(Selector):
    """
    `"softmax"`: the skill card's soft variant. Each prompt's pass rate is tracked by the selector's own EMA (the
    card's update: the first observation sets it, then `ema <- d * ema + (1 - d) * p` with `d = softmax_ema_decay`,
    0.9 by default), updated with the group's pass rate before scoring. The score `-|ema - 0.5|` peaks at 50%
    accuracy; each group's weight is `softmax(score / softmax_temperature)` over the batch, times the number of
    groups, so weights average 1 over the batch and the loss keeps its scale. Every group takes part in the update
    (only its advantages are scaled), except groups with no scorable rollout (weight 0).

    The card also allocates rollouts per prompt in proportion to these weights. TRL's GRPO generates a fixed
    `num_generations` rollouts per group, so with `softmax_allocate_rollouts=True` the budget is shared out in whole
    groups instead (see [`~SoftmaxSelector.rollout_counts`]): at each epoch's start a prompt gets as many groups as
    its weight earns, 0 skipping it for the epoch and 2 or more rolling it out that many times.
    """

    name = "softmax"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.index = PromptIndex()
        self.ema = np.empty(0, dtype=np.float64)
        self._last_weight_max = 0.0
        self._last_count_max = 0
        # Allocating rollouts changes which prompts an epoch rolls out: a map-style dataset is then required.
        self.masks_rollouts = bool(getattr(args, "softmax_allocate_rollouts", False))

    @classmethod
    def check_args(cls, args: Any) -> None:
        check_setting(
            is_finite_number(args.softmax_temperature) and args.softmax_temperature > 0,
            "softmax_temperature",
            args.softmax_temperature,
            "use a finite temperature > 0, e.g. 0.2 (0.1-0.3 is typical).",
        )
        check_setting(
            is_finite_number(args.softmax_ema_decay) and 0 <= args.softmax_ema_decay < 1,
            "softmax_ema_decay",
            args.softmax_ema_decay,
            "use a decay in [0, 1), e.g. 0.9.",
        )
        check_setting(
            not args.softmax_allocate_rollouts or args.selector == "softmax",
            "softmax_allocate_rollouts",
            args.softmax_allocate_rollouts,
            f"use it with selector='softmax' (got selector={args.selector!r}), or leave it False.",
        )

    def _observe(self, ids: np.ndarray, p: np.ndarray) -> None:
        valid = np.isfinite(p)
        if not valid.any():
            return
        slots = self.index.add(ids[valid])
        if len(self.index) > len(self.ema):
            self.ema = np.concatenate([self.ema, np.full(len(self.index) - len(self.ema), np.nan)])
        uniq, inverse = np.unique(slots, return_inverse=True)
        mean_p = np.bincount(inverse, weights=p[valid]) / np.bincount(inverse)
        decay = self.args.softmax_ema_decay
        old = self.ema[uniq]
        self.ema[uniq] = np.where(np.isnan(old), mean_p, decay * old + (1.0 - decay) * mean_p)

    def select(self, batch: GroupBatch) -> np.ndarray:
        ids = np.asarray(batch.prompt_ids, dtype=np.int64)
        p = np.asarray(batch.pass_rates, dtype=np.float64)
        self._observe(ids, p)
        weights = np.zeros(batch.num_groups)
        valid = np.isfinite(p)
        if valid.any():
            score = -np.abs(self.ema[self.index.lookup(ids[valid])] - 0.5)
            z = score / self.args.softmax_temperature
            e = np.exp(z - z.max())
            weights[valid] = valid.sum() * e / e.sum()
        self._last_weight_max = float(weights.max()) if len(weights) else 0.0
        return weights

    def rollout_counts(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        """
        Groups per prompt for the epoch when `softmax_allocate_rollouts` is set, else `None`.

        The `n` prompts seen so far share `n` groups: prompt `i` earns `n * w_i` with `w = softmax(-|ema - 0.5| /
        tau)` over them, rounded down, and the groups left go to the largest remainders (ties to the lower index).
        Prompts never seen get one group each, so the epoch keeps its length.
        """
        if not self.masks_rollouts:
            return None
        counts = np.ones(num_prompts, dtype=np.int64)
        slots = self.index.lookup(np.arange(num_prompts))
        seen = np.flatnonzero(slots >= 0)
        if len(seen) == 0:
            self._last_count_max = 1
            return counts
        z = -np.abs(self.ema[slots[seen]] - 0.5) / self.args.softmax_temperature
        share = len(seen) * np.exp(z - z.max())
        share *= len(seen) / share.sum()
        whole = np.floor(share).astype(np.int64)
        left = len(seen) - int(whole.sum())
        whole[np.argsort(-(share - whole), kind="stable")[:left]] += 1
        counts[seen] = whole
        self._last_count_max = int(counts.max())
        return counts

    def metrics(self) -> dict[str, float]:
        values = {"softmax_weight_max": self._last_weight_max}
        if self.masks_rollouts:
            values["softmax_groups_max"] = float(self._last_count_max)
        return values

    def state_dict(self) -> dict[str, np.ndarray]:
        return {**{f"index.{k}": v for k, v in self.index.state_dict().items()}, "ema": self.ema.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if "ema" not in state:
            return
        self.index.load_state_dict({k[len("index.") :]: v for k, v in state.items() if k.startswith("index.")})
        self.ema = np.asarray(state["ema"], dtype=np.float64).copy()
