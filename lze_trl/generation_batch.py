"""One training generation batch of LZE, top to bottom: generate in rounds, choose, score, select, record, keep rows.

Without rounds (the default), TRL generates, rewards and makes update rows of every rollout in one call, as
`GRPOTrainer` does. With rounds (`LZERun.rounds`: `[k, num_generations]` for `probe_generations=k`, or
`rollout_rounds`), every prompt gets the first round; after each round the groups that go on are chosen (the probe:
by expected energy, with the selector's quota; the adaptive budget: while they may still be live), the same number on
every process; TRL then makes update rows of the completed groups with every rollout served, so that nothing is
generated or rewarded twice and only rows that can reach the update get log-probabilities. Then, in both cases, every
prompt is scored once into the per-prompt state, the selector weighs the complete groups, the run records the batch,
and the update keeps the positively weighted rows. No TRL import: the trainer comes in as [`LZETrainerCalls`].
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol

import numpy as np
import torch

from .batching import Batch, pad_rows
from .rollouts import Rollouts, Rows, gather_rows
from .selection import group_pass_rates


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
    """The rows this process hands TRL's update from its `inputs` (as the sampler drew them, each prompt
    `num_generations` times in a row); `global_step` is the Trainer's, for the selection log."""
    run, G, correct = trainer.lze, trainer.num_generations, trainer.lze.correctness_index
    processes, process = trainer.accelerator.num_processes, trainer.accelerator.process_index
    if len(run.rounds) == 1:  # every prompt's G rollouts: TRL generates, rewards and makes update rows in one call
        rows, rollouts = trainer.update_rows(inputs)
        prompt_ids, rewards = rollouts.groups(G)
        complete = np.ones(len(prompt_ids), dtype=bool)
        generated = rollouts.rewards
        metrics = {"lze/fresh_rollouts": len(rollouts.prompt_ids)}
    else:
        active = np.ones(len(inputs) // G * processes, dtype=bool)  # every process's groups, in order
        rounds, start = [], 0
        for end in run.rounds:
            # 1. Generate a round: rollouts start..end of every group going on
            mine = np.flatnonzero(active.reshape(processes, -1)[process])
            out = trainer.generate_rollouts([inputs[g * G + j] for g in mine for j in range(start, end)], end - start)
            ids, round_rewards = out.groups(end - start)
            if not rounds:
                prompt_ids = ids
                rewards = np.full((len(ids), G, round_rewards.shape[-1]), np.nan)
            rewards[active, start:end] = round_rewards
            rounds.append((out, mine, start, end))
            if end == G:
                break
            # 2. Choose the groups that go on
            if not run.args.rollout_rounds:
                candidates = run.probe(prompt_ids, rewards[:, :end, correct], G - end)
                active = even_out(run.select(candidates) > 0, candidates.energies, processes)
            else:
                live = np.where(active, run.live_probability(prompt_ids, rewards[:, :end, correct], G - end), -1.0)
                active = even_out(live >= run.args.rollout_live_threshold, live, processes)
            start = end
        complete = active
        generated = np.concatenate([out.rewards for out, *_ in rounds])
        # 3. TRL's update rows of the completed groups, every rollout served: each group's rounds in order
        served = served_rows([(out.rows, held, last - first) for out, held, first, last in rounds], mine)
        rows, _ = trainer.update_rows(served.inputs, (served, rewards[complete].reshape(-1, rewards.shape[-1])))
    # 4. Score every prompt once into the per-prompt state, select among the complete groups, record
    run.unscorable_guard.observe(generated)
    groups = run.score(prompt_ids, rewards[:, :, correct], trainer.total_rewards(rewards), complete)
    weights = run.select(dataclasses.replace(groups, live=groups.live & complete))
    if len(run.rounds) > 1:
        k = run.rounds[0]
        probe_pass_rates = group_pass_rates(rewards[:, :k, correct].reshape(-1), k, run.args.pass_threshold)
        fresh = [len(out.prompt_ids) for out, *_ in rounds]
        metrics = run.probe_guard.observe(probe_pass_rates, groups, complete, fresh)
        if run.args.rollout_rounds:  # how alike the batch's new prompts are taken to be (`LZERun.new_prompt_prior`)
            metrics["lze/new_prompt_prior_strength"] = float(sum(run.new_prompt_prior(rewards[:, :, correct])))
    metrics.update(run.record(groups, weights, global_step))
    # 5. Keep the positively weighted rows (advantages scaled by the weight), padded alike on every process
    generated_tokens = rows["num_items_in_batch"].item()
    if len(run.rounds) > 1 or not np.all(weights == 1.0):
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
    """The choice with `max(ceil(chosen / num_processes), 1)` groups on every process (groups split evenly over the
    processes, in order), dropping a process's lowest-energy chosen groups or adding its highest-energy others."""
    per_process = chosen.reshape(num_processes, -1)
    energy = energies.reshape(num_processes, -1)
    count = max(math.ceil(int(chosen.sum()) / num_processes), 1)
    out = np.zeros_like(per_process)
    for p in range(num_processes):
        order = np.lexsort((-energy[p], ~per_process[p]))  # the chosen first, each by energy
        out[p, order[:count]] = True
    return out.reshape(-1)


def served_rows(rounds: list[tuple[Rows, np.ndarray, int]], groups: np.ndarray) -> Rows:
    """The rows of `groups` (this process's group indices) from the rounds' `(rows, groups generated, rollouts per
    group)`: each group's rows of every round in order, as one `_generate` call would have returned them."""
    picks = [
        (r, int(np.searchsorted(held, group)) * size + j)
        for group in groups
        for r, (_, held, size) in enumerate(rounds)
        for j in range(size)
    ]
    return gather_rows([rows for rows, _, _ in rounds], picks)
