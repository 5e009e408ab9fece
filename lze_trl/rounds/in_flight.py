"""A generation batch in flight, for both trainers: [`BatchInFlight`] and the rule that moves it from round to round.

A batch is drawn, its groups get the schedule's first round, and each time a round has arrived whole
([`round_done`]) the run's round policy chooses the groups that go on, evened out over the processes
([`even_out`]), and the next round begins, until the schedule's last round completes the batch. The synchronous
trainer's serial and fused rounds ([`~lze_trl.rounds.generation_batch.InFlight`]) and the async trainer's window
([`~lze_trl.async_grpo.window.OpenBatch`]) keep their batches as subclasses of [`BatchInFlight`] and move them with
[`round_done`]: what they add is how the rollouts travel (TRL's rows on each process, or the worker's tagged rows).
Their checkpoint file is one too: [`save_in_flight`] writes what a process keeps of its batches in flight into
`lze_in_flight_<process>.pt` of each checkpoint, and [`load_in_flight`] takes it back with the one set of refusals
(the file missing, or written by another number of processes). Plain numpy and torch's file format, no TRL.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..method.checkpoint import LZEStateError, atomic_write
from ..method.round_policies import RoundsState


IN_FLIGHT_FILE = "lze_in_flight_{process}.pt"
"""The batches in flight of one process, in a checkpoint folder."""


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


def save_in_flight(folder: str, process: int, num_processes: int, batches: Any) -> None:
    """Writes `batches`, what `process` keeps of its generation batches in flight (the synchronous trainer's
    [`~lze_trl.rounds.fused.RoundPipeline`], the async window's arrays and counters), into the checkpoint `folder`,
    atomically, with the number of processes that keep them."""
    payload = {"batches": batches, "num_processes": num_processes}
    atomic_write(os.path.join(folder, IN_FLIGHT_FILE.format(process=process)), lambda f: torch.save(payload, f))


def load_in_flight(folder: str, process: int, num_processes: int, needed_by: str) -> Any:
    """What [`save_in_flight`] wrote for `process` in the checkpoint `folder`; raises an
    [`~lze_trl.method.checkpoint.LZEStateError`] when the file is missing (`needed_by` names the run that needs it) or
    was written by another number of processes."""
    path = os.path.join(folder, IN_FLIGHT_FILE.format(process=process))
    if not os.path.exists(path):
        raise LZEStateError(
            f"{path!r} is missing: the checkpoint holds no batches in flight for process {process}, which {needed_by} "
            "needs (a checkpoint of another kind of run, or an incomplete one)."
        )
    payload = torch.load(path, weights_only=False)  # the run's own rows (any object TRL generated), not only tensors
    if payload["num_processes"] != num_processes:
        raise LZEStateError(
            f"The batches in flight in {folder!r} were kept by {payload['num_processes']} processes, not "
            f"{num_processes}: each process keeps its own; resume with the same number of processes."
        )
    return payload["batches"]
