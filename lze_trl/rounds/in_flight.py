"""A generation batch in flight, for both trainers: [`BatchInFlight`] and the rule that moves it from round to round.

A batch is drawn, its groups get the schedule's first round, and each time a round has arrived whole
([`round_done`]) the run's round policy chooses the groups that go on, evened out over the processes
([`even_out`]), and the next round begins, until the schedule's last round completes the batch. The synchronous
trainer's serial and fused rounds ([`~lze_trl.rounds.generation_batch.InFlight`]) and the async trainer's window
([`~lze_trl.async_grpo.window.OpenBatch`]) keep their batches as subclasses of [`BatchInFlight`] and move them with
[`round_done`]: what they add is how the rollouts travel (TRL's rows on each process, or the worker's tagged rows).
Plain numpy, no TRL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..method.round_policies import RoundsState


@dataclass
class BatchInFlight:
    """
    A generation batch in flight.

    Attributes:
        round_last (`int`):
            The last rollout (exclusive) of the round in flight: each group going on has its rollouts
            `state.rollouts_so_far` to `round_last` generated in it.
        state ([`~lze_trl.method.round_policies.RoundsState`] or `None`):
            What is known of the batch, every process's groups in order (`None` before the synchronous trainer's first
            round, whose rollouts bring the groups' prompt keys).
    """

    round_last: int
    state: RoundsState | None = None

    @property
    def complete(self) -> bool:
        """Whether the groups going on have every rollout (the schedule's last round has arrived)."""
        return self.state is not None and self.state.remaining == 0


def round_done(batch: BatchInFlight, run: Any, processes: int) -> bool:
    """Moves `batch` past its round in flight, which has arrived whole (its rewards are in `batch.state`): unless that
    completes the batch, the round policy of `run` ([`~lze_trl.method.run.LZERun`]) chooses the groups that go on,
    evened out over `processes`, and the next round of the policy's schedule begins. Returns whether the batch is
    complete."""
    state, schedule = batch.state, run.round_policy.schedule
    state.rollouts_so_far = batch.round_last
    if batch.complete:
        return True
    chosen, priority = run.round_policy.choose(run, state)
    state.going_on = even_out(chosen, priority, processes, state.going_on)
    batch.round_last = schedule[schedule.index(state.rollouts_so_far) + 1]
    return False


def even_out(
    chosen: np.ndarray, priority: np.ndarray, num_processes: int, going_on: np.ndarray | None = None
) -> np.ndarray:
    """The choice with `max(ceil(chosen / num_processes), 1)` groups on every process (groups split evenly over the
    processes, in order), dropping a process's lowest-priority chosen groups or adding its highest-priority others
    among those `going_on` (all by default; every process holds as many of them as the count needs, since the previous
    round was evened out alike)."""
    going_on = np.ones(len(chosen), dtype=bool) if going_on is None else going_on
    per_process, eligible = (chosen & going_on).reshape(num_processes, -1), going_on.reshape(num_processes, -1)
    priority = priority.reshape(num_processes, -1)
    count = max(math.ceil(int(per_process.sum()) / num_processes), 1)
    out = np.zeros_like(per_process)
    for p in range(num_processes):
        order = np.lexsort((-priority[p], ~eligible[p], ~per_process[p]))  # the chosen, then the others going on
        out[p, order[:count]] = True
    return out.reshape(-1)
