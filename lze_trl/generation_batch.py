"""One training generation batch of LZE, top to bottom: generate (in rounds), score, select, record, keep rows.

In one round (the default), TRL generates, rewards and makes update rows of every rollout in one call, as
`GRPOTrainer` does. In `generation_rounds`, every group gets the first round; after each round the run's
[`~lze_trl.rounds.RoundPolicy`] chooses the groups that go on, evened out to the same number on every process; TRL
then makes update rows of the completed groups with every rollout served, so that nothing is generated or rewarded
twice and only rows that can reach the update get log-probabilities. Then, in both cases, every group is scored once
into the per-prompt state, the selector weighs the complete groups, the run records the batch, and the update keeps
the positively weighted rows. No TRL import: the trainer comes in as [`LZETrainerCalls`].
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol

import numpy as np
import torch

from .batching import Batch, pad_rows
from .rollouts import Rollouts, Rows, gather_rows
from .rounds import Round, RoundsState


class LZETrainerCalls(Protocol):
    """What a generation batch uses of [`LZEGRPOTrainer`]: its LZE run, TRL's generation and update rows
    ([`~lze_trl.trl_adapter.TRLAdapter`]), the log."""

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
    policy, processes, process = run.round_policy, trainer.accelerator.num_processes, trainer.accelerator.process_index
    if len(policy.rounds) == 1:  # every prompt's G rollouts: TRL generates, rewards and makes update rows in one call
        rows, rollouts = trainer.update_rows(inputs)
        prompt_keys, rewards = rollouts.groups(G)
        state = RoundsState(prompt_keys, rewards, correct, np.ones(len(prompt_keys), dtype=bool), G)
        generated = rollouts.rewards
        metrics = {"lze/fresh_rollouts": len(rollouts.prompt_keys)}
    else:
        state = generate_in_rounds(trainer, inputs, processes, process)
        complete, rewards = state.going_on, state.rewards
        generated = np.concatenate([r.rollouts.rewards for r in state.rounds])
        # TRL's update rows of the completed groups, every rollout served: each group's rounds in order
        held = [(r.rollouts.rows, r.groups, r.last - r.first) for r in state.rounds]
        served = served_rows(held, state.rounds[-1].groups)
        rows, _ = trainer.update_rows(served.inputs, (served, rewards[complete].reshape(-1, rewards.shape[-1])))
    # Score every group once into the per-prompt state, select among the complete groups, record
    run.unscorable_guard.observe(generated)
    complete = state.going_on
    groups = run.score(state.prompt_keys, state.rewards[:, :, correct], trainer.total_rewards(state.rewards), complete)
    weights = run.select(dataclasses.replace(groups, eligible=groups.eligible & complete))
    if len(policy.rounds) > 1:
        metrics = policy.observe(run, state, groups)
    metrics.update(run.record(groups, weights, global_step))
    # Keep the positively weighted rows (advantages scaled by the weight), padded alike on every process
    generated_tokens = rows["num_items_in_batch"].item()
    if len(policy.rounds) > 1 or not np.all(weights == 1.0):
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


def generate_in_rounds(trainer: LZETrainerCalls, inputs: list[dict], processes: int, process: int) -> RoundsState:
    """The generation batch of `inputs` generated in the run's rounds: after each round but the last, the round
    policy chooses the groups that go on, evened out over the processes; `going_on` ends as the complete groups."""
    run, G = trainer.lze, trainer.num_generations
    state = None
    for end in run.round_policy.rounds:
        going_on = np.ones(len(inputs) // G * processes, dtype=bool) if state is None else state.going_on
        mine = np.flatnonzero(going_on.reshape(processes, -1)[process])  # this process's groups going on
        start = 0 if state is None else state.rollouts_so_far
        out = trainer.generate_rollouts([inputs[g * G + j] for g in mine for j in range(start, end)], end - start)
        keys, round_rewards = out.groups(end - start)
        if state is None:
            rewards = np.full((len(keys), G, round_rewards.shape[-1]), np.nan)
            state = RoundsState(keys, rewards, run.correctness_index, going_on)
        state.rewards[going_on, start:end] = round_rewards
        state.rounds.append(Round(out, mine, start, end))
        state.rollouts_so_far = end
        if end < G:
            chosen, priority = run.round_policy.choose(run, state)
            state.going_on = even_out(chosen, priority, processes, going_on)
    return state


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
