"""One generation batch with rollout replay (`fresh_fraction < 1`), for [`LZEGRPOTrainer`].

Of the candidate prompts the sampler brings (in its random order), each process generates the first
`fresh_per_process`, scores them, and the update takes its groups by the selector from the fresh groups and the
replay buffer's eligible groups (see [`~lze_trl.experimental.replay`]); the live fresh groups then join the
buffer. Every decision comes from gathered data: all processes take the same. Returns the rows this process hands
TRL, as `keep_rows` pads them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..batching import concat_batches, pad_rows, take_rows
from ..guards import LZEWarning
from ..selectors import GroupBatch


def logps_of(trainer: Any, batch: dict[str, Any]) -> torch.Tensor:
    """Per-token log-probabilities of `batch`'s completions under the current policy (no gradient)."""
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model,
            input_ids,
            mask,
            batch["completion_ids"].size(1),
            batch_size=trainer.args.per_device_train_batch_size,
        )
    return logps


def replay_generation_batch(trainer: Any, generate: Callable[[list[dict]], dict], inputs: list[dict]) -> dict:
    """The update rows of one generation batch with replay (see the module docstring), and its metrics logged."""
    run, G, accelerator = trainer.lze, trainer.num_generations, trainer.accelerator
    args, buffer = trainer.args, run.replay
    process, processes = accelerator.process_index, accelerator.num_processes
    candidates = len(inputs) // G
    count = run.fresh_per_process(candidates)
    fresh_inputs = inputs[: count * G]  # the sampler's order is random: its first prompts are a random choice
    output = generate(fresh_inputs)
    fresh = trainer._score(trainer.prompt_ids.of_rows(fresh_inputs))

    # The update: the selector's choice among the fresh groups and the buffer's eligible ones
    eligible = np.flatnonzero(buffer.eligible(run.generation))
    meta = buffer.meta
    replayed = GroupBatch(
        prompt_ids=meta["prompt_id"][eligible],
        pass_rates=meta["pass_rate"][eligible],
        rewards=np.zeros((len(eligible), fresh.rewards.shape[1])),
        energies=meta["energy"][eligible],
        live=np.ones(len(eligible), dtype=bool),
        ema_pass_rates=run.state.get(meta["prompt_id"][eligible])["ema_pass_rate"],
        rng=fresh.rng,
    )
    both = GroupBatch.concat([fresh, replayed])
    both.quota_groups = candidates * processes  # the quota is a share of the candidates, as without replay
    weights = run.select(both)
    owners = np.concatenate([np.repeat(np.arange(processes), count), meta["owner"][eligible]])
    weights = fit_owners(weights, owners, both.energies, capacity=candidates)
    fresh_w, replay_w = weights[: fresh.num_groups], weights[fresh.num_groups :]
    taken = eligible[replay_w > 0]
    staleness = run.generation - meta["birth"][taken]
    local_fresh_w = fresh_w[process * count : (process + 1) * count]
    local_live = fresh.live[process * count : (process + 1) * count]
    forward_tokens = record_logps(trainer, output, (local_fresh_w > 0) | local_live, G)
    rows = [take_rows(output, torch.arange(j * G, (j + 1) * G)) for j in range(count)]
    parts = [r for r, w in zip(rows, local_fresh_w) if w > 0]
    for part, w in zip(parts, local_fresh_w[local_fresh_w > 0]):
        part["advantages"] = part["advantages"] * float(w)
    replay_rows = [
        {k: v.to(accelerator.device) if torch.is_tensor(v) else v for k, v in r.items()} for r in buffer.take(taken)
    ]
    ratio = ratio_stats(trainer, replay_rows)
    forward_tokens += ratio.pop("tokens")

    # The live fresh groups join the buffer (after the choice: a group is not taken twice in one update)
    live = np.flatnonzero(fresh.live)
    keys = run.generation * (candidates * processes) + live
    owner_of = np.repeat(np.arange(processes), count)
    buffer.insert(
        keys,
        fresh.prompt_ids[live],
        owner_of[live],
        run.generation,
        fresh.pass_rates[live],
        fresh.energies[live],
        (fresh_w[live] > 0).astype(np.int64),
        [rows[g - process * count] if owner_of[g] == process else None for g in live],
    )
    metrics = run.record(fresh, fresh_w, trainer.state.global_step)
    local_rows = parts + replay_rows
    counts = np.bincount(owners[weights > 0], minlength=processes) * G
    if local_rows:
        batch = concat_batches(local_rows, pad_token_id(trainer), sum_keys=())
    else:
        batch = take_rows(output, torch.arange(1))  # only zero-weight padding follows
    kept = torch.zeros(len(batch["advantages"]), dtype=torch.bool)
    kept[: sum(len(r["advantages"]) for r in local_rows)] = True
    batch = pad_rows(batch, kept, int(counts.max()), args.steps_per_generation, accelerator)
    metrics.update(
        {
            "lze/fresh_rollouts": count * processes * G,
            "lze/replayed_share": float((replay_w > 0).sum() / max((weights > 0).sum(), 1)),
            "lze/replay_staleness_mean": float(staleness.mean()) if len(staleness) else 0.0,
            "lze/replay_staleness_max": float(staleness.max(initial=0)),
            "lze/replay_buffer_groups": len(buffer),
            "lze/replay_eligible_groups": len(eligible),
            "lze/replay_buffer_mb": accelerator.reduce(
                torch.tensor(float(buffer.nbytes()), device=accelerator.device)
            ).item()
            / 2**20,
            "lze/replay_forward_tokens": accelerator.reduce(
                torch.tensor(float(forward_tokens), device=accelerator.device)
            ).item(),
            "lze/update_tokens": batch["num_items_in_batch"].item(),
            **ratio,
        }
    )
    run.replay_guard(run.generation, metrics, warn=trainer_warn(trainer))
    for name, value in metrics.items():
        trainer._metrics["train"][name].append(value)
    return batch


