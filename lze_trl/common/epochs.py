"""The order in which both trainers draw a dataset's prompts, epoch after epoch: TRL's `RepeatSampler` order."""

from __future__ import annotations

import torch


class EpochOrders:
    """
    Each epoch's permutation of `num_samples` prompts, as TRL's `RepeatSampler` draws them: epoch `e`'s is the
    `e`-th `torch.randperm` of a generator seeded with `seed` (`shuffle=False`: the dataset's order). A function of
    `(seed, epoch)`, so a resumed run draws what the uninterrupted one drew; the generator is kept between epochs and
    rewound only for an earlier one. [`~lze_trl.LZERepeatSampler`] (the synchronous trainer) and the async window draw
    their epochs through it: the same seed gives both trainers the same order.
    """

    def __init__(self, num_samples: int, seed: int, shuffle: bool = True) -> None:
        self.num_samples, self.seed, self.shuffle = num_samples, seed, shuffle
        self._generator = torch.Generator()
        self._generator.manual_seed(seed)
        self._drawn = 0  # permutations drawn from the generator so far

    def __call__(self, epoch: int) -> list[int]:
        """Epoch `epoch`'s order of the dataset's indices."""
        if not self.shuffle:
            return list(range(self.num_samples))
        if self._drawn > epoch:
            self._generator.manual_seed(self.seed)
            self._drawn = 0
        while self._drawn <= epoch:
            order = torch.randperm(self.num_samples, generator=self._generator).tolist()
            self._drawn += 1
        return order
