"""One generation batch of LZE training, in one place: generate -> score -> select -> record -> keep rows -> metrics.

[`LZEGRPOTrainer`] hands every training generation batch to [`run_step`]. What varies between modes is a
[`RolloutPlan`]: where the batch's groups come from (one fresh generation, DAPO's refill rounds, a probe then a
completion, a buffer) and how many rollouts each prompt gets. A plan works only through a [`StepContext`] (TRL's
generation and scoring, the LZE scorer and selector, the accelerator, the metric sink) and returns what it collected;
it never sees the trainer. Plain torch/numpy, no TRL import.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from .batching import Batch, pad_rows
from .selectors import GroupBatch


@dataclass
class Generated:
    """
    One call of TRL's generation and scoring (`GRPOTrainer._generate_and_score_completions`) over some rows: this
    process's `rows` as TRL returns them (token ids, masks, advantages over their group, ...), the `prompt_ids` of
    every process's rows and the gathered `rewards` (rows of all processes x reward functions; NaN where a function
    returned `None`), both in TRL's gathered order.
    """

    rows: Batch
    prompt_ids: np.ndarray
    rewards: np.ndarray

    def groups(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The prompt id of each group of `size` consecutive rows, and the rewards by group, shape `(groups, size,
        reward functions)`."""
        return self.prompt_ids[::size], self.rewards.reshape(-1, size, self.rewards.shape[-1])


@dataclass
class StepContext:
    """
    What a [`RolloutPlan`] may use during one generation batch: the `accelerator` (`num_processes`, `process_index`,
    `gather`), the group size `num_generations`, the `pad_token_id` of the rows, the index `generation` of this
    generation batch in the run (it seeds draws that must be the same on every process), the `correctness_index` of
    the reward function that defines correctness, and four functions:

    - `generate(inputs, num_rollouts) -> Generated`: TRL's generation and scoring of `inputs` (`num_rollouts`
      consecutive rows per prompt; TRL's advantages are computed over groups of that size);
    - `score(prompt_ids, rewards, round, anchor=None) -> GroupBatch`: groups (their prompt ids, their rewards shaped
      `(groups, rollouts, reward functions)`, NaN for a rollout not generated) scored into the per-prompt state;
      `round` is 0 for a generation batch's first round, `r` for its `r`-th extra one (seeds selection apart);
      `anchor` says which groups may set their prompt's first pass rate (all by default);
    - `select(groups) -> weights`: the selector's weight of each group;
    - `log(metrics)`: the metric sink (the Trainer's logs).
    """

    accelerator: Any
    num_generations: int
    pad_token_id: int
    generate: Callable[[list[dict], int], Generated]
    score: Callable[..., GroupBatch]
    select: Callable[[GroupBatch], np.ndarray]
    log: Callable[[dict[str, float]], None]
    generation: int = 0
    correctness_index: int = 0


@dataclass
class Collected:
    """
    What a [`RolloutPlan`] returns for one generation batch: this process's candidate `rows` for the update, every
    group scored in it (`groups`, all processes', recorded in the state and the log) with its `weights` (0: not in the
    update), the weight of each of this process's rows (`row_weights`: 0 removes a row, others scale its advantage;
    `None` keeps the rows untouched, as plain GRPO does), the largest number of rows any process keeps
    (`max_kept_rows`: every process pads to it), the loss tokens of the rows generated (`generated_tokens`: what an
    update on every row would take) and the plan's own `metrics`.
    """

    rows: Batch
    groups: GroupBatch
    weights: np.ndarray
    row_weights: np.ndarray | None
    max_kept_rows: int
    generated_tokens: float
    metrics: dict[str, float] = field(default_factory=dict)


class RolloutPlan(Protocol):
    """
    Where the groups of a generation batch come from, and how many rollouts each prompt gets.

    `collect(ctx, inputs)` receives this process's rows of the generation batch as the sampler drew them (each prompt
    repeated `num_generations` times) and returns a [`Collected`]. Every decision must come from gathered data, so
    that all processes take the same one and run the same collectives. A plan that keeps state across generation
    batches also has `state_dict()` / `load_state_dict(state)` (saved in checkpoints).
    """

    def collect(self, ctx: StepContext, inputs: list[dict]) -> Collected: ...


