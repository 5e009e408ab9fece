"""Train sampler: TRL's `RepeatSampler` order, made resumable, with each epoch's prompts asked of one planner.

A subclass of TRL's `RepeatSampler` (same fields and `__len__`); `__iter__` lays the indices out as TRL's does from
the epoch's planned rows and a rewindable generator (pinned against TRL's sampler by `tests/test_sampler.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
import torch
from trl.trainer.utils import RepeatSampler

from .guards import LZEWarning


class EpochPlanner(Protocol):
    """
    What the sampler asks for each epoch's rows ([`~lze_trl.run.LZERun`] is one).

    `plan_epoch(epoch, order)` gets the epoch's permutation of the dataset rows and returns the rows the epoch rolls
    out, in order, one entry per group (forward pruning, a selector's plan and rollout-side planning, composed in
    order). A planner may also have `plan_batch(epoch, batch, order, cursor, size)`, which decides each generation
    batch only when the data loader asks for it: it returns the batch's rows (or `None`, which ends the epoch) and
    the new position in the epoch's order.
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
    the epoch's iteration starts; with a planner's `plan_batch`, each generation batch is asked for when the data
    loader reaches it. What the epoch decided (its rows, or its batches so far and the position in its order) is
    part of [`~LZERepeatSampler.state_dict`], so a resumed run replays it exactly.

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
        planner ([`EpochPlanner`], *optional*):
            Decides each epoch's rows; `None` rolls every row out once per epoch.
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
    ) -> None:
        # TRL's fields (`num_samples`, `batch_size`, ... read by its `__len__`); its own generator is not used: the
        # permutations come from `self._generator`, rewound per epoch (see `permutation`).
        super().__init__(range(num_samples), mini_repeat_count, batch_size, repeat_count, shuffle, seed)
        self.planner = planner
        self.plan_batch = getattr(planner, "plan_batch", None)
        self.epoch = 0
        self.epoch_offset = 0
        self.skip_batches = 0  # dataloader batches to skip at the start of the next iteration (resume)
        self._resume_epoch: int | None = None
        self._restored: dict[str, Any] | None = None
        self.resumed_at_epoch_end = False
        # What the current epoch decided: its rows (per-epoch planning), or its batches so far, the position in its
        # order and whether the order ran out (per-batch planning). Saved in checkpoints: the planner's state moves
        # on during the epoch, so these cannot be re-derived.
        self.epoch_rows: np.ndarray | None = None
        self.epoch_record: list[list[int]] = []
        self.epoch_cursor = 0
        self.epoch_exhausted = False
        self.skipped_groups = 0  # groups of earlier epochs left out by the planner (rows the dataset has, not rolled)
        self._rows_epoch: int | None = None  # the epoch `epoch_rows` belongs to
        self._generator = torch.Generator()
        self._generator.manual_seed(seed)
        self._epochs_drawn = 0
        self._last_perm: tuple[int, list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Called by the Trainer before each epoch; after [`~LZERepeatSampler.resume`], epochs count from there."""
        if self._resume_epoch is not None:
            self.epoch_offset = self._resume_epoch - epoch
            self._resume_epoch = None
        self.epoch = epoch + self.epoch_offset

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
        if self._restored is None and epoch != self._rows_epoch:
            self.skipped_groups = self.groups_skipped  # the epoch that ends
        self._rows_epoch = epoch
        perm = self.permutation(epoch)
        restored, self._restored = self._restored, None
        if restored is not None:
            self.epoch_rows = restored["rows"]
            self.epoch_record = [list(map(int, chunk)) for chunk in restored["record"]]
            self.epoch_cursor, self.epoch_exhausted = restored["cursor"], restored["exhausted"]
        else:
            rows = np.asarray(perm, dtype=np.int64)
            self.epoch_rows = rows if self.planner is None else np.asarray(self.planner.plan_epoch(epoch, rows))
            self.epoch_record, self.epoch_cursor, self.epoch_exhausted = [], 0, False
        return self.epoch_rows.tolist()

    @property
    def groups_skipped(self) -> int:
        """
        Groups of `num_generations` rollouts not generated so far: per epoch, the dataset's rows the planner left out
        of it and, when planned per batch, the rows of its order walked past without being taken.
        """
        if self.epoch_rows is None:
            return self.skipped_groups
        current = self.num_samples - len(self.epoch_rows)
        if self.plan_batch is not None:
            current += self.epoch_cursor - sum(len(chunk) for chunk in self.epoch_record)
        return self.skipped_groups + max(current, 0)

    def _batches(self, order: list[int]) -> Iterator[list[int]]:
        """The epoch's generation batches: fixed cuts of its order, or the recorded ones then one decision each."""
        if self.plan_batch is None:
            for b in range(len(order) // self.batch_size):
                yield order[b * self.batch_size : (b + 1) * self.batch_size]
            return
        yield from list(self.epoch_record)
        while not self.epoch_exhausted:
            chunk, cursor = self.plan_batch(
                self.epoch, len(self.epoch_record), order, self.epoch_cursor, self.batch_size
            )
            if chunk is None:  # the epoch ends; the rows left in its order were not walked past, only not reached
                self.epoch_exhausted = True
                return
            self.epoch_cursor = cursor
            self.epoch_record.append(list(map(int, chunk)))
            yield self.epoch_record[-1]

    def _epoch_units(self) -> int:
        """Dataloader batches (generation batches times `repeat_count`) of the current epoch, if known now."""
        if self.plan_batch is None:
            return len(self.epoch_rows) // self.batch_size * self.repeat_count
        return len(self.epoch_record) * self.repeat_count if self.epoch_exhausted else -1

    def __iter__(self) -> Iterator[int]:
        order = self.epoch_order(self.epoch)
        skip, self.skip_batches = self.skip_batches, 0
        if skip > 0 and skip >= self._epoch_units() >= 0:
            # Resumed at the very end of an epoch: carry on with the next one.
            self.resumed_at_epoch_end = True
            self.epoch_offset += 1
            self.epoch += 1
            order = self.epoch_order(self.epoch)
            skip = 0
        if len(order) < self.batch_size and not self.epoch_record:
            self._warn_empty_epoch(len(set(order)))
        for chunk in self._batches(order):
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
            f"in its pool after forward pruning and rollout-side selection, fewer than one generation batch "
            f"({self.batch_size} prompts), so training stops at this epoch. Train on more prompts, prune later (a "
            "larger `prune_solved_after`), replay more (`prune_replay_fraction`), or turn pruning (`prune_solved`) or "
            "`rollout_filter` off.",
            LZEWarning,
            stacklevel=3,
        )

    # ----------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, np.ndarray]:
        """What the current epoch decided, and the groups earlier epochs left out."""
        rows = self.epoch_rows if self.epoch_rows is not None else np.empty(0, dtype=np.int64)
        width = max((len(chunk) for chunk in self.epoch_record), default=0)
        record = np.full((len(self.epoch_record), width), -1, dtype=np.int64)
        for i, chunk in enumerate(self.epoch_record):
            record[i, : len(chunk)] = chunk
        return {
            "rows": np.asarray(rows, dtype=np.int64),
            "has_rows": np.asarray(self.epoch_rows is not None),
            "record": record,
            "stream": np.asarray([self.epoch_cursor, int(self.epoch_exhausted), self.skipped_groups, self.epoch]),
        }

    def resume(self, epoch: int, batches_done: int, state: dict[str, np.ndarray] | None = None) -> None:
        """
        Continues at `epoch`, skipping the first `batches_done` dataloader batches of it (the Trainer's micro-steps
        in the epoch: a dataloader batch is one of the `repeat_count` repetitions of a generation batch), with what
        the epoch had decided (`state`, from [`~LZERepeatSampler.state_dict`]).
        """
        self._resume_epoch = epoch
        self.epoch = epoch
        self.skip_batches = batches_done
        if state is None or not bool(state["has_rows"]):
            return
        cursor, exhausted, skipped, rows_epoch = (int(v) for v in state["stream"])
        self.skipped_groups, self._rows_epoch = skipped, rows_epoch
        self._restored = {
            "rows": np.asarray(state["rows"], dtype=np.int64),
            "record": [[int(i) for i in row if i >= 0] for row in state["record"]],
            "cursor": cursor,
            "exhausted": bool(exhausted),
        }
