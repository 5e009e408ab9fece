"""The train sampler of the rollout filter's per-batch planning (`rollout_filter_granularity="batch"`): each generation
batch is decided when the data loader reaches it, and what the epoch decided so far is saved with the run's state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lze_trl.sampler import LZERepeatSampler


@dataclass
class BatchRecord:
    """What the current epoch decided batch by batch: its batches so far, the position in its order, whether the
    order ran out. Saved with the run's state (the planner's state moves on during the epoch: it cannot be
    re-derived)."""

    epoch: int = -1
    batches: list[list[int]] = field(default_factory=list)
    cursor: int = 0
    exhausted: bool = False

    def state_dict(self) -> dict[str, np.ndarray]:
        width = max((len(chunk) for chunk in self.batches), default=0)
        record = np.full((len(self.batches), width), -1, dtype=np.int64)
        for i, chunk in enumerate(self.batches):
            record[i, : len(chunk)] = chunk
        return {"batches": record, "stream": np.asarray([self.epoch, self.cursor, int(self.exhausted)])}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.epoch, self.cursor, exhausted = (int(v) for v in state["stream"])
        self.exhausted = bool(exhausted)
        self.batches = [[int(i) for i in row if i >= 0] for row in state["batches"]]


class BatchPlanningSampler(LZERepeatSampler):
    """
    [`~lze_trl.sampler.LZERepeatSampler`] whose generation batches are decided one at a time by `plan_batch(epoch,
    batch, order, cursor, size)`, which returns the batch's rows (or `None`, which ends the epoch) and the new
    position in the epoch's order. The rows of the order walked past without being taken count as skipped groups.

    Args:
        plan_batch (`Callable`):
            The per-batch planner.
        record ([`BatchRecord`]):
            What the epoch decided so far (shared with the run's saved state).
        *args, **kwargs:
            Those of [`~lze_trl.sampler.LZERepeatSampler`].
    """

    def __init__(self, *args: Any, plan_batch: Callable, record: BatchRecord, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_batch, self.record = plan_batch, record

    def _batches(self, order: list[int]) -> Iterator[list[int]]:
        record = self.record
        if record.epoch != self.epoch:
            record.epoch, record.batches, record.cursor, record.exhausted = self.epoch, [], 0, False
        yield from list(record.batches)
        while not record.exhausted:
            chunk, cursor = self.plan_batch(self.epoch, len(record.batches), order, record.cursor, self.batch_size)
            if chunk is None:  # the epoch ends; the rows left in its order were not walked past, only not reached
                record.exhausted = True
                return
            self.position.skipped_groups += cursor - record.cursor - len(chunk)
            record.cursor = cursor
            record.batches.append(list(map(int, chunk)))
            yield record.batches[-1]

    def _epoch_units(self, order: list[int]) -> int:
        if self.record.epoch != self.epoch:
            return -1
        return len(self.record.batches) * self.repeat_count if self.record.exhausted else -1
