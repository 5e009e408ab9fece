"""The synchronous trainer's generation batch, top to bottom: skip, generate and score, decide, cut the update rows.

1. Skip mode (`prune_refill=False`): the groups of the prompts forward pruning skips are taken out of this process's
   `inputs` before anything is generated, as many on every process ([`~lze_trl.method.run.LZERun.skip_groups`]).
2. TRL's `_generate_and_score_completions`, called once, generates, rewards and makes the update rows of every
   rollout left, exactly as `GRPOTrainer` does; the trainer keeps the rewards it computed
   ([`~lze_trl.grpo.trainer.LZEGRPOTrainer.generate_and_score`]).
3. The run scores every group into the per-prompt state and the selector weighs them
   ([`~lze_trl.method.run.LZERun.decide_batch`], the same path as the async trainer's).
4. The update keeps the rows of the positively weighted groups, their advantages scaled by the weight, padded alike on
   every process ([`~lze_trl.grpo.rows.pad_rows`]); the batch's `lze/` metrics are logged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..method.shadow import Shadow
from .rows import Batch, pad_rows


def generation_batch(trainer: Any, inputs: list[dict]) -> Batch:
    """The rows this process hands TRL's update from its `inputs` (as the sampler drew them, each prompt
    `num_generations` times in a row); `trainer` is the [`~lze_trl.grpo.trainer.LZEGRPOTrainer`] (its run `lze`,
    `generate_and_score`, `gathered_prompt_keys`, `total_rewards`, `log_lze`, `accelerator`, `args` and `state`)."""
    run, num_generations, accelerator = trainer.lze, trainer.num_generations, trainer.accelerator
    processes, process = accelerator.num_processes, accelerator.process_index
    keys = trainer.gathered_prompt_keys(inputs)[::num_generations]  # each group's, every process's in order
    metrics: dict[str, float] = {}
    skipped = 0
    if run.skips:  # the groups of the prompts forward pruning skips are neither generated nor replaced
        skip, metrics = run.skip_groups(keys, processes)
        mine = ~skip.reshape(processes, -1)[process]
        starts = np.flatnonzero(mine) * num_generations  # this process's generated groups' first rows
        inputs = [inputs[i] for start in starts for i in range(start, start + num_generations)]
        keys, skipped = keys[~skip], int(skip.sum())
    rows, rewards = trainer.generate_and_score(inputs)
    run.unscorable_guard.check(rewards)
    rewards = rewards.reshape(len(keys), num_generations, -1)
    metrics["lze/generated_rollouts"] = float(len(keys) * num_generations)
    weights, metrics, shadow_kept = run.decide_batch(
        keys, rewards, trainer.total_rewards(rewards), trainer.state.global_step, metrics, skipped
    )
    generated_tokens = rows["num_items_in_batch"].item()
    if run.skips or not np.all(weights == 1.0):  # rows to cut, or to pad to whole micro-batches
        # each row's weight, the processes' equal slices
        every = np.repeat(weights, num_generations).reshape(processes, -1)
        local = torch.as_tensor(every[process], dtype=torch.float32)
        advantages = rows["advantages"]
        rows["advantages"] = advantages * local.to(advantages.device).reshape(-1, *[1] * (advantages.dim() - 1))
        max_kept = int((every > 0).sum(axis=1).max())
        rows = pad_rows(rows, local > 0, max_kept, trainer.args.steps_per_generation, accelerator)
    if shadow_kept is not None:  # the loss tokens of each group: every process's rows, in order
        tokens = accelerator.gather(rows["completion_mask"].sum(-1)).cpu().numpy()
        tokens = tokens.reshape(-1, num_generations).sum(-1)
        metrics.update(Shadow.update_tokens(tokens, shadow_kept))
    update_tokens = rows["num_items_in_batch"].item()  # the kept groups' rollouts (not the padding), every process's
    metrics["lze/update_tokens_saved_frac"] = 1.0 - update_tokens / max(generated_tokens, 1.0)
    kept_rows = int((np.repeat(weights, num_generations) > 0).sum())
    run.close(metrics, (kept_rows, update_tokens), (len(weights) * num_generations, generated_tokens))
    trainer.log_lze(metrics)
    return rows
