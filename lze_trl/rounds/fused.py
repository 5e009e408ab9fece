"""Fused rounds (`fuse_rounds=True`): one generation call per generation batch, holding rounds of several batches.

With `generation_rounds` of `R` rounds, the generation call of each training generation batch holds the last round of
the batch TRL hands now, the next round of each later batch already in flight, and the first round of the batch
`R - 1` generation batches ahead, which the trainer's [`Lookahead`] draws from the sampler before TRL hands it: as
SPEED fuses the next batch's screening into the current batch's completion. The batch TRL hands is then complete:
its groups are scored, selected and recorded, and TRL's update trains on its rows, exactly as for a batch generated
in serial rounds ([`~lze_trl.rounds.serial.update_on`]), at the same step. The rounds of a call are recorded
oldest batch first, so that a complete batch is recorded before the later batches' choices: with two rounds every
choice sees the per-prompt state the serial rounds give it; with more, a batch's earlier choices see that state one
batch behind.

When no batch is in flight for the batch TRL hands (the run's first step, the first of an epoch whose prompts are
decided at its start, a resume without rounds in flight), that batch and the look-ahead ones are started one
generation call after another (`R` calls, "the staircase"), so that the run trains from its first step; a batch in
flight that is not the one TRL hands (the look-ahead drew other prompts) is dropped with a warning, and the staircase
starts again. Where the look-ahead cannot draw a batch (past the last step, or an epoch not yet planned), fewer
batches are in flight and the calls hold fewer rounds.

A rollout reaches the update up to `R - 1` generation batches after it was generated (`lze/rollout_staleness`, the
mean over the update's rollouts). Its update row is corrected by TRL's importance-sampling ratio of the policy being
trained to the one that sampled it (`vllm_importance_sampling_correction`, on by default, with TRL's mode and
bounds): TRL applies it on vLLM, whose sampling log-probabilities the rows keep; on a backend that returns none
(transformers generation), the rows of the rounds of later batches record them with TRL's forward right after
generating, and lze-trl applies the same ratio (`lze_trl.rounds.off_policy`, logged as `lze/stale_is_ratio_*`).

The batches in flight are this process's rows: its [`RoundPipeline`] is saved with each checkpoint, one file per
process ([`~lze_trl.rounds.in_flight.save_in_flight`]); a resumed run continues them exactly rather than regenerating
them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from .batching import Batch
from .port import RoundsContext, TRLPort
from .rollouts import Rollouts, gather_rows
from .serial import (
    SyncBatchInFlight,
    completed_rows,
    record_round,
    round_request,
    update_on,
)


@dataclass
class RoundPipeline:
    """
    The generation batches in flight on this process, oldest first, and the training generation batches so far.

    Attributes:
        batches (`list[SyncBatchInFlight]`):
            The batches drawn and not yet complete.
        calls (`int`):
            Training generation batches so far (a [`~lze_trl.rounds.serial.Round`]'s `call` is the one during
            which it was generated: a round of an earlier one is stale, an optimizer step came between).
    """

    batches: list[SyncBatchInFlight] = field(default_factory=list)
    calls: int = 0

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The batches in flight as each batch's [`~lze_trl.rounds.in_flight.BatchInFlight.state_dict`] (arrays
        prefixed `fused.batch<i>.`, JSON in `fused_batches`) and this process's rollouts of them as TRL made them
        (`fused_rows`: each batch's inputs and rounds, objects that only a pickle keeps: images, tool calls)."""
        arrays: dict[str, np.ndarray] = {}
        batches = []
        for i, batch in enumerate(self.batches):
            batch_arrays, saved = batch.state_dict(f"fused.batch{i}.")
            arrays.update(batch_arrays)
            batches.append(saved)
        rows = [(batch.inputs, batch.rounds) for batch in self.batches]
        return arrays, {"fused_calls": self.calls, "fused_batches": json.dumps(batches), "fused_rows": rows}

    def load_state_dict(self, arrays: dict[str, np.ndarray], counters: dict[str, Any]) -> None:
        """Takes back what [`~RoundPipeline.state_dict`] saved (a `KeyError` when `counters` are not fused rounds')."""
        saved, rows = json.loads(counters["fused_batches"]), counters["fused_rows"]
        self.calls, self.batches = int(counters["fused_calls"]), []
        for i, (batch, (inputs, rounds)) in enumerate(zip(saved, rows, strict=True)):
            self.batches.append(SyncBatchInFlight(0, inputs=inputs, rounds=rounds))
            self.batches[-1].load_state_dict(arrays, batch, f"fused.batch{i}.")


