"""Rollout replay (`fresh_fraction < 1`) as a [`~lze_trl.step.RolloutPlan`] of the core's step.

Of the candidate prompts the sampler brings (in its random order), each process generates the first
`fresh_per_process`, scores them, and the update takes its groups by the selector from the fresh groups and the
replay buffer's eligible groups (see [`~benchmarks.experimental.replay`]); the live fresh groups then join the
buffer. Every decision comes from gathered data: all processes take the same. The core step records the fresh groups,
keeps the rows and logs the metrics, as for every plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lze_trl.batching import concat_batches, take_rows
from lze_trl.selectors import GroupBatch
from lze_trl.step import Collected, StepContext

from .replay import ReplayBuffer, ReplayGuard


class ReplayPlan:
    """
    One generation batch with rollout replay (see the module docstring).

    Args:
        buffer ([`ReplayBuffer`]):
            The buffer (its metadata is saved with the run's state, its rows per process beside it).
        fresh_fraction (`float`):
            Share of each process's candidate prompts generated.
        state ([`~lze_trl.prompt_state.PromptState`]):
            The per-prompt table (the EMA of buffered groups' prompts).
        logps (`Callable[[dict], torch.Tensor]`):
            Per-token log-probabilities of a batch's completions under the current policy, without gradient.
        clip_range (`tuple[float, float]`):
            TRL's `(1 - epsilon_low, 1 + epsilon_high)`: the importance ratios outside it give no gradient.
        warn (`Callable[[str], None]`):
            How the replay guard says that replay degenerates.
    """

    def __init__(
        self,
        buffer: ReplayBuffer,
        fresh_fraction: float,
        state: Any,
        logps: Callable[[dict[str, Any]], torch.Tensor],
        clip_range: tuple[float, float],
        warn: Callable[[str], None],
    ) -> None:
        self.buffer, self.fresh_fraction, self.state = buffer, fresh_fraction, state
        self.logps, self.clip_range, self.warn = logps, clip_range, warn
        self.guard = ReplayGuard(buffer.max_staleness)

    def fresh_per_process(self, candidates: int) -> int:
        """Groups a process generates of its `candidates` (`fresh_fraction` of them, at least one)."""
        return max(1, round(self.fresh_fraction * candidates))

    def collect(self, ctx: StepContext, inputs: list[dict]) -> Collected:
        G, accelerator, buffer, generation = ctx.num_generations, ctx.accelerator, self.buffer, ctx.generation
        process, processes = accelerator.process_index, accelerator.num_processes
        candidates = len(inputs) // G
        count = self.fresh_per_process(candidates)
        generated = ctx.generate(inputs[: count * G], G)  # the sampler's order is random: a random choice
        output = generated.rows
        fresh = ctx.score(*generated.groups(G), 0)

        # The update: the selector's choice among the fresh groups and the buffer's eligible ones
        eligible = np.flatnonzero(buffer.eligible(generation))
        meta = buffer.meta
        replayed = GroupBatch(
            prompt_ids=meta["prompt_id"][eligible],
            pass_rates=meta["pass_rate"][eligible],
            rewards=np.zeros((len(eligible), fresh.rewards.shape[1])),
            energies=meta["energy"][eligible],
            live=np.ones(len(eligible), dtype=bool),
            ema_pass_rates=self.state.get(meta["prompt_id"][eligible])["ema_pass_rate"],
            rng=fresh.rng,
        )
        both = GroupBatch.concat([fresh, replayed])
        both.quota_groups = candidates * processes  # the quota is a share of the candidates, as without replay
        weights = ctx.select(both)
        owners = np.concatenate([np.repeat(np.arange(processes), count), meta["owner"][eligible]])
        weights = fit_owners(weights, owners, both.energies, capacity=candidates)
        fresh_w, replay_w = weights[: fresh.num_groups], weights[fresh.num_groups :]
        taken = eligible[replay_w > 0]
        staleness = generation - meta["birth"][taken]
        local_fresh_w = fresh_w[process * count : (process + 1) * count]
        local_live = fresh.live[process * count : (process + 1) * count]
        forward_tokens = self.record_logps(output, (local_fresh_w > 0) | local_live, G)
        rows = [take_rows(output, torch.arange(j * G, (j + 1) * G)) for j in range(count)]
        parts = [r for r, w in zip(rows, local_fresh_w) if w > 0]
        replay_rows = [
            {k: v.to(accelerator.device) if torch.is_tensor(v) else v for k, v in r.items()}
            for r in buffer.take(taken)
        ]
        ratio = self.ratio_stats(ctx, replay_rows)
        forward_tokens += ratio.pop("tokens")

        # The live fresh groups join the buffer (after the choice: a group is not taken twice in one update)
        live = np.flatnonzero(fresh.live)
        owner_of = np.repeat(np.arange(processes), count)
        buffer.insert(
            generation * (candidates * processes) + live,
            fresh.prompt_ids[live],
            owner_of[live],
            generation,
            fresh.pass_rates[live],
            fresh.energies[live],
            (fresh_w[live] > 0).astype(np.int64),
            [rows[g - process * count] if owner_of[g] == process else None for g in live],
        )
        local_rows = parts + replay_rows
        counts = np.bincount(owners[weights > 0], minlength=processes) * G
        row_weights = np.concatenate([np.full(G, w) for w in local_fresh_w[local_fresh_w > 0]] + [np.ones(0)])
        row_weights = np.concatenate([row_weights, np.ones(sum(len(r["advantages"]) for r in replay_rows))])
        if local_rows:
            batch = concat_batches(local_rows, ctx.pad_token_id)
        else:  # nothing of this process is kept: one zero-weight row, which only pads
            batch, row_weights = take_rows(output, torch.arange(1)), np.zeros(1)
        metrics = {
            "lze/fresh_rollouts": count * processes * G,
            "lze/replayed_share": float((replay_w > 0).sum() / max((weights > 0).sum(), 1)),
            "lze/replay_staleness_mean": float(staleness.mean()) if len(staleness) else 0.0,
            "lze/replay_staleness_max": float(staleness.max(initial=0)),
            "lze/replay_buffer_groups": len(buffer),
            "lze/replay_eligible_groups": len(eligible),
            "lze/replay_buffer_mb": reduce_sum(accelerator, buffer.nbytes()) / 2**20,
            "lze/replay_forward_tokens": reduce_sum(accelerator, forward_tokens),
            **ratio,
        }
        self.guard(generation, metrics, warn=self.warn)
        generated_tokens = output["num_items_in_batch"].item()
        return Collected(batch, fresh, fresh_w, row_weights, int(counts.max()), generated_tokens, metrics)

    def record_logps(self, output: dict[str, Any], groups: np.ndarray, G: int) -> int:
        """
        Adds `old_per_token_logps` to `output` when TRL did not compute them: the log-probabilities of the policy that
        generated the rollouts, which replay trains against. Only the rows of `groups` (this process's groups that are
        live, hence may be buffered, or selected) go through the forward; the others get zeros (they reach no update).
        Returns the tokens that went through it.
        """
        if "old_per_token_logps" in output:
            return 0
        logps = torch.zeros_like(output["completion_mask"], dtype=torch.float32)
        rows = torch.as_tensor(np.repeat(np.flatnonzero(groups) * G, G) + np.tile(np.arange(G), int(groups.sum())))
        tokens = 0
        if len(rows):
            part = take_rows(output, rows)
            logps[rows.to(logps.device)] = self.logps(part).to(logps.dtype)
            tokens = int((part["prompt_mask"].sum() + part["completion_mask"].sum()).item())
        output["old_per_token_logps"] = logps
        return tokens

    def ratio_stats(self, ctx: StepContext, rows: list[dict[str, Any]]) -> dict[str, float]:
        """
        Importance ratios `pi_theta / pi_behaviour` of the replayed tokens (a no-gradient forward of those rows), over
        all processes: mean, max, and the share outside TRL's clip range (their tokens give no gradient).
        """
        accelerator = ctx.accelerator
        totals = torch.zeros(4, device=accelerator.device)  # sum of ratios, clipped tokens, tokens, max ratio
        tokens = 0
        if rows:
            batch = concat_batches(rows, ctx.pad_token_id)
            mask = batch["completion_mask"].bool()
            ratio = torch.exp(self.logps(batch) - batch["old_per_token_logps"])[mask]
            low, high = self.clip_range
            clipped = ((ratio < low) | (ratio > high)).sum()
            totals = torch.stack([ratio.sum(), clipped, torch.tensor(ratio.numel()), ratio.max()])
            totals = totals.float().to(accelerator.device)
            tokens = int((batch["prompt_mask"].sum() + batch["completion_mask"].sum()).item())
        gathered = accelerator.gather(totals.unsqueeze(0))
        count = gathered[:, 2].sum().item()
        return {
            "lze/replay_ratio_mean": gathered[:, 0].sum().item() / count if count else 1.0,
            "lze/replay_ratio_max": gathered[:, 3].max().item() if count else 1.0,
            "lze/replay_clipped_share": gathered[:, 1].sum().item() / count if count else 0.0,
            "tokens": tokens,
        }

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.buffer.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.buffer.load_state_dict(state)


def fit_owners(weights: np.ndarray, owners: np.ndarray, energies: np.ndarray, capacity: int) -> np.ndarray:
    """The weights with groups dropped, lowest energy first, where a process would update on more than `capacity`
    groups (the rows per process of a plain generation batch)."""
    weights = np.asarray(weights, dtype=np.float64).copy()
    for owner in np.unique(owners):
        mine = np.flatnonzero((owners == owner) & (weights > 0))
        if len(mine) > capacity:
            weights[mine[np.argsort(energies[mine], kind="stable")[: len(mine) - capacity]]] = 0.0
    return weights


def reduce_sum(accelerator: Any, value: float) -> float:
    """`value` summed over the processes."""
    return accelerator.reduce(torch.tensor(float(value), device=accelerator.device)).item()
