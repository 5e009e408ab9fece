"""DAPO-style refill of a generation batch (`dapo_max_resample`): extra generation rounds for fresh prompts until
every process's share of the batch is full of kept groups. Called by [`LZEGRPOTrainer`] after the selection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .batching import concat_batches
from .selectors import GroupBatch


REFILL_BATCH_OFFSET = 1_000_000  # refill rounds' batch indices for the rollout filter's draws, apart from the epoch's


def fit_groups(
    weights: np.ndarray, rows_used: np.ndarray, num_generations: int, rows_per_process: int
) -> tuple[np.ndarray, np.ndarray]:
    """
    Which positively weighted groups of one generation round fit in what the processes have left of a batch.

    A round's rows are laid out as the trainer generates them: group `g` is the global rows `[g * G, (g + 1) * G)`,
    and process `p` holds the rows `[p * L, (p + 1) * L)`. Groups are taken in order; one is kept when every process
    holding some of its rows has room for them (`rows_used + its rows <= L`), else its weight becomes 0.

    Returns:
        `tuple[np.ndarray, np.ndarray]`: the weights with the groups that do not fit set to 0, and the updated rows
        used per process.
    """
    weights = np.asarray(weights, dtype=np.float64).copy()
    rows_used = np.asarray(rows_used, dtype=np.int64).copy()
    for g in np.flatnonzero(weights > 0):
        owners = np.arange(g * num_generations, (g + 1) * num_generations) // rows_per_process
        rows = np.bincount(owners, minlength=len(rows_used))[: len(rows_used)]
        if np.all(rows_used + rows <= rows_per_process):
            rows_used += rows
        else:
            weights[g] = 0.0
    return weights, rows_used


def refill_generation_batch(
    trainer: Any, generate: Callable[[list[dict]], dict], inputs, output, batch: GroupBatch, weights: np.ndarray
) -> tuple[dict, GroupBatch, np.ndarray, int]:
    """
    Refills a generation batch whose selector dropped groups, for selectors with `refill_rounds > 0`.

    While some process's share of the batch (`L` rows) is not full of kept groups, and for at most
    `selector.refill_rounds` extra rounds, draws one generation batch of fresh prompts from the epoch's rows
    ([`refill_inputs`]), generates and scores it with `generate` (`GRPOTrainer`'s own
    `_generate_and_score_completions`) and lets the selector weigh its groups; kept groups fill the room left on the
    processes that hold them ([`fit_groups`]), so no process ends with more rows than a plain batch. Every decision is
    global, so all processes run the same rounds and collectives. Returns the rounds' outputs concatenated on this
    process (round after round), the groups of all rounds with their final weights, and the rounds run.
    """
    if "pixel_values" in output or "num_images" in output:
        raise NotImplementedError(
            f"dapo_max_resample={trainer.lze.selector.refill_rounds} (refill) does not support image inputs yet; set "
            "dapo_max_resample=0."
        )
    G, num_processes, rows_per_process = trainer.num_generations, trainer.accelerator.num_processes, len(inputs)
    weights, used = fit_groups(weights, np.zeros(num_processes, dtype=np.int64), G, rows_per_process)
    rounds = [(output, batch, weights)]
    seen = set(batch.prompt_ids.tolist())
    while len(rounds) <= trainer.lze.selector.refill_rounds and used.sum() < num_processes * rows_per_process:
        extra, extra_ids = refill_inputs(trainer, inputs, batch.num_groups, len(rounds), seen)
        out = generate(extra)
        scored = trainer._score(extra_ids, refill_round=len(rounds))
        w, used = fit_groups(trainer.lze.select(scored), used, G, rows_per_process)
        rounds.append((out, scored, w))
        seen.update(scored.prompt_ids.tolist())
    if len(rounds) == 1:
        return output, batch, weights, 0
    pad = trainer.processing_class.pad_token_id if hasattr(trainer.processing_class, "pad_token_id") else None
    pad = trainer.processing_class.tokenizer.pad_token_id if pad is None else pad
    merged = concat_batches([r[0] for r in rounds], pad, sum_keys=("num_items_in_batch",))
    return merged, GroupBatch.concat([r[1] for r in rounds]), np.concatenate([r[2] for r in rounds]), len(rounds) - 1


def refill_inputs(
    trainer: Any, inputs, num_groups: int, refill_round: int, seen: set[int]
) -> tuple[list[dict], np.ndarray]:
    """
    This process's inputs for one refill round, and their prompt ids: `num_groups` rows drawn without replacement
    from the epoch's rows (the sampler's, after pruning and the selector's plan) minus the prompts already in this
    generation batch (from all of them, with replacement, when too few are left), seeded by `(seed, generation index,
    round)`. With a per-batch rollout filter, the round's rows are the first of that random order its filter does
    not skip (the whole order when it skips too many); each repeated `num_generations` times and dealt to the
    processes in order. The rows carry the same columns as `inputs`.
    """
    sampler, row_ids = trainer.train_sampler, trainer.prompt_ids.row_ids
    pool = np.unique(sampler.epoch_rows) if sampler is not None and sampler.epoch_rows is not None else None
    pool = np.arange(len(trainer.train_dataset)) if pool is None else pool
    fresh = pool[~np.isin(row_ids[pool], np.fromiter(seen, dtype=np.int64, count=len(seen)))]
    source = fresh if len(fresh) >= num_groups else pool
    rng = np.random.default_rng([trainer.args.seed, trainer.lze.generation, refill_round, 1])
    chosen = None
    if trainer.lze.plan_batch is not None and len(source) >= num_groups:
        # Rollout-side selection per batch: the round's prompts pass the same filter as the sampler's batches.
        batch = REFILL_BATCH_OFFSET * refill_round + trainer.lze.generation
        planned, _ = trainer.lze.plan_batch(sampler.epoch, batch, rng.permutation(source), 0, num_groups)
        chosen = np.asarray(planned) if planned is not None else None
    if chosen is None:
        chosen = rng.choice(source, size=num_groups, replace=len(source) < num_groups)
    columns = trainer.train_dataset[chosen.tolist()]
    keys = [k for k in inputs[0] if k in columns]
    rows = [{k: columns[k][i] for k in keys} for i in range(num_groups)]
    start = trainer.accelerator.process_index * len(inputs)
    positions = [r // trainer.num_generations for r in range(start, start + len(inputs))]
    return [dict(rows[i]) for i in positions], row_ids[chosen][positions]
