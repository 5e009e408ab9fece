"""DAPO-style refill of a generation batch (`dapo_max_resample`), as a [`~lze_trl.step.RolloutPlan`]: extra
generation rounds for fresh prompts until every process's share of the batch is full of kept groups.

It lost its benchmark (BENCHMARKS.md section 2: twice GRPO's rollouts for nothing measurable) and left the package;
[`ExperimentalLZETrainer`] runs it through the core's step seam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lze_trl.selectors import GroupBatch
from lze_trl.step import Collected, StepContext, collected_rounds


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


class PromptPool:
    """
    Where refill rounds draw their prompts: the rows of the sampler's current epoch (after pruning and the selector's
    plan), or the whole map-style dataset before the first epoch is planned.

    Args:
        dataset (`datasets.Dataset`):
            The map-style train dataset.
        row_ids (`np.ndarray`):
            The prompt id of every row ([`~lze_trl.prompt_ids.PromptIds.row_ids`]).
        position ([`~lze_trl.sampler.DataPosition`]):
            Where training stands in the data (its `rows` are the epoch's).
        seed (`int`):
            Seed of the draws.
        plan_batch (`Callable`, *optional*):
            A per-batch rollout filter's planning (`RolloutFilter.plan_batch`): the round's prompts are then the
            first of its random order that the filter does not skip (the whole order when it skips too many).
    """

    def __init__(
        self, dataset: Any, row_ids: np.ndarray, position: Any, seed: int, plan_batch: Callable | None = None
    ) -> None:
        self.dataset, self.row_ids, self.position, self.seed = dataset, row_ids, position, seed
        self.plan_batch = plan_batch

    def draw(
        self, ctx: StepContext, like: list[dict], num_groups: int, refill_round: int, seen: set[int]
    ) -> list[dict]:
        """
        This process's rows of one refill round: `num_groups` rows drawn without replacement from the pool minus the
        prompts already in this generation batch (`seen`; from the whole pool, with replacement, when too few are
        left), seeded by `(seed, generation, round)`, each repeated `num_generations` times and dealt to the processes
        in order; with the columns of `like` (this process's rows of the batch).
        """
        rows = self.position.rows
        pool = np.unique(rows) if rows is not None else np.arange(len(self.dataset))
        fresh = pool[~np.isin(self.row_ids[pool], np.fromiter(seen, dtype=np.int64, count=len(seen)))]
        source = fresh if len(fresh) >= num_groups else pool
        rng = np.random.default_rng([self.seed, ctx.generation, refill_round, 1])
        chosen = None
        if self.plan_batch is not None and len(source) >= num_groups:
            batch = REFILL_BATCH_OFFSET * refill_round + ctx.generation
            planned, _ = self.plan_batch(self.position.epoch, batch, rng.permutation(source), 0, num_groups)
            chosen = np.asarray(planned) if planned is not None else None
        if chosen is None:
            chosen = rng.choice(source, size=num_groups, replace=len(source) < num_groups)
        columns = self.dataset[chosen.tolist()]
        keys = [k for k in like[0] if k in columns]
        start = ctx.accelerator.process_index * len(like)
        groups = [r // ctx.num_generations for r in range(start, start + len(like))]
        return [{k: columns[k][g] for k in keys} for g in groups]


class RefillPlan:
    """
    DAPO's dynamic sampling: after the generation batch is scored and selected, while some process's share of the
    batch (`L` rows) is not full of kept groups, and for at most `rounds` extra rounds, generate one generation batch
    of fresh prompts from the pool ([`PromptPool.draw`]), score it and let the selector weigh its groups; kept groups
    fill the room left on the processes that hold them ([`fit_groups`]), so no process ends with more rows than a plain
    batch. Every decision is global, so all processes run the same rounds and collectives. Logs `lze/refill_rounds`.

    Args:
        rounds (`int`):
            Most extra rounds per generation batch (`dapo_max_resample`).
        pool ([`PromptPool`]):
            Where the rounds' prompts come from.
    """

    def __init__(self, rounds: int, pool: PromptPool) -> None:
        self.rounds, self.pool = rounds, pool

    def collect(self, ctx: StepContext, inputs: list[dict]) -> Collected:
        G, processes, per_process = ctx.num_generations, ctx.accelerator.num_processes, len(inputs)
        generated = [ctx.generate(inputs, G)]
        batches = [ctx.score(*generated[0].groups(G), 0)]
        weights, used = fit_groups(ctx.select(batches[0]), np.zeros(processes, dtype=np.int64), G, per_process)
        kept = [weights]
        seen = set(batches[0].prompt_ids.tolist())
        while len(generated) <= self.rounds and used.sum() < processes * per_process:
            extra = self.pool.draw(ctx, inputs, batches[0].num_groups, len(generated), seen)
            generated.append(ctx.generate(extra, G))
            batches.append(ctx.score(*generated[-1].groups(G), len(batches)))
            w, used = fit_groups(ctx.select(batches[-1]), used, G, per_process)
            kept.append(w)
            seen.update(batches[-1].prompt_ids.tolist())
        collected = collected_rounds(ctx, generated, GroupBatch.concat(batches), np.concatenate(kept))
        collected.metrics["lze/refill_rounds"] = len(generated) - 1
        return collected
