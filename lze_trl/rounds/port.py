"""The port between the rounds and TRL ([`TRLPort`]), and what else a generation batch is given ([`RoundsContext`]):
everything the rounds (`serial.py`, `fused.py`) know of the trainer. No TRL import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .batching import Batch
from .rollouts import GeneratedRows, Rollouts


if TYPE_CHECKING:
    from ..method.run import LZERun


class TRLPort(Protocol):
    """
    The one port between the rounds and TRL: what a generation batch asks of the trainer, with explicit arguments and
    return values, implemented once by [`~lze_trl.grpo.adapter.TRLAdapter`] (generation and update rows, through TRL's
    `_generate_and_score_completions`), [`LZEGRPOTrainer`] (TRL's reward weights) and
    [`~lze_trl.common.state_owner.LZEStateOwner`] (TRL's metric lists). The round logic reads and changes nothing else
    of the trainer: the run, the processes and TRL's step come in a [`RoundsContext`], fused rounds' batches in flight
    as a [`~lze_trl.rounds.fused.RoundPipeline`].
    """

    def generate_rollouts(
        self, inputs: list[dict], num_rollouts: int, stale: list[bool] | None = None
    ) -> Rollouts: ...  # generate these requests, reward them once

    def update_rows(
        self,
        inputs: list[dict],
        served: tuple[GeneratedRows, np.ndarray] | None = None,
        stale: np.ndarray | None = None,
    ) -> tuple[Batch, Any]: ...  # TRL's update rows of these rollouts

    def gathered_prompt_keys(self, inputs: list[dict]) -> np.ndarray: ...  # every process's rows' prompt keys

    def total_rewards(self, rewards: np.ndarray) -> np.ndarray: ...  # each rollout's reward, as TRL weighs them

    def log_lze(self, metrics: dict[str, float]) -> None: ...  # into TRL's metrics of the step


@dataclass(frozen=True)
class RoundsContext:
    """
    What a generation batch is given besides the [`TRLPort`], read once from the trainer per batch.

    Attributes:
        run ([`~lze_trl.method.run.LZERun`]): The run's LZE state and decisions.
        num_generations (`int`): Rollouts of a complete group.
        accelerator: The processes (`num_processes`, `process_index`) and their collectives (`gather`).
        steps_per_generation (`int`): TRL's optimizer steps per generation batch (the update rows' multiple).
        global_step (`int`): The Trainer's optimizer step, for the selection log.
    """

    run: LZERun
    num_generations: int
    accelerator: Any
    steps_per_generation: int
    global_step: int

    @property
    def processes(self) -> int:
        return self.accelerator.num_processes

    @property
    def process(self) -> int:
        return self.accelerator.process_index
