"""Train sampler: TRL's `RepeatSampler` order, made resumable, that skips pruned prompts.

A subclass of TRL's `RepeatSampler` (same fields and `__len__`); `__iter__` lays the indices out as TRL's does from a
per-epoch pool and a rewindable generator (pinned against TRL's sampler by `tests/test_sampler.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
import torch
from trl.trainer.utils import RepeatSampler

from .pruning import PromptPruner


class LZERepeatSampler(RepeatSampler):
    """
    Drop-in for TRL's `RepeatSampler` on map-style datasets (a subclass: `isinstance` checks and `len` hold).

    Without pruning it yields exactly TRL's indices: every epoch draws one permutation from a generator seeded once
    with `seed`, cuts it into batches of `batch_size` prompts (dropping an incomplete last batch), and yields each
    batch `repeat_count` times with every index repeated `mini_repeat_count` times. Unlike TRL's sampler, the
    permutation of epoch `e` is a function of `(seed, e)` (the generator is re-wound when needed), with `e` taken
    from the `set_epoch(e)` call the Trainer makes, so a run resumed from a checkpoint sees the same order.

    With a [`PromptPruner`], the pool of epoch `e` is decided when the epoch's iteration starts: pruned prompts are
    removed from the permutation (their order among the others is kept) except for the epoch's replays. With
    `rollout_counts`, prompt `i` then appears `counts[i]` times in the epoch (as that many groups): the epoch's order
    is the permutation's pass over the prompts with at least one group, then its pass over those with at least two,
    and so on, so the copies of a prompt are spread over the epoch (two may still share a generation batch when
    only a few prompts have several).

    Args:
        num_samples (`int`):
            Size of the dataset.
        mini_repeat_count (`int`):
            Times each index is repeated in a row (the number of generations).
        batch_size (`int`, *optional*, defaults to `1`):
            Unique prompts per generation batch.
        repeat_count (`int`, *optional*, defaults to `1`):
            Times each batch is repeated (`num_iterations * steps_per_generation`).
        shuffle (`bool`, *optional*, defaults to `True`):
            Whether to permute the dataset each epoch.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the permutations.
        pruner ([`PromptPruner`], *optional*):
            Prune state deciding each epoch's pool; `None` keeps every prompt.
        rollout_filter (`Callable[[int, int], np.ndarray | None]`, *optional*):
            Further restriction of the pool: called with `(num_samples, epoch)`, returns a boolean mask or `None`
            (a selector's [`~Selector.rollout_mask`]).
        rollout_counts (`Callable[[int, int], np.ndarray | None]`, *optional*):
            Groups per prompt: called with `(num_samples, epoch)`, returns non-negative integer counts or `None` (a
            selector's [`~Selector.rollout_counts`]).
        rollout_planner (`Callable[..., np.ndarray]`, *optional*):
            Rollout-side selection applied last: called as `(epoch, available, exempt=replays)` with the pool left by
            pruning and `rollout_filter` (`None`: every prompt) and the epoch's pruning replays, returns the boolean
            mask of prompts the epoch rolls out ([`~lze_trl.rollout_filter.RolloutFilter.plan_epoch`]).
        batch_planner (`Callable[..., tuple[list[int] | None, int]]`, *optional*):
            Rollout-side selection per generation batch, instead of `rollout_planner`: each generation batch is
            decided only when the data loader asks for its first index, called as `(epoch, batch, order, cursor,
            batch_size, exempt=replays)` with the epoch's pool in order, and returns the batch's prompts (or `None`,
            which ends the epoch) and the new position in the order
            ([`~lze_trl.rollout_filter.RolloutFilter.plan_batch`]). Decisions thus use the state of the groups
            scored up to then (one or two generation batches behind, as the data loader reads ahead). The batches
            yielded in the epoch and the position are saved in checkpoints, so a resumed run replays them exactly.
        row_ids (`np.ndarray`, *optional*):
            The prompt id of every row ([`~lze_trl.prompt_ids.PromptIds.row_ids`]): the masks and counts above are
            over prompt ids, and rows repeating a prompt follow its id. `None`: every row is its own prompt.
    """

    def __init__(
        self,
        num_samples: int,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        pruner: PromptPruner | None = None,
        rollout_filter: Callable[[int, int], np.ndarray | None] | None = None,
        rollout_counts: Callable[[int, int], np.ndarray | None] | None = None,
        rollout_planner: Callable[..., np.ndarray] | None = None,
        batch_planner: Callable[..., tuple[list[int] | None, int]] | None = None,
        row_ids: np.ndarray | None = None,
    ) -> None:
        # TRL's fields (`num_samples`, `batch_size`, ... read by its `__len__`); its own generator is not used: the
        # permutations come from `self._generator`, rewound per epoch (see `permutation`).
        super().__init__(range(num_samples), mini_repeat_count, batch_size, repeat_count, shuffle, seed)
        self.pruner = pruner
        self.rollout_filter = rollout_filter
        self.rollout_counts = rollout_counts
        self.rollout_planner = rollout_planner
        self.batch_planner = batch_planner
        self.row_ids = row_ids
        # Per-batch planning (`batch_planner`): the epoch's batches so far, the position in its order, and whether
        # the order ran out; saved in checkpoints (the state moves on, the decisions cannot be re-derived).
        self.epoch_record: list[list[int]] = []
        self.epoch_cursor = 0
        self.epoch_exhausted = False
        self._restored_stream: tuple[list[list[int]], int, bool] | None = None
        self.epoch = 0
        self.epoch_offset = 0
        self.skip_batches = 0  # dataloader batches to skip at the start of the next iteration (resume)
        self._resume_epoch: int | None = None
        # Pool of the current epoch, decided at its start (None: every prompt). Saved in checkpoints, since the
        # prune state moves on during the epoch and cannot re-derive it.
        self.epoch_keep: np.ndarray | None = None
        self._restored_keep: np.ndarray | None = None
        # Groups per prompt of the current epoch (None: one each), decided at its start and saved likewise.
        self.epoch_counts: np.ndarray | None = None
        self._restored_counts: np.ndarray | None = None
        self._restored = False
        self.resumed_at_epoch_end = False
        self._generator = torch.Generator()
        self._generator.manual_seed(seed)
        self._epochs_drawn = 0
        self._last_perm: tuple[int, list[int]] | None = None
        # What the current epoch rolls out, for metrics: prompts in its pool, prompts replayed, prompts skipped.
        self.epoch_stats = {"pool_prompts": num_samples, "replayed_prompts": 0, "skipped_prompts": 0}

    def set_epoch(self, epoch: int) -> None:
        """Called by the Trainer before each epoch; after [`~LZERepeatSampler.resume`], epochs count from there."""
        if self._resume_epoch is not None:
            self.epoch_offset = self._resume_epoch - epoch
            self._resume_epoch = None
        self.epoch = epoch + self.epoch_offset

    def resume(
        self,
        epoch: int,
        batches_done: int,
        epoch_keep: np.ndarray | None = None,
        epoch_counts: np.ndarray | None = None,
        stream: tuple[list[list[int]], int, bool] | None = None,
    ) -> None:
        """
        Continues at `epoch`, skipping the first `batches_done` dataloader batches of it.

        A dataloader batch is one of the `repeat_count` repetitions of a generation batch, so `batches_done` counts
        the Trainer's micro-steps in the epoch. `epoch_keep` is the pool the epoch started with (pruning and rollout
        masks) and `epoch_counts` its groups per prompt (`rollout_counts`), as saved in the checkpoint; with a
        `batch_planner`, `stream` is `(epoch_record, epoch_cursor, epoch_exhausted)` as saved.
        """
        self._resume_epoch = epoch
        self.epoch = epoch
        self.skip_batches = batches_done
        self._restored_keep = epoch_keep
        self._restored_counts = epoch_counts
        self._restored_stream = stream
        self._restored = True

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
        """The pool of `epoch` in sampling order (one entry per group), pool and counts decided now."""
        order = self.permutation(epoch)
        if self._restored:
            self.epoch_keep, self.epoch_counts = self._restored_keep, self._restored_counts
            stream, self._restored_stream = self._restored_stream, None
            self._restored_keep, self._restored_counts, self._restored = None, None, False
        else:
            self.epoch_keep = self._plan_pool(epoch)
            self.epoch_counts = self._plan_counts(epoch)
            stream = None
        self.epoch_record, self.epoch_cursor, self.epoch_exhausted = stream if stream is not None else ([], 0, False)
        self.epoch_record = [list(chunk) for chunk in self.epoch_record]
        if self.epoch_keep is not None:
            order = [i for i in order if self.epoch_keep[i]]
        if self.epoch_counts is not None:
            counts = self.epoch_counts
            order = [i for copy in range(int(counts.max(initial=0))) for i in order if counts[i] > copy]
        distinct = len(set(order)) if self.epoch_counts is not None else len(order)
        self.epoch_stats = {
            "pool_prompts": distinct,
            "replayed_prompts": self.pruner.num_replayed if self.pruner is not None else 0,
            "skipped_prompts": self.num_samples - distinct,
        }
        return order

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The generation batches (lists of prompt indices) of `epoch`, pool and counts decided now."""
        order = self.epoch_order(epoch)
        num_batches = len(order) // self.batch_size
        return [order[b * self.batch_size : (b + 1) * self.batch_size] for b in range(num_batches)]

    def _planned_batches(self, order: list[int]) -> Iterator[list[int]]:
        """The epoch's generation batches with a `batch_planner`: the recorded ones, then one decision per batch."""
        yield from list(self.epoch_record)
        replays = self.pruner.replayed if self.pruner is not None else None
        while not self.epoch_exhausted:
            chunk, cursor = self.batch_planner(
                self.epoch, len(self.epoch_record), order, self.epoch_cursor, self.batch_size, exempt=replays
            )
            self.epoch_cursor = cursor
            if chunk is None:
                self.epoch_exhausted = True
                return
            self.epoch_record.append(list(chunk))
            yield list(chunk)

    def _plan_counts(self, epoch: int) -> np.ndarray | None:
        counts = self.rollout_counts(self.num_samples, epoch) if self.rollout_counts is not None else None
        if counts is None:
            return None
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (self.num_samples,) or (counts < 0).any():
            raise ValueError(
                f"rollout_counts must return {self.num_samples} non-negative integers, got shape {counts.shape}."
            )
        if self.row_ids is not None:
            counts = np.where(self.row_ids == np.arange(self.num_samples), counts[self.row_ids], 0)  # once per prompt
        if self.epoch_keep is not None:
            counts = np.where(self.epoch_keep, counts, 0)
        return counts

    def _plan_pool(self, epoch: int) -> np.ndarray | None:
        keep = self.pruner.plan_epoch(epoch) if self.pruner is not None else None
        extra = self.rollout_filter(self.num_samples, epoch) if self.rollout_filter is not None else None
        if extra is not None:
            keep = extra if keep is None else keep & extra
        if self.rollout_planner is not None:
            replays = self.pruner.replayed if self.pruner is not None else None
            keep = self.rollout_planner(epoch, keep, exempt=replays)
        return keep if keep is None or self.row_ids is None else keep[self.row_ids]  # prompt ids -> rows

    def __iter__(self) -> Iterator[int]:
        if self.batch_planner is not None:
            yield from self._iter_planned()
            return
        units = [chunk for chunk in self.epoch_batches(self.epoch) for _ in range(self.repeat_count)]
        skip, self.skip_batches = self.skip_batches, 0
        if skip > 0 and skip >= len(units):
            # Resumed at the very end of an epoch: carry on with the next one.
            self.resumed_at_epoch_end = True
            self.epoch_offset += 1
            self.epoch += 1
            units = [chunk for chunk in self.epoch_batches(self.epoch) for _ in range(self.repeat_count)]
            skip = 0
        if not units:
            self._warn_empty_epoch()
        for chunk in units[skip:]:
            for index in chunk:
                for _ in range(self.mini_repeat_count):
                    yield index

    def _warn_empty_epoch(self) -> None:
        """Says why an epoch yields no generation batch (the Trainer then stops with a message about iterable
        datasets, which does not name the cause)."""
        warnings.warn(
            f"Epoch {self.epoch} has no generation batch to roll out: {self.epoch_stats['pool_prompts']} of "
            f"{self.num_samples} prompts are left in its pool after forward pruning and rollout-side selection, "
            f"fewer than one generation batch ({self.batch_size} prompts), so training stops at this epoch. Train on "
            "more prompts, prune later (a larger `prune_solved_after`), replay more (`prune_replay_fraction`), or "
            "turn pruning (`prune_solved`) or `rollout_filter` off.",
            UserWarning,
            stacklevel=3,
        )

    def _iter_planned(self) -> Iterator[int]:
        order = self.epoch_order(self.epoch)
        skip, self.skip_batches = self.skip_batches, 0
        if skip > 0 and self.epoch_exhausted and skip >= len(self.epoch_record) * self.repeat_count:
            # Resumed at the very end of an epoch: carry on with the next one.
            self.resumed_at_epoch_end = True
            self.epoch_offset += 1
            self.epoch += 1
            order = self.epoch_order(self.epoch)
            skip = 0
        if len(order) < self.batch_size and not self.epoch_record:
            self._warn_empty_epoch()
        for chunk in self._planned_batches(order):
            for _ in range(self.repeat_count):
                if skip > 0:
                    skip -= 1
                    continue
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index
