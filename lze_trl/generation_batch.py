"""One training generation batch of LZE, top to bottom: probe, choose, complete, score, select, record, keep rows.

[`LZEGRPOTrainer`] hands every training generation batch to [`train_on_generation_batch`]. Without a probe
(`probe_generations=0`), TRL generates, rewards and turns every prompt's `num_generations` rollouts into update rows
in one call, exactly as `GRPOTrainer` does. With a probe of `k` rollouts:

1. **Probe.** Every prompt gets its first `k` rollouts, generated and rewarded (no log-probabilities).
2. **Choose.** Each probe's expected energy once complete ([`~lze_trl.run.LZERun.probe`]) ranks it; the selector
   chooses among the probes with the generation batch's quota, evened out so that every process completes the same
   number of groups (the processes run the same collectives on the same number of rows).
3. **Complete.** The chosen prompts get their other `num_generations - k` rollouts, generated and rewarded.
4. **Update rows.** TRL turns the completed groups into update rows (log-probabilities, advantages over the whole
   group, its metrics), with every rollout served: nothing is generated or rewarded twice, and only rows that can
   reach the update get log-probabilities.

Then, in both cases: every prompt is scored once into the per-prompt state (a completed group with its
`num_generations` rollouts, a probed one with its probe, which may not set a prompt's first pass rate), the selector
weighs the complete groups, the run records the batch, and the update keeps the positively weighted rows. No TRL
import: the trainer's TRL calls come in through [`LZETrainerCalls`].
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol

import numpy as np
import torch

from .batching import Batch, pad_rows
from .rollouts import Rollouts, Rows, merge_rows


class LZETrainerCalls(Protocol):
    """What a generation batch uses of [`LZEGRPOTrainer`]: its LZE run, TRL's generation and update rows, the log."""

    lze: Any
    accelerator: Any
    num_generations: int

    def generate_rollouts(self, inputs: list[dict], num_rollouts: int) -> Rollouts: ...

    def update_rows(self, inputs: list[dict], served: tuple[Rows, np.ndarray] | None = None) -> tuple[Batch, Any]: ...

    def total_rewards(self, rewards: np.ndarray) -> np.ndarray: ...

    def log_lze(self, metrics: dict[str, float]) -> None: ...


def train_on_generation_batch(trainer: LZETrainerCalls, inputs: list[dict], global_step: int) -> Batch:
    """
    One training generation batch (see the module docstring): returns the rows this process hands TRL's update.

    Args:
        trainer ([`LZETrainerCalls`]):
            The trainer.
        inputs (`list[dict]`):
            This process's rows of the generation batch, as the sampler drew them (each prompt `num_generations`
            times in a row).
        global_step (`int`):
            The Trainer's global step (for the selection log).
    """
    run, G = trainer.lze, trainer.num_generations
    k, correct = run.args.probe_generations, run.correctness_index
    processes, process = trainer.accelerator.num_processes, trainer.accelerator.process_index
    local_groups = len(inputs) // G
    if not k:  # every prompt's G rollouts: TRL generates, rewards and makes update rows of them in one call
        rows, rollouts = trainer.update_rows(inputs)
        prompt_ids, rewards = rollouts.groups(G)
        complete = np.ones(len(prompt_ids), dtype=bool)
        generated = rollouts.rewards
        metrics = {"lze/fresh_rollouts": len(rollouts.prompt_ids)}
    else:
        # 1. Probe: the first k rollouts of every prompt
        probe = trainer.generate_rollouts([inputs[g * G + j] for g in range(local_groups) for j in range(k)], k)
        prompt_ids, probe_rewards = probe.groups(k)
        # 2. Choose the groups to complete, by the energy each is expected to have once complete
        candidates = run.probe(prompt_ids, probe_rewards[:, :, correct], G - k)
        complete = even_out(run.select(candidates) > 0, candidates.energies, processes)
        mine = np.flatnonzero(complete.reshape(processes, -1)[process])
        # 3. Complete them: their other G - k rollouts
        rest = trainer.generate_rollouts([inputs[g * G + j] for g in mine for j in range(k, G)], G - k)
        rewards = np.full((len(prompt_ids), G, probe_rewards.shape[-1]), np.nan)
        rewards[:, :k], rewards[complete, k:] = probe_rewards, rest.groups(G - k)[1]
        generated = np.concatenate([probe.rewards, rest.rewards])
        # 4. TRL's update rows of the completed groups, every rollout served: each group's probe, then its rest
        probed = len(probe.rows.prompts)
        order = [
            r
            for i, g in enumerate(mine)
            for r in [*range(g * k, (g + 1) * k), *range(probed + i * (G - k), probed + (i + 1) * (G - k))]
        ]
        served = merge_rows(probe.rows, rest.rows).take(order)
        rows, _ = trainer.update_rows(served.inputs, (served, rewards[complete].reshape(-1, rewards.shape[-1])))
    # 5. Score every prompt once into the per-prompt state, select among the complete groups, record
    run.unscorable_guard.observe(generated)
    groups = run.score(prompt_ids, rewards[:, :, correct], trainer.total_rewards(rewards), complete)
    weights = run.select(dataclasses.replace(groups, live=groups.live & complete))
    if k:
        metrics = run.probe_guard.observe(candidates, groups, complete, G)
    metrics.update(run.record(groups, weights, global_step))
    # 6. Keep the positively weighted rows (advantages scaled by the weight), padded alike on every process
    generated_tokens = rows["num_items_in_batch"].item()
    if k or not np.all(weights == 1.0):
        # TRL's rows of the complete groups, in order, split evenly over the processes (a group may straddle two)
        every = np.repeat(weights[complete], G).reshape(processes, -1)
        local = torch.as_tensor(every[process], dtype=torch.float32)
        rows["advantages"] = rows["advantages"] * local.to(rows["advantages"].device)
        max_kept = int((every > 0).sum(axis=1).max())
        rows = pad_rows(rows, local > 0, max_kept, run.args.steps_per_generation, trainer.accelerator)
    metrics["lze/update_tokens"] = rows["num_items_in_batch"].item()
    metrics["lze/update_tokens_saved_frac"] = 1.0 - metrics["lze/update_tokens"] / max(generated_tokens, 1.0)
    trainer.log_lze(metrics)
    return rows


def even_out(chosen: np.ndarray, energies: np.ndarray, num_processes: int) -> np.ndarray:
    """
    The choice with the same number of groups on every process (groups in order, split evenly over the processes):
    `max(ceil(chosen / num_processes), 1)` each (at least one, so that every process has rows to update on), dropping
    a process's lowest-energy chosen groups or adding its highest-energy others. Decided from gathered data: the
    same on every process.
    """
    per_process = chosen.reshape(num_processes, -1)
    energy = energies.reshape(num_processes, -1)
    count = max(math.ceil(int(chosen.sum()) / num_processes), 1)
    out = np.zeros_like(per_process)
    for p in range(num_processes):
        order = np.lexsort((-energy[p], ~per_process[p]))  # the chosen first, each by energy
        out[p, order[:count]] = True
    return out.reshape(-1)
