"""DAPO-style refill of a generation batch (`dapo_max_resample`): extra generation rounds for fresh prompts until
every process's share of the batch is full of kept groups. Called by [`LZEGRPOTrainer`] after the selection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .batching import concat_batches
from .selectors import fit_groups


REFILL_BATCH_OFFSET = 1_000_000  # refill rounds' batch indices for the rollout filter's draws, apart from the epoch's


def refill_generation_batch(
    trainer: Any, generate: Callable[[list[dict]], dict], inputs, output, prompt_ids, pass_rates, energies, weights
):
    """
    Refills a generation batch whose selector dropped groups, for selectors with `refill_rounds > 0`.

    While some process's share of the batch (`L` rows) is not full of kept groups, and for at most
    `selector.refill_rounds` extra rounds, draws one generation batch of fresh prompts from the epoch's pool
    ([`refill_inputs`]), generates and scores it with `generate` (the trainer passes `GRPOTrainer`'s own
    `_generate_and_score_completions`, bound through `super()`) and lets the selector weigh its groups; kept groups
    fill the room left on the processes that hold them ([`fit_groups`]), so no process ends with more rows than a
    plain batch. Every decision is global, so all processes run the same rounds and collectives. Returns the rounds'
    outputs concatenated on this process (round after round) and the groups of all rounds, with the final weights.
    """
    if "pixel_values" in output or "num_images" in output:
        raise NotImplementedError(
            f"dapo_max_resample={trainer.selector.refill_rounds} (refill) does not support image inputs yet; set "
            "dapo_max_resample=0."
        )
    G, num_processes, rows_per_process = trainer.num_generations, trainer.accelerator.num_processes, len(inputs)
    weights, used = fit_groups(weights, np.zeros(num_processes, dtype=np.int64), G, rows_per_process)
    rounds = [(output, prompt_ids, pass_rates, energies, weights)]
    seen = set(prompt_ids.tolist())
    while len(rounds) <= trainer.selector.refill_rounds and used.sum() < num_processes * rows_per_process:
        extra, extra_ids = refill_inputs(trainer, inputs, len(prompt_ids), len(rounds), seen)
        out = generate(extra)
        ids, rewards, rates, energy = trainer._lze_observe(extra_ids)
        w, used = fit_groups(trainer._lze_select(ids, rates, rewards, energy, len(rounds)), used, G, rows_per_process)
        rounds.append((out, ids, rates, energy, w))
        seen.update(ids.tolist())
    if len(rounds) == 1:
        return output, prompt_ids, pass_rates, energies, weights, 0
    merged = concat_batches([r[0] for r in rounds], trainer._tokenizer.pad_token_id, sum_keys=("num_items_in_batch",))
    stacked = [np.concatenate([r[i] for r in rounds]) for i in range(1, 5)]
    return merged, *stacked, len(rounds) - 1


def refill_inputs(
    trainer: Any, inputs, num_groups: int, refill_round: int, seen: set[int]
) -> tuple[list[dict], np.ndarray]:
    """
    This process's inputs for one refill round, and their prompt ids: `num_groups` prompts drawn without
    replacement from the epoch's pool (the sampler's, after pruning and the selector's rollout mask) minus the
    prompts already in this generation batch (from the whole pool, with replacement, when too few are left),
    seeded by `(seed, generation index, round)`. With a per-batch rollout filter, the round's prompts are the first
    of that random order its filter does not skip (the whole order when it skips too many); each repeated
    `num_generations` times and dealt to the processes in order. The rows carry the same columns as `inputs`.
    """
    keep = trainer.train_sampler.epoch_keep if trainer.train_sampler is not None else None
    pool = np.flatnonzero(keep) if keep is not None else np.arange(len(trainer.train_dataset))
    fresh = pool[~np.isin(pool, np.fromiter(seen, dtype=np.int64, count=len(seen)))]
    source = fresh if len(fresh) >= num_groups else pool
    rng = np.random.default_rng([trainer.args.seed, trainer._lze_generation, refill_round, 1])
    chosen = None
    planner = trainer.train_sampler.batch_planner if trainer.train_sampler is not None else None
    if planner is not None and len(source) >= num_groups:
        # Rollout-side selection per batch: the round's prompts pass the same filter as the sampler's batches.
        sampler = trainer.train_sampler
        replays = sampler.pruner.replayed if sampler.pruner is not None else None
        batch = REFILL_BATCH_OFFSET * refill_round + trainer._lze_generation
        planned, _ = planner(sampler.epoch, batch, rng.permutation(source), 0, num_groups, exempt=replays)
        chosen = np.asarray(planned) if planned is not None else None
    if chosen is None:
        chosen = rng.choice(source, size=num_groups, replace=len(source) < num_groups)
    columns = trainer.train_dataset[chosen.tolist()]
    keys = [k for k in inputs[0] if k in columns]
    rows = [{k: columns[k][i] for k in keys} for i in range(num_groups)]
    start = trainer.accelerator.process_index * len(inputs)
    positions = [r // trainer.num_generations for r in range(start, start + len(inputs))]
    ids = trainer.prompt_ids.row_ids[chosen]
    return [dict(rows[i]) for i in positions], ids[positions]
