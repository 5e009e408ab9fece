"""Train sampler: TRL's `RepeatSampler` order, made resumable, with each epoch's prompts asked of one planner; and the
look-ahead of fused rounds, the generation batches it will hand next."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from trl.trainer.utils import RepeatSampler

from ..common.epochs import EpochOrders
from ..method.errors import LZEWarning
from ..method.prompt_keys import PromptKeys
from ..method.run import DataPosition


class LZERepeatSampler(RepeatSampler):
    """
    TRL's `RepeatSampler` (a subclass) on map-style datasets, resumable: the permutation of epoch `e` (from the
    Trainer's `set_epoch`) is the one TRL's draws, as a function of `(seed, e)`; `tests/trainer/test_sampler.py` pins
    it.

    Args:
        num_samples, mini_repeat_count, batch_size, repeat_count, shuffle, seed:
            Those of TRL's `RepeatSampler` (the dataset's size for its `data_source`).
        planner ([`~lze_trl.method.run.LZERun`], *optional*):
            Turns each epoch's permutation into the dataset indices it rolls out (`plan_epoch(epoch, order)`), once
            per epoch.
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
        planner: Any = None,
        position: DataPosition | None = None,
        resuming: bool = False,
    ) -> None:
        # TRL's fields (`num_samples`, `batch_size`, ... read by its `__len__`); its own generator is not used: the
        # permutations come from `EpochOrders`, TRL's order as a function of (seed, epoch).
        super().__init__(range(num_samples), mini_repeat_count, batch_size, repeat_count, shuffle, seed)
        self.orders = EpochOrders(num_samples, seed, shuffle)
        self.planner = planner
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
            position.plan = order if self.planner is None else np.asarray(self.planner.plan_epoch(epoch, order))
            self._planned = epoch
        return position.plan.tolist()

    def generation_batch(self, index: int, last_epoch: int | None = None) -> np.ndarray | None:
        """The dataset indices (one per group) of generation batch `index` of the current epoch, counting on into the
        next epochs where their prompts are already decided (their permutations; not where the planner decides them
        at their start) and not past `last_epoch`; `None` where they are not decided or do not exist."""
        order, epoch = self.position.plan, self.epoch
        if order is None:
            return None
        planned = self.planner is not None and self.planner.plans_rollouts
        while index >= len(order) // self.batch_size:
            if planned or len(order) < self.batch_size or (last_epoch is not None and epoch + 1 > last_epoch):
                return None
            index, epoch = index - len(order) // self.batch_size, epoch + 1
            order = self.permutation(epoch)
        return np.asarray(order[index * self.batch_size : (index + 1) * self.batch_size], dtype=np.int64)

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
                "larger `prune_solved_after` or `prune_unsolved_after`), explore more (`prune_revisit_fraction`, or "
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


@dataclass
class SamplerLookahead:
    """
    Fused rounds' [`~lze_trl.rounds.fused.Lookahead`] on [`LZERepeatSampler`]: the generation batches the sampler will
    hand after the one TRL handed now, read from its epoch's plan, this process's share cut as TRL's data loader cuts
    it (the processes' consecutive slices of the generation batch, checked against the batch handed now: where they
    differ, no batch is drawn ahead).

    Args:
        sampler ([`LZERepeatSampler`]): The run's sampler.
        dataset: The map-style train dataset.
        keys ([`~lze_trl.method.prompt_keys.PromptKeys`]): The run's prompt keys.
        handed (`list[dict]`): The inputs TRL handed now (this process's, each prompt `num_generations` times).
        num_generations (`int`): Rollouts of a complete group (TRL's group size).
        process, processes (`int`): This process, and how many there are.
        batches_left (`int`): Generation batches the run trains after this one.
        last_epoch (`int` or `None`): The run's last epoch, where it ends by epochs.
        warn (`Callable[[str], None]`, *optional*): Told when the batch handed now is not the sampler's as read here
            (nothing is then drawn ahead: each step starts its batches anew, at the cost of serial rounds' calls).
    """

    sampler: LZERepeatSampler
    dataset: Any
    keys: PromptKeys
    handed: list[dict]
    num_generations: int
    process: int
    processes: int
    batches_left: int
    last_epoch: int | None = None
    warn: Callable[[str], None] | None = None

    def _mine(self, groups: np.ndarray) -> np.ndarray:
        return groups.reshape(self.processes, -1)[self.process]

    def batch(self, ahead: int) -> list[dict] | None:
        if ahead > self.batches_left:
            return None
        index = (self.sampler.position.batches_in_epoch - 1) // self.sampler.repeat_count  # the one handed now
        now = self.sampler.generation_batch(index)
        G = self.num_generations
        if now is None or len(now) % self.processes:
            return None
        handed = np.repeat(self.keys.dataset_keys[self._mine(now)], G)
        if not np.array_equal(handed, self.keys.of(self.handed)):
            if self.warn is not None:
                self.warn(
                    "Fused rounds cannot read the sampler's next generation batches: the batch TRL handed is not the "
                    "one read from the sampler's plan (a data loader that cuts batches otherwise). Each step starts "
                    "its batches anew, with as many generation calls as serial rounds make (lze/generation_calls)."
                )
            return None
        groups = self.sampler.generation_batch(index + ahead, self.last_epoch)
        if groups is None:
            return None
        columns = list(self.handed[0])  # what TRL's data loader hands of a row
        rows = [self.dataset[int(i)] for i in self._mine(groups)]
        return [{c: row[c] for c in columns} for row in rows for _ in range(G)]

    def same(self, drawn: list[dict], handed: list[dict]) -> bool:
        # the columns TRL handed: a drawn row has gained a rollout_func's extra fields since
        columns = list(handed[0])
        if len(drawn) != len(handed) or any(c not in drawn[0] for c in columns):
            return False
        return np.array_equal(self.keys.of([{c: row[c] for c in columns} for row in drawn]), self.keys.of(handed))
