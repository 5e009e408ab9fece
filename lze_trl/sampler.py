"""Train sampler: TRL's `RepeatSampler` order, made resumable, with each epoch's prompts asked of one planner.

A subclass of TRL's `RepeatSampler` (same fields and `__len__`); `__iter__` lays the indices out as TRL's does from
the epoch's planned rows and a rewindable generator (pinned against TRL's sampler by `tests/test_sampler.py`). Where
training stands in the data is one object, [`~lze_trl.run.DataPosition`], saved with the LZE state and restored from
it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Protocol

import numpy as np
import torch
from trl.trainer.utils import RepeatSampler

from .guards import LZEWarning
from .run import DataPosition


class EpochPlanner(Protocol):
    """
    What the sampler asks for each epoch's rows ([`~lze_trl.run.LZERun`] is one): `plan_epoch(epoch, order)` gets the
    epoch's permutation of the dataset rows and returns the rows the epoch rolls out, in order, one entry per group.
    """

    def plan_epoch(self, epoch: int, order: np.ndarray) -> np.ndarray: ...


class LZERepeatSampler(RepeatSampler):
    """
    Drop-in for TRL's `RepeatSampler` on map-style datasets (a subclass: `isinstance` checks and `len` hold).

    Without a planner it yields exactly TRL's indices: every epoch draws one permutation from a generator seeded once
    with `seed`, cuts it into batches of `batch_size` prompts (dropping an incomplete last batch), and yields each
    batch `repeat_count` times with every index repeated `mini_repeat_count` times. Unlike TRL's sampler, the
    permutation of epoch `e` is a function of `(seed, e)` (the generator is re-wound when needed), with `e` taken
    from the `set_epoch(e)` call the Trainer makes, so a run resumed from a checkpoint sees the same order.

    With a planner ([`EpochPlanner`]), the rows of epoch `e` are the planner's answer for that permutation, asked when
    the epoch's iteration starts and kept in the [`DataPosition`], so a resumed run replays them exactly.

    Args:
        num_samples, mini_repeat_count, batch_size, repeat_count, shuffle, seed:
            Those of TRL's `RepeatSampler` (the dataset's size for its `data_source`).
        planner ([`EpochPlanner`], *optional*):
            Decides each epoch's rows; `None` rolls every row out once per epoch.
        position ([`~lze_trl.run.DataPosition`], *optional*):
            Where training stands; one with `resumed_from` set makes the sampler continue from it (its epoch, its
            rows, past its `batches_in_epoch`). Defaults to a fresh one.
    """

    def __init__(
        self,
        num_samples: int,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        planner: EpochPlanner | None = None,
        position: DataPosition | None = None,
    ) -> None:
        # TRL's fields (`num_samples`, `batch_size`, ... read by its `__len__`); its own generator is not used: the
        # permutations come from `self._generator`, rewound per epoch (see `permutation`).
        super().__init__(range(num_samples), mini_repeat_count, batch_size, repeat_count, shuffle, seed)
        self.planner = planner
        self.position = position if position is not None else DataPosition()
        resuming = self.position.resumed_from is not None
        self.epoch_offset: int | None = None if resuming else 0  # set by the first `set_epoch` after a resume
        self.skip_batches = self.position.batches_in_epoch if resuming else 0
        self._planned = self.position.epoch if resuming and self.position.rows is not None else None
        self._generator = torch.Generator()
        self._generator.manual_seed(seed)
        self._epochs_drawn = 0
        self._last_perm: tuple[int, list[int]] | None = None

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
        if not self.shuffle:
            return list(range(self.num_samples))
        if self._last_perm is not None and self._last_perm[0] == epoch:
            return self._last_perm[1]
        if self._epochs_drawn > epoch:
            self._generator.manual_seed(self.seed)
            self._epochs_drawn = 0
        while self._epochs_drawn <= epoch:
            perm = torch.randperm(self.num_samples, generator=self._generator).tolist()
            self._epochs_drawn += 1
        self._last_perm = (epoch, perm)
        return perm

    def epoch_order(self, epoch: int) -> list[int]:
        """The rows of `epoch` in sampling order (one entry per group), decided now (or restored)."""
        position = self.position
        if self._planned != epoch:
            if position.rows is not None:
                position.skipped_groups = position.groups_skipped(self.num_samples)  # the epoch that ends
            rows = np.asarray(self.permutation(epoch), dtype=np.int64)
            position.rows = rows if self.planner is None else np.asarray(self.planner.plan_epoch(epoch, rows))
            self._planned = epoch
        return position.rows.tolist()

    def __iter__(self) -> Iterator[int]:
        order = self.epoch_order(self.epoch)
        skip, self.skip_batches = self.skip_batches, 0
        batches = len(order) // self.batch_size  # generation batches (an incomplete last one is dropped)
        if skip > 0 and skip >= batches * self.repeat_count:
            # Resumed at the very end of an epoch: carry on with the next one, whose iterator creation the
            # uninterrupted run also made after the checkpoint (no random state to redo).
            self.epoch_offset += 1
            self.position.epoch, self.position.batches_in_epoch, self.position.resumed_from = self.epoch + 1, 0, None
            order, skip = self.epoch_order(self.epoch), 0
            batches = len(order) // self.batch_size
        if len(order) < self.batch_size:
            self._warn_empty_epoch(len(set(order)))
        for b in range(batches):
            chunk = order[b * self.batch_size : (b + 1) * self.batch_size]
            for _ in range(self.repeat_count):
                if skip > 0:
                    skip -= 1
                    continue
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def _warn_empty_epoch(self, pool: int) -> None:
        """Says why an epoch yields no generation batch (the Trainer then stops with a message about iterable
        datasets, which does not name the cause)."""
        warnings.warn(
            f"Epoch {self.epoch} has no generation batch to roll out: {pool} of {self.num_samples} prompts are left "
            f"in its pool after forward pruning, fewer than one generation batch ({self.batch_size} prompts), so "
            "training stops at this epoch. Train on more prompts, prune later (a larger `prune_solved_after`), "
            "revisit more (`prune_revisit_fraction`), or turn pruning (`prune_solved`) off.",
            LZEWarning,
            stacklevel=3,
        )
