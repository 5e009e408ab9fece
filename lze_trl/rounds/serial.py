"""One training generation batch of LZE, top to bottom: generate (in rounds), score, select, record, keep rows.

In one round (the default), TRL generates, rewards and makes update rows of every rollout in one call, as
`GRPOTrainer` does. In `generation_rounds`, every group gets the first round; after each round the run's
[`~lze_trl.method.round_policies.RoundPolicy`] chooses the groups that go on, evened out to the same number on every
process; TRL then makes update rows of the completed groups with every rollout served, so that nothing is generated or
rewarded twice and only rows that can reach the update get log-probabilities. The rounds run here one generation call
after another (`fuse_rounds=False`) or, several batches' rounds in one call, in `lze_trl/rounds/fused.py`. Then, in
every case, every group is scored once into the per-prompt state, the selector weighs the complete groups, the run
records the batch, and the update keeps the positively weighted rows ([`update_on`]). No TRL import: TRL is reached
through one port, [`~lze_trl.rounds.port.TRLPort`], and nothing else of the trainer is read (the rest comes in a
[`~lze_trl.rounds.port.RoundsContext`]).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..method.round_policies import RoundsState
from ..method.shadow import Shadow
from .batching import Batch, pad_rows
from .in_flight import BatchInFlight, round_done
from .port import RoundsContext, TRLPort
from .rollouts import GeneratedRows, Rollouts, gather_rows


if TYPE_CHECKING:
    from ..method.run import LZERun


def train_on_generation_batch(port: TRLPort, context: RoundsContext, inputs: list[dict]) -> Batch:
    """The rows this process hands TRL's update from its `inputs` (as the sampler drew them, each prompt
    `num_generations` times in a row), generated in one round or in serial rounds."""
    run, G = context.run, context.num_generations
    metrics: dict[str, float] = {}
    skipped = 0
    if run.skips:  # skip mode: the groups of the prompts forward pruning skips are not generated, nor replaced
        skip, metrics = run.skip_groups(port.gathered_prompt_keys(inputs)[::G], context.processes)
        mine, skipped = ~skip.reshape(context.processes, -1)[context.process], int(skip.sum())
        inputs = [row for g, keep in enumerate(mine) if keep for row in inputs[g * G : (g + 1) * G]]
    if len(run.round_policy.schedule) == 1:  # every prompt's G rollouts: TRL generates, rewards and makes rows at once
        rows, rollouts = port.update_rows(inputs)
        prompt_keys, rewards = rollouts.groups(G)
        complete = np.ones(len(prompt_keys), dtype=bool)
        batch = BatchInFlight(G, RoundsState(prompt_keys, rewards, run.correctness_index, complete, G), skipped)
        run.unscorable_guard.check(rollouts.rewards)
        metrics.update({"lze/fresh_rollouts": len(rollouts.prompt_keys), "lze/generation_calls": 1})
        return update_on(port, context, batch, rows, metrics)
    batch = generate_in_rounds(port, context, inputs, skipped)
    run.unscorable_guard.check(np.concatenate([r.rollouts.rewards for r in batch.rounds]))
    metrics.update({"lze/generation_calls": len(batch.rounds), "lze/rollout_staleness": 0.0})
    return update_on(port, context, batch, completed_rows(port, batch), metrics)


def update_on(port: TRLPort, context: RoundsContext, batch: BatchInFlight, rows: Batch, metrics: dict) -> Batch:
    """TRL's update `rows` of a complete generation `batch` cut to the selection: the batch decided
    ([`~lze_trl.rounds.in_flight.BatchInFlight.decide`]: scored into the per-prompt state, its complete groups weighed
    by the selector, recorded), the positively weighted rows kept (advantages scaled by the weight), padded alike on
    every process, and the batch closed ([`~lze_trl.rounds.in_flight.BatchInFlight.close`]: its metrics logged, the
    given `metrics` among them)."""
    run, G, state = context.run, context.num_generations, batch.state
    complete, in_rounds = state.going_on, len(run.round_policy.schedule) > 1
    weights, metrics, shadow_kept = batch.decide(run, port.total_rewards(state.rewards), context.global_step, metrics)
    generated_tokens = rows["num_items_in_batch"].item()
    if in_rounds or run.skips or not np.all(weights == 1.0):  # rows to cut, or to pad to whole micro-batches
        # TRL's rows of the complete groups, in order, split evenly over the processes (a group may straddle two)
        every = np.repeat(weights[complete], G).reshape(context.processes, -1)
        local = torch.as_tensor(every[context.process], dtype=torch.float32)
        # (rows,), or (rows, tokens) once corrected token by token (rounds/off_policy.py)
        advantages = rows["advantages"]
        rows["advantages"] = advantages * local.to(advantages.device).reshape(-1, *[1] * (advantages.dim() - 1))
        max_kept = int((every > 0).sum(axis=1).max())
        rows = pad_rows(rows, local > 0, max_kept, context.steps_per_generation, context.accelerator)
    if shadow_kept is not None:  # the loss tokens of each complete group: every process's rows, in order
        tokens = context.accelerator.gather(rows["completion_mask"].sum(-1)).cpu().numpy().reshape(-1, G).sum(-1)
        metrics.update(Shadow.update_tokens(tokens, shadow_kept[complete]))
    # the rollouts of the kept groups, every process's: the rows the update trains with a weight (not the padding)
    update_tokens = rows["num_items_in_batch"].item()
    metrics["lze/update_tokens_saved_frac"] = 1.0 - update_tokens / max(generated_tokens, 1.0)
    kept_rows = int((np.repeat(weights[complete], G) > 0).sum())
    batch.close(run, metrics, (kept_rows, update_tokens), (int(complete.sum()) * G, generated_tokens), port.log_lze)
    return rows


def completed_rows(port: TRLPort, batch: SyncBatchInFlight) -> Batch:
    """TRL's update rows of the completed groups of a batch generated in rounds, every rollout served: each group's
    rounds in order, so that nothing is generated or rewarded twice. The rows of rounds generated by an earlier
    generation call than the last round's (fused rounds) are stale: an optimizer step came between."""
    state, rounds = batch.state, batch.rounds
    held = [(r.rollouts.rows, r.groups, r.last - r.first) for r in rounds]
    groups = rounds[-1].groups
    served = served_rows(held, groups)
    calls = np.array([r.call for r in rounds for _ in range(r.last - r.first)])
    stale = np.tile(calls < rounds[-1].call, len(groups))  # each group's rounds in order, as served
    rewards = state.rewards[state.going_on].reshape(-1, state.rewards.shape[-1])
    rows, _ = port.update_rows(served.inputs, (served, rewards), stale=stale if stale.any() else None)
    return rows