class RewardTap:
    """
    The one channel from TRL's reward hook to the step: the trainer's `_calculate_rewards` hands it the gathered
    rewards it returns to TRL, and [`RewardTap.capture`] holds them for the one generation call it is opened around
    (outside such a call, e.g. in evaluation, nothing is kept).
    """

    def __init__(self) -> None:
        self._box: dict[str, Any] | None = None

    @contextlib.contextmanager
    def capture(self) -> Iterator[dict[str, Any]]:
        """Opens the tap for one call; the yielded dict holds `"rewards"` (a numpy array) after it."""
        self._box = box = {}
        try:
            yield box
        finally:
            self._box = None

    def put(self, rewards: torch.Tensor) -> None:
        """Keeps `rewards` (all processes' rows x reward functions) for the open capture, if any."""
        if self._box is not None:
            if "rewards" in self._box:
                raise RuntimeError("TRL computed rewards twice in one generation call: lze-trl cannot tell them apart")
            self._box["rewards"] = rewards.detach().float().cpu().numpy()


def group_row_weights(weights: np.ndarray, num_generations: int, num_processes: int, rounds: int = 1) -> np.ndarray:
    """
    The weight of every process's rows, shape `(num_processes, rows per process)`, from the weights of groups laid
    out as TRL generates them: round after round, each round's rows split in order over the processes, group `g` of a
    round its rows `[g * G, (g + 1) * G)`.
    """
    rows = np.repeat(np.asarray(weights, dtype=np.float64), num_generations).reshape(rounds, num_processes, -1)
    return rows.transpose(1, 0, 2).reshape(num_processes, -1)


class FreshPlan:
    """The default plan: every prompt of the generation batch gets its `G` rollouts, once; the selector weighs the
    groups."""

    def collect(self, ctx: StepContext, inputs: list[dict]) -> Collected:
        generated = ctx.generate(inputs, ctx.num_generations)
        groups = ctx.score(*generated.groups(ctx.num_generations), 0)
        weights = ctx.select(groups)
        return collected_rounds(ctx, [generated], groups, weights)


def collected_rounds(ctx: StepContext, rounds: list[Generated], groups: GroupBatch, weights: np.ndarray) -> Collected:
    """A [`Collected`] of generation rounds laid out as TRL generates them (see [`group_row_weights`]), their rows
    merged round after round; plain GRPO's rows (one round, every weight 1) are left untouched."""
    from .batching import concat_batches

    rows = rounds[0].rows if len(rounds) == 1 else concat_batches([r.rows for r in rounds], ctx.pad_token_id)
    generated = float(sum(r.rows["num_items_in_batch"].item() for r in rounds))
    metrics = {"lze/fresh_rollouts": sum(len(r.prompt_ids) for r in rounds)}
    if len(rounds) == 1 and np.all(weights == 1.0):
        return Collected(rows, groups, weights, None, 0, generated, metrics)
    processes = ctx.accelerator.num_processes
    every = group_row_weights(weights, ctx.num_generations, processes, len(rounds))
    local = every[ctx.accelerator.process_index]
    return Collected(rows, groups, weights, local, int((every > 0).sum(axis=1).max()), generated, metrics)


def run_step(plan: RolloutPlan, ctx: StepContext, run: Any, inputs: list[dict], step: int) -> Batch:
    """
    One training generation batch: the plan collects and scores its groups, the run records them, the update keeps
    only the positively weighted rows (advantages scaled by the weight, zero-weight padding to the same count on every
    process and a multiple of `steps_per_generation`), and the batch's metrics go to `ctx.log`.

    Args:
        plan ([`RolloutPlan`]):
            Where the groups come from.
        ctx ([`StepContext`]):
            The step's context.
        run ([`~lze_trl.run.LZERun`]):
            The run's LZE state (records the groups, gives the batch's metrics).
        inputs (`list[dict]`):
            This process's rows of the generation batch.
        step (`int`):
            The Trainer's global step (for the selection log).

    Returns:
        `dict`: the rows this process hands TRL's update.
    """
    collected = plan.collect(ctx, inputs)
    metrics = run.record(collected.groups, collected.weights, step)
    metrics.update(collected.metrics)
    rows = collected.rows
    if collected.row_weights is not None:
        local = torch.as_tensor(collected.row_weights, dtype=torch.float32)
        rows["advantages"] = rows["advantages"] * local.to(rows["advantages"].device)
        rows = pad_rows(rows, local > 0, collected.max_kept_rows, run.args.steps_per_generation, ctx.accelerator)
    metrics["lze/update_tokens"] = rows["num_items_in_batch"].item()
    metrics["lze/update_tokens_saved_frac"] = 1.0 - metrics["lze/update_tokens"] / max(collected.generated_tokens, 1.0)
    ctx.log(metrics)
    return rows
