"""Train sampler: TRL's `RepeatSampler` order, made resumable, with each epoch's prompts planned by the run."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
from trl.trainer.utils import RepeatSampler

from ..common.epochs import EpochOrders
from ..method.errors import LZEWarning
from ..method.run import DataPosition, LZERun


class LZERepeatSampler(RepeatSampler):
    """
    TRL's `RepeatSampler` (a subclass) on map-style datasets, resumable: the permutation of epoch `e` (from the
    Trainer's `set_epoch`) is the one TRL's draws, as a function of `(seed, e)`; `tests/trainer/test_sampler.py` pins
    it.

    Args:
        num_samples, mini_repeat_count, batch_size, repeat_count, shuffle, seed:
            Those of TRL's `RepeatSampler` (the dataset's size for its `data_source`).
        run ([`~lze_trl.method.run.LZERun`], *optional*):
            The run, which turns each epoch's permutation into the dataset indices it rolls out
            (`plan_epoch(epoch, order)`), once per epoch.
        position ([`~lze_trl.method.run.DataPosition`], *optional*):
            Where training stands, the epoch's plan included.
        resuming (`bool`, *optional*, defaults to `False`):
            Whether `position` is a resumed run's: the sampler then continues from it (its epoch, its plan, the
            batches of the epoch already trained), not from the Trainer's count.

    Attributes:
        redraw_after_resume (`bool`):
            Whether the resumed run's first iterator drew random numbers that the uninterrupted run drew before the
            checkpoint, so that the trainer must reload the checkpoint's RNG states after its first micro-step;
            `False` once the resume lands at an epoch's end (the next epoch's iterator is new in both runs).
    """

    def __init__(
        self,
        num_samples: int,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        run: LZERun | None = None,
        position: DataPosition | None = None,
        resuming: bool = False,
    ) -> None:
        # TRL's fields (`num_samples`, `batch_size`, ... read by its `__len__`); its own generator is not used: the
        # permutations come from `EpochOrders`, TRL's order as a function of (seed, epoch).
        super().__init__(range(num_samples), mini_repeat_count, batch_size, repeat_count, shuffle, seed)
        self.orders = EpochOrders(num_samples, seed, shuffle)
        self.run = run
        self.position = position if position is not None else DataPosition()
        self.redraw_after_resume = resuming
        self.epoch_offset: int | None = None if resuming else 0  # set by the first `set_epoch` after a resume
        self.skip_batches = self.position.batches_in_epoch if resuming else 0
        self._planned = self.position.epoch if resuming and self.position.plan is not None else None

    @property
    def epoch(self) -> int:
        return self.position.epoch

    def set_epoch(self, epoch: int) -> None:
        """Called by the Trainer before each epoch; after a resume, epochs count from the resumed one."""
        if self.epoch_offset is None:
            self.epoch_offset = self.position.epoch - epoch
        elif epoch + self.epoch_offset != self.position.epoch:
            self.position.epoch, self.position.batches_in_epoch = epoch + self.epoch_offset, 0

    def permutation(self, epoch: int) -> list[int]:
        """The permutation TRL's `RepeatSampler` draws for `epoch`: its `epoch`-th `randperm` from `seed`."""
        return self.orders(epoch)

    def epoch_order(self, epoch: int) -> list[int]:
        """The dataset indices of `epoch` in sampling order (one entry per group), decided now (or restored)."""
        position = self.position
        if self._planned != epoch:
            if position.plan is not None:
                position.skipped_groups = position.groups_skipped(self.num_samples)  # the epoch that ends
            order = np.asarray(self.permutation(epoch), dtype=np.int64)
            position.plan = order if self.run is None else np.asarray(self.run.plan_epoch(epoch, order))
            self._planned = epoch
        return position.plan.tolist()

    def __iter__(self) -> Iterator[int]:
        order = self.epoch_order(self.epoch)
        skip, self.skip_batches = self.skip_batches, 0
        batches = len(order) // self.batch_size  # generation batches (an incomplete last one is dropped)
        if skip > 0 and skip >= batches * self.repeat_count:
            # Resumed at the very end of an epoch: carry on with the next one, whose iterator creation the
            # uninterrupted run also made after the checkpoint (no random state to redo).
            self.epoch_offset += 1
            self.position.epoch, self.position.batches_in_epoch, self.redraw_after_resume = self.epoch + 1, 0, False
            order, skip = self.epoch_order(self.epoch), 0
            batches = len(order) // self.batch_size
        if len(order) < self.batch_size:  # the Trainer would stop with a message that does not name the cause
            warnings.warn(
                f"Epoch {self.epoch} has no generation batch to roll out: {len(set(order))} of {self.num_samples} "
                "prompts are left in its pool after forward pruning, fewer than one generation batch "
                f"({self.batch_size} prompts), so training stops at this epoch. Train on more prompts, prune later (a "
                "larger `prune_solved_after` or `prune_unsolved_after`), explore more (`prune_explore_fraction`, or "
                "`prune_target_dead_frac` with `prune_exploration='adaptive'`), or turn pruning (`prune_solved`, "
                "`prune_unsolved`) off.",
                LZEWarning,
                stacklevel=2,
            )
        for b in range(batches):
            chunk = order[b * self.batch_size : (b + 1) * self.batch_size]
            for _ in range(self.repeat_count):
                if skip > 0:
                    skip -= 1
                    continue
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index