@dataclass
class Round:
    """One generation round on this process: its `rollouts`, the groups it generated (`groups`, indices among this
    process's groups of the batch), the rollouts `first` to `last` of each of them, and the training generation batch
    during which it was generated (`call`, counted by the fused rounds; 0 in serial rounds)."""

    rollouts: Rollouts
    groups: np.ndarray
    first: int
    last: int
    call: int = 0


@dataclass(kw_only=True)
class SyncBatchInFlight(BatchInFlight):
    """A generation batch of the synchronous trainer in rounds ([`~lze_trl.rounds.in_flight.BatchInFlight`]):
    this process's `inputs` (as the sampler drew them, each prompt `num_generations` times in a row) and its rounds
    (`rounds`: the rollouts of each, held until the batch is complete)."""

    inputs: list[dict] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)


def round_request(batch: SyncBatchInFlight, G: int, processes: int, process: int) -> tuple:
    """The rows of `batch`'s round in flight on this process, the groups they belong to (indices among this
    process's groups of the batch), and the round's first and last rollout."""
    state = batch.state
    first, last = (0 if state is None else state.rollouts_so_far), batch.round_last
    groups_here = len(batch.inputs) // G
    going_on = np.ones(groups_here, dtype=bool) if state is None else state.going_on.reshape(processes, -1)[process]
    mine = np.flatnonzero(going_on)
    return [batch.inputs[g * G + j] for g in mine for j in range(first, last)], mine, first, last


def record_round(
    run: LZERun,
    batch: SyncBatchInFlight,
    rollouts: Rollouts,
    groups: np.ndarray,
    first: int,
    last: int,
    processes: int,
    call: int = 0,
) -> None:
    """Records `batch`'s round in flight (its `rollouts` of this process's `groups`, rollouts `first` to `last`, made
    by generation call `call`; the first round starts the batch's state) and moves the batch on
    ([`~lze_trl.rounds.in_flight.round_done`]: unless the round completes the batch, the round policy chooses the
    groups that go on, evened out over the processes)."""
    keys, rewards = rollouts.groups(last - first)
    batch.start(keys, run.round_policy.schedule[-1], rewards.shape[-1], run.correctness_index)
    batch.record(np.flatnonzero(batch.state.going_on), first, last, rewards)
    batch.rounds.append(Round(rollouts, groups, first, last, call))
    round_done(batch, run, processes)


def generate_in_rounds(
    port: TRLPort, context: RoundsContext, inputs: list[dict], skipped: int = 0
) -> SyncBatchInFlight:
    """The generation batch of `inputs` generated in the run's rounds, one generation call each: after each round but
    the last, the round policy chooses the groups that go on; `going_on` ends as the complete groups. `skipped`: the
    batch's groups skip mode did not generate."""
    run, G = context.run, context.num_generations
    batch = SyncBatchInFlight(run.round_policy.schedule[0], skipped=skipped, inputs=inputs)
    for _ in run.round_policy.schedule:
        rows, groups, first, last = round_request(batch, G, context.processes, context.process)
        rollouts = port.generate_rollouts(rows, last - first)
        record_round(run, batch, rollouts, groups, first, last, context.processes)
    return batch


def served_rows(rounds: list[tuple[GeneratedRows, np.ndarray, int]], groups: np.ndarray) -> GeneratedRows:
    """The rows of `groups` (this process's group indices) from the rounds' `(rows, groups generated, rollouts per
    group)`: each group's rows of every round in order, as one `_generate` call would have returned them."""
    picks = [
        (r, int(np.searchsorted(held, group)) * size + j)
        for group in groups
        for r, (_, held, size) in enumerate(rounds)
        for j in range(size)
    ]
    return gather_rows([rows for rows, _, _ in rounds], picks)
