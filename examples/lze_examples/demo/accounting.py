"""Token, FLOP and time accounting of a GRPO/LZE run.

Definitions (used by the demo, the benchmark and `BENCHMARKS.md`):

- `N`: the number of model parameters, all of them (the tied embedding / LM-head matrix counted once: its LM-head
  product is real compute on every position).
- Rollout tokens: prompt tokens prefilled plus completion tokens generated, for every rollout. Generation costs
  `2 N` FLOPs per token (the forward pass only).
- Update tokens: prompt plus completion tokens (padding excluded) of every row that goes through the policy update's
  forward and backward, zero-weight rows that only even out micro-batches included (their completion is masked, their
  prompt still runs). The update costs `6 N` FLOPs per token (forward `2 N`, backward `4 N`). With `beta=0` and
  on-policy steps, TRL runs no reference-model or old-policy forward, so there is nothing else to count.
- Attention's context-dependent FLOPs are left out: sequences here are at most ~32 tokens, where they are a few
  percent of `2 N`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from trl import GRPOTrainer

from lze_trl.grpo.trainer import LZEGRPOTrainer


GENERATION_FLOPS_PER_TOKEN = 2
UPDATE_FLOPS_PER_TOKEN = 6


def count_parameters(model: Any, non_embedding: bool = False) -> int:
    """
    Number of parameters of `model`, each shared tensor counted once.

    Args:
        model (`torch.nn.Module`):
            The model.
        non_embedding (`bool`, *optional*, defaults to `False`):
            Leave out the input embedding matrix (with tied embeddings, this also leaves out the LM head).
    """
    seen, total = set(), 0
    skip = set()
    if non_embedding and hasattr(model, "get_input_embeddings"):
        skip = {id(p) for p in model.get_input_embeddings().parameters()}
    for p in model.parameters():
        if id(p) in seen or id(p) in skip:
            continue
        seen.add(id(p))
        total += p.numel()
    return total


@dataclass
class RunMeter:
    r"""
    Cumulative counters of a training run (this process's rows).

    Parameters:
        rollout_prompt_tokens (`int`):
            Prompt tokens of every rollout (prefilled by generation).
        rollout_completion_tokens (`int`):
            Completion tokens generated.
        rollouts (`int`):
            Rollouts generated.
        update_prompt_tokens (`int`):
            Prompt tokens of the rows that went through the update.
        update_completion_tokens (`int`):
            Completion tokens (loss tokens) of the rows that went through the update.
        update_forward_rows (`int`):
            Rows through the update's forward and backward, the zero-weight padding rows included (`lze/update_rows`,
            the rollouts of the kept groups, has none).
        generation_batches (`int`):
            Generation batches scored.
        rollout_seconds (`float`):
            Wall-clock in generation, reward and selection (`_generate_and_score_completions`).
        selection_seconds (`float`):
            Wall-clock in the selection machinery alone: energy scoring, the selector, the selection bookkeeping.
        step_seconds (`float`):
            Wall-clock in `training_step` (rollouts included); the update is the difference.
    """

    rollout_prompt_tokens: int = 0
    rollout_completion_tokens: int = 0
    rollouts: int = 0
    update_prompt_tokens: int = 0
    update_completion_tokens: int = 0
    update_forward_rows: int = 0
    generation_batches: int = 0
    rollout_seconds: float = 0.0
    selection_seconds: float = 0.0
    step_seconds: float = 0.0

    @property
    def rollout_processed_tokens(self) -> int:
        """Prompt + completion tokens of every rollout: what generation processes (the FLOP basis)."""
        return self.rollout_prompt_tokens + self.rollout_completion_tokens

    @property
    def update_processed_tokens(self) -> int:
        """Prompt + completion tokens of the updated rows: what the update processes (the FLOP basis). Not the
        *update tokens* of the trainer's `lze/update_tokens` and the results' `update_tokens`, which count the loss
        (completion) tokens, `update_completion_tokens`."""
        return self.update_prompt_tokens + self.update_completion_tokens

    def flops(self, num_params: int) -> dict[str, float]:
        """Generation, update and total FLOPs under the `2 N` / `6 N` model."""
        generation = float(GENERATION_FLOPS_PER_TOKEN * num_params * self.rollout_processed_tokens)
        update = float(UPDATE_FLOPS_PER_TOKEN * num_params * self.update_processed_tokens)
        return {"generation_flops": generation, "update_flops": update, "total_flops": generation + update}

    def snapshot(self, num_params: int) -> dict[str, float]:
        """Every counter, the derived token totals and the FLOPs, as a flat dict."""
        return {
            **asdict(self),
            "rollout_processed_tokens": self.rollout_processed_tokens,
            "update_processed_tokens": self.update_processed_tokens,
            **self.flops(num_params),
        }


def _timed(fn: Callable, meter: RunMeter, attribute: str) -> Callable:
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            setattr(meter, attribute, getattr(meter, attribute) + time.perf_counter() - start)

    return wrapper


class _GenerationMeter(GRPOTrainer):
    """Counts the rollouts TRL's `_generate` really generates in training (below [`LZEGRPOTrainer`] in the method
    order of [`MeteredLZEGRPOTrainer`], so rollouts served again to TRL's update rows are not counted)."""

    meter: RunMeter

    def _generate(self, prompts: list):
        result = super()._generate(prompts)
        if self.model.training:
            prompt_ids, completion_ids = result[0], result[1]
            self.meter.rollout_prompt_tokens += sum(len(ids) for ids in prompt_ids)
            self.meter.rollout_completion_tokens += sum(len(ids) for ids in completion_ids)
            self.meter.rollouts += len(completion_ids)
        return result


class MeteredLZEGRPOTrainer(LZEGRPOTrainer, _GenerationMeter):
    """
    [`LZEGRPOTrainer`] that counts rollout and update tokens and times rollouts, selection and steps in `self.meter`.

    It changes nothing in the training: it reads the rollouts as TRL generates them and each micro-batch as it enters
    the loss, and wraps the LZE state's scoring, selection and recording with timers.
    """

    def __init__(self, *args, **kwargs) -> None:
        self.meter = RunMeter()
        super().__init__(*args, **kwargs)
        for name in ("score", "select", "record"):
            setattr(self.lze, name, _timed(getattr(self.lze, name), self.meter, "selection_seconds"))

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        start = time.perf_counter()
        output = super()._generate_and_score_completions(inputs)
        self.meter.rollout_seconds += time.perf_counter() - start
        self.meter.generation_batches += 1
        return output

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Called once per micro-batch that goes through the update's forward/backward, with exactly its rows (after
        # selection and packing): count them here rather than where the trainer decides which rows to keep.
        if model.training:
            self.meter.update_prompt_tokens += int(inputs["prompt_mask"].sum())
            self.meter.update_completion_tokens += int(inputs["completion_mask"].sum())
            self.meter.update_forward_rows += len(inputs["prompt_ids"])
        return super().compute_loss(
            model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
        )

    def training_step(self, model, inputs, num_items_in_batch):
        start = time.perf_counter()
        try:
            return super().training_step(model, inputs, num_items_in_batch)
        finally:
            self.meter.step_seconds += time.perf_counter() - start
