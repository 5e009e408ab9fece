"""Fused rounds (`fuse_rounds=True`): one generation call per generation batch, holding rounds of several batches.

With `generation_rounds` of `R` rounds, each call of TRL's `_generate_and_score_completions` makes one generation
call holding the first round of the generation batch it was given and the next round of each batch still in flight
(the groups going on after that batch's last round), as SPEED fuses the next batch's screening into the current
batch's completion. A batch is complete `R - 1` calls after it was drawn; its groups are then scored, selected and
recorded, and TRL's update trains on its rows, exactly as for a batch generated in serial rounds
([`~lze_trl.rounds.generation_batch.update_on`]). The rounds of a call are recorded oldest batch first, so that a
complete batch is recorded before the newer batches' choices: with two rounds every choice sees the per-prompt state
the serial rounds give it (a fused run trains on the serial run's rows, one step later); with more, a batch's earlier
choices see that state one batch behind. The first `R - 1` calls complete nothing: their update has only zero-weight
rows.

A rollout reaches the update up to `R - 1` generation batches after it was generated (`lze/rollout_staleness`, the
mean over the update's rollouts). Its update row is corrected by TRL's importance-sampling ratio of the policy being
trained to the one that sampled it (`vllm_importance_sampling_correction`, on by default, with TRL's mode and
bounds): TRL applies it on vLLM, whose sampling log-probabilities the rows keep; on a backend that returns none
(transformers generation), the rows of a batch's earlier rounds record them with TRL's forward right after generating,
and lze-trl applies the same ratio (`lze_trl.rounds.off_policy`, logged as `lze/stale_is_ratio_*`).

The batches in flight are this process's rows: its [`RoundPipeline`] is saved with each checkpoint, one file per
process ([`~lze_trl.rounds.in_flight.save_in_flight`]); a resumed run continues them exactly rather than regenerating
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .batching import Batch, pad_rows
from .generation_batch import (
    InFlight,
    RoundsContext,
    TRLPort,
    completed_rows,
    record_round,
    round_request,
    start_state,
    update_on,
)
from .rollouts import Rollouts, gather_rows


@dataclass
class RoundPipeline:
    """
    The generation batches in flight on this process, oldest first, and the generation calls made so far.

    Attributes:
        batches (`list[InFlight]`):
            The batches drawn and not yet complete.
        calls (`int`):
            Generation calls made (a [`~lze_trl.method.round_policies.Round`]'s `call` is its index among them).
    """

    batches: list[InFlight] = field(default_factory=list)
    calls: int = 0


def split_rollouts(rollouts: Rollouts, sizes: list[int], processes: int) -> list[Rollouts]:
    """The [`Rollouts`] of one generation call cut into its parts of `sizes` rows on every process (each process's
    rows are its parts in order; `prompt_keys` and `rewards` hold every process's rows, process after process)."""
    bounds = np.cumsum([0, *sizes])
    keys = rollouts.prompt_keys.reshape(processes, -1)
    rewards = rollouts.rewards.reshape(processes, int(bounds[-1]), -1)
    return [
        Rollouts(
            gather_rows([rollouts.rows], [(0, i) for i in range(a, b)]),
            keys[:, a:b].reshape(-1),
            rewards[:, a:b].reshape(-1, rewards.shape[-1]),
        )
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def train_fused(port: TRLPort, context: RoundsContext, pipeline: RoundPipeline, inputs: list[dict]) -> Batch:
    """
    The rows this process hands TRL's update from one generation call: the first round of `inputs` (a new batch) and
    the next round of every batch in flight in `pipeline`, recorded oldest batch first; the update trains on the batch
    this call completes, or on zero-weight rows while none is complete.
    """
    run, G, processes = context.run, context.num_generations, context.processes
    schedule = run.round_policy.schedule
    pipeline.batches.append(InFlight(schedule[0], inputs=inputs))
    requests = [round_request(batch, G, processes, context.process) for batch in pipeline.batches]
    # TRL's group size for the call (vLLM server's completions per prompt): one that divides every part's rollouts
    per_prompt = math.gcd(*[last - first for _, _, first, last in requests])
    # a batch's rounds but its last are trained after this step's update: they keep their sampling log-probabilities
    stale = [last < G for rows, _, _, last in requests for _ in rows]
    rollouts = port.generate_rollouts([row for request in requests for row in request[0]], per_prompt, stale)
    pipeline.calls += 1
    run.unscorable_guard.observe(rollouts.rewards)
    metrics = {"lze/fresh_rollouts": len(rollouts.prompt_keys), "lze/generation_calls": 1}
    parts = split_rollouts(rollouts, [len(request[0]) for request in requests], processes)
    rows = None
    for batch, part, (_, groups, first, last) in zip(pipeline.batches, parts, requests):
        start_state(batch, part, first, last, G, run.correctness_index)
        record_round(run, batch, part, groups, first, last, processes, pipeline.calls)
        if last == G:  # complete: recorded before the newer batches' choices
            rounds_made = batch.state.rounds
            staleness = sum((r.last - r.first) * (pipeline.calls - r.call) for r in rounds_made) / G
            metrics["lze/rollout_staleness"] = staleness
            rows = update_on(port, context, batch.state, completed_rows(port, batch.state), metrics)
    pipeline.batches = [batch for batch in pipeline.batches if not batch.complete]
    if rows is None:
        rows = _nothing_to_update(port, context, parts[-1], requests[-1][3], metrics)
    return rows


def _nothing_to_update(
    port: TRLPort, context: RoundsContext, first_round: Rollouts, size: int, metrics: dict[str, float]
) -> Batch:
    """Zero-weight update rows (no loss token) for a call that completes no batch, made of TRL's rows of the new
    batch's `first_round` (`size` rollouts per group)."""
    rows, _ = port.update_rows(first_round.rows.inputs, (first_round.rows, first_round.rewards), size)
    keep = torch.zeros(len(first_round.rows.prompts), dtype=torch.bool)
    rows = pad_rows(rows, keep, 0, context.steps_per_generation, context.accelerator)
    context.run.empty_update_guard.observe(0.0, "no generation batch was complete")
    port.log_lze({**metrics, "lze/update_rows": 0.0, "lze/update_tokens": 0.0})
    return rows