def record_logps(trainer: Any, output: dict[str, Any], groups: np.ndarray, G: int) -> int:
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
    if len(rows):
        part = take_rows(output, rows)
        logps[rows.to(logps.device)] = logps_of(trainer, part).to(logps.dtype)
        tokens = int((part["prompt_mask"].sum() + part["completion_mask"].sum()).item())
    else:
        tokens = 0
    output["old_per_token_logps"] = logps
    return tokens


def fit_owners(weights: np.ndarray, owners: np.ndarray, energies: np.ndarray, capacity: int) -> np.ndarray:
    """The weights with groups dropped, lowest energy first, where a process would update on more than `capacity`
    groups (the rows per process of a plain generation batch)."""
    weights = np.asarray(weights, dtype=np.float64).copy()
    for owner in np.unique(owners):
        mine = np.flatnonzero((owners == owner) & (weights > 0))
        if len(mine) > capacity:
            weights[mine[np.argsort(energies[mine], kind="stable")[: len(mine) - capacity]]] = 0.0
    return weights


def ratio_stats(trainer: Any, rows: list[dict[str, Any]]) -> dict[str, float]:
    """
    Importance ratios `pi_theta / pi_behaviour` of the replayed tokens (a no-gradient forward of those rows), over
    all processes: mean, max, and the share outside TRL's clip range (their tokens give no gradient).
    """
    accelerator = trainer.accelerator
    totals = torch.zeros(4, device=accelerator.device)  # sum of ratios, clipped tokens, tokens, max ratio
    tokens = 0
    if rows:
        batch = concat_batches(rows, pad_token_id(trainer), sum_keys=())
        mask = batch["completion_mask"].bool()
        ratio = torch.exp(logps_of(trainer, batch) - batch["old_per_token_logps"])[mask]
        low, high = 1.0 - trainer.epsilon_low, 1.0 + trainer.epsilon_high
        totals = torch.stack(
            [ratio.sum(), ((ratio < low) | (ratio > high)).sum(), torch.tensor(ratio.numel()), ratio.max()]
        )
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


def pad_token_id(trainer: Any) -> int:
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    return tokenizer.pad_token_id


def trainer_warn(trainer: Any) -> Callable[[str], None]:
    main = trainer.accelerator.is_main_process
    return lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None