class Lookahead(Protocol):
    """What fused rounds ask of the trainer besides the [`TRLPort`]: the batches the sampler will hand next."""

    def batch(self, ahead: int) -> list[dict] | None:
        """This process's inputs of the generation batch `ahead` batches after the one handed now, or `None` where
        the sampler has not decided it (an epoch planned at its start) or training ends before it."""

    def same(self, drawn: list[dict], handed: list[dict]) -> bool:
        """Whether the inputs `drawn` ahead are those TRL handed (the same prompts, in order, on this process)."""


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


def train_fused(
    port: TRLPort, context: RoundsContext, pipeline: RoundPipeline, inputs: list[dict], lookahead: Lookahead
) -> Batch:
    """
    The rows this process hands TRL's update for the generation batch of `inputs`, completed in this step: its last
    round fused with the later batches' rounds in one generation call (the `R` calls of the staircase where it is not
    in flight), recorded oldest batch first.
    """
    run, R = context.run, len(context.run.round_policy.schedule)
    pipeline.calls += 1
    in_flight = bool(pipeline.batches) and lookahead.same(pipeline.batches[0].inputs, inputs)
    in_flight = bool(context.accelerator.gather(torch.tensor([in_flight], device=context.accelerator.device)).all())
    if pipeline.batches and not in_flight:  # every process drops them alike (a process's look-ahead may differ)
        run.warn(
            "Fused rounds drew a generation batch ahead that is not the one TRL's sampler handed: its rounds in "
            "flight are dropped and the batch is generated again (a sampler or dataset the look-ahead does not read "
            "as TRL's data loader does). Training goes on, at the cost of the dropped rollouts."
        )
        pipeline.batches = []
    news = [lookahead.batch(R - 1)] if in_flight else [inputs, *(lookahead.batch(a) for a in range(1, R))]
    metrics: dict[str, float] = {"lze/fresh_rollouts": 0, "lze/generation_calls": 0}
    rows = None
    for new in news:  # one call, or the R of the staircase
        rows = _generation_call(port, context, pipeline, new, metrics) or rows
    if rows is None:  # every batch in flight advances a round a call: the one handed is complete after R calls
        raise RuntimeError("fused rounds: the generation batch TRL handed did not complete in its step")
    return rows


def _generation_call(
    port: TRLPort, context: RoundsContext, pipeline: RoundPipeline, new: list[dict] | None, metrics: dict
) -> Batch | None:
    """One generation call: the first round of `new` (a batch to start, if any) and the next round of every batch in
    flight, recorded oldest batch first; the update rows of the batch it completes (the one TRL handed), if any."""
    run, G, processes = context.run, context.num_generations, context.processes
    if new is not None:
        pipeline.batches.append(SyncBatchInFlight(run.round_policy.schedule[0], inputs=new))
    requests = [round_request(batch, G, processes, context.process) for batch in pipeline.batches]
    # TRL's group size for the call (vLLM server's completions per prompt): one that divides every part's rollouts
    per_prompt = math.gcd(*[last - first for _, _, first, last in requests])
    # the rounds of the batches after the one TRL handed are trained in a later step: they keep their sampling
    # log-probabilities (the first batch is the one handed, in flight since before this step or started in it)
    stale = [i > 0 for i, (rows, _, _, _) in enumerate(requests) for _ in rows]
    rollouts = port.generate_rollouts([row for request in requests for row in request[0]], per_prompt, stale)
    run.unscorable_guard.check(rollouts.rewards)
    metrics["lze/fresh_rollouts"] += len(rollouts.prompt_keys)
    metrics["lze/generation_calls"] += 1
    parts = split_rollouts(rollouts, [len(request[0]) for request in requests], processes)
    rows = None
    for batch, part, (_, groups, first, last) in zip(pipeline.batches, parts, requests):
        record_round(run, batch, part, groups, first, last, processes, pipeline.calls)
        if last == G:  # complete: recorded before the later batches' choices
            staleness = sum((r.last - r.first) * (pipeline.calls - r.call) for r in batch.rounds) / G
            rows = update_on(
                port,
                context,
                batch,
                completed_rows(port, batch),
                {**metrics, "lze/rollout_staleness": staleness},
            )
    pipeline.batches = [batch for batch in pipeline.batches if not batch.complete]
    return rows
