"""`"dapo"`: DAPO's dynamic filtering of groups whose rewards do not vary (refill rounds run in the trainer)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import GroupBatch, Selector, check_setting, register_selector


@register_selector
class DAPOSelector(Selector):
    """
    `"dapo"`: DAPO's dynamic filtering. A group that is not live ([`~lze_trl.selection.live_groups`]: for binary
    rewards, all rollouts right or all wrong) carries no GRPO signal and is dropped; every live group is kept with
    weight 1.

    With `dapo_max_resample > 0`, the trainer oversamples as DAPO (and verl's `max_num_gen_batches`) does: while some
    process's share of the batch is not full of kept groups, it generates another round of rollouts for fresh prompts
    (drawn from the epoch's pool, deterministically from the seed and the generation index) and adds their kept
    groups, up to `dapo_max_resample` extra rounds; past that bound it trains on what it has. A kept group is only
    added where the processes holding its rows have room left, so no process ever updates on more rows than a plain
    generation batch. Every round's groups are scored (they update the per-prompt state) and appear in the selection
    log under the generation's index; `lze/refill_rounds` logs the rounds run. Without refill
    (`dapo_max_resample=0`, the default) the update simply has fewer groups.

    Unlike verl, refill prompts are drawn at random from the epoch's pool (minus the batch's own prompts) rather than
    taken from the next batches of the dataloader, so the epoch's order and length stay those of the sampler.
    """

    name = "dapo"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.refill_rounds = int(args.dapo_max_resample)

    @classmethod
    def check_args(cls, args: Any) -> None:
        check_setting(
            isinstance(args.dapo_max_resample, int)
            and not isinstance(args.dapo_max_resample, bool)
            and args.dapo_max_resample >= 0,
            "dapo_max_resample",
            args.dapo_max_resample,
            "use an integer >= 0 (0 filters without refilling; DAPO/verl allow up to 10 extra rounds).",
        )

    def select(self, batch: GroupBatch) -> np.ndarray:
        return batch.live.astype(np.float64)
