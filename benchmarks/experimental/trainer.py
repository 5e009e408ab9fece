"""[`ExperimentalLZETrainer`]: [`LZEGRPOTrainer`] with the modes that lost their benchmarks, as plugins of its step
and its planning.

- DAPO's refill rounds (`dapo_max_resample`, with `selector="dapo"`): a rollout plan ([`RefillPlan`]).
- Rollout replay (`fresh_fraction < 1`): a rollout plan ([`ReplayPlan`]) with its buffer in the run's state and each
  process's rows beside the checkpoint.
- The rollout filter (`rollout_filter`): an observer of scored groups, an epoch planner or a per-batch sampler, its
  state in the run's.

The core never imports this package; it only offers the hooks used here: `make_rollout_plan`, the run's
`observers`, `planners` and `parts`, the sampler's `_batches`.
"""

from __future__ import annotations

import warnings
from typing import Any

from datasets import IterableDataset

from lze_trl import LZEGRPOTrainer, LZEWarning
from lze_trl.step import RolloutPlan, StepContext

from .config import ExperimentalConfig, check_replay
from .refill import PromptPool, RefillPlan
from .replay import ReplayBuffer, load_rows, save_rows
from .replay_plan import ReplayPlan
from .rollout_filter import build_rollout_filter
from .sampler import BatchPlanningSampler, BatchRecord


PRIVATE_NAMES = {
    "_get_per_token_logps_and_entropies": "rollout replay: the log-probabilities of the policy that generated a "
    "group, recorded for its replay, and the importance ratios of the replayed tokens",
}
"""The private names of TRL's `GRPOTrainer` this package uses beyond the core's (`lze_trl.trl_coupling`), pinned by
`tests/test_trl_coupling.py`."""


class FilterMetrics:
    """A rollout plan that adds the rollout filter's metrics of the generation batch to those of `plan`."""

    def __init__(self, plan: RolloutPlan, rollout_filter: Any) -> None:
        self.plan, self.rollout_filter = plan, rollout_filter

    def collect(self, ctx: StepContext, inputs: list[dict]):
        collected = self.plan.collect(ctx, inputs)
        collected.metrics.update({f"lze/{k}": v for k, v in self.rollout_filter.metrics().items()})
        return collected


class EpochFilter:
    """The rollout filter as an epoch planner: it must not skip the epoch's revisits of pruned prompts."""

    def __init__(self, rollout_filter: Any, pruner: Any) -> None:
        self.rollout_filter, self.pruner = rollout_filter, pruner

    def exempt(self):
        return self.pruner.revisited_ids if self.pruner is not None else None

    def plan_epoch(self, epoch: int, order):
        return self.rollout_filter.plan_epoch(epoch, order, self.exempt())

    def plan_batch(self, epoch: int, batch: int, order, cursor: int, size: int):
        return self.rollout_filter.plan_batch(epoch, batch, order, cursor, size, exempt=self.exempt())


class ExperimentalLZETrainer(LZEGRPOTrainer):
    """
    [`LZEGRPOTrainer`] that also runs the experimental modes of an [`ExperimentalConfig`] (see the module docstring).
    With every experimental setting off it trains exactly as [`LZEGRPOTrainer`].
    """

    def __init__(self, model: Any, reward_funcs: Any = None, args: Any = None, train_dataset=None, **kwargs: Any):
        if not isinstance(args, ExperimentalConfig):
            raise TypeError("ExperimentalLZETrainer needs args=ExperimentalConfig(...).")
        modes = {
            f"fresh_fraction={args.fresh_fraction}": args.fresh_fraction < 1,
            f"rollout_filter={args.rollout_filter!r}": args.rollout_filter != "none",
            f"dapo_max_resample={args.dapo_max_resample}": args.dapo_max_resample > 0,
        }
        for setting, on in modes.items():
            if on and isinstance(train_dataset, IterableDataset):
                raise ValueError(
                    f"{setting} needs a map-style train dataset (it plans which prompts an epoch rolls out, or draws "
                    "extra prompts by index); got an IterableDataset. Pass a `datasets.Dataset`."
                )
        self.rollout_filter = self.replay = None
        self.batch_record: BatchRecord | None = None
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kwargs)
        if self.replay is not None:
            check_replay(self.args, self.num_generations, self.args.per_device_train_batch_size)
            self.replay.process_index = self.accelerator.process_index

    def make_rollout_plan(self) -> RolloutPlan:
        args, run, row_ids = self.args, self.lze, self.prompt_ids.row_ids
        plan = super().make_rollout_plan()
        epoch_filter = None
        if args.rollout_filter != "none" and row_ids is not None:
            self.rollout_filter = build_rollout_filter(
                args, self.train_dataset, row_ids, self.num_generations, run.state
            )
            run.observers.append(
                lambda batch: self.rollout_filter.observe(batch.prompt_ids, batch.pass_rates, batch.live)
            )
            run.parts["rollout_filter"] = self.rollout_filter
            epoch_filter = EpochFilter(self.rollout_filter, run.pruner)
            if args.rollout_filter_granularity == "batch":
                self.batch_record = run.parts["batch_plan"] = BatchRecord()
            run.planners.append(_Unfiltered() if self.batch_record is not None else epoch_filter)
        if args.fresh_fraction < 1 and row_ids is not None:
            self.replay = ReplayBuffer(args.replay_buffer_size, args.replay_max_staleness, args.replay_max_uses)
            main = self.accelerator.is_main_process
            plan = run.parts["replay"] = ReplayPlan(
                self.replay,
                args.fresh_fraction,
                run.state,
                logps=self._policy_logps,
                clip_range=(1.0 - self.epsilon_low, 1.0 + self.epsilon_high),
                warn=lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None,
            )
        elif args.dapo_max_resample > 0 and row_ids is not None:
            per_batch = epoch_filter.plan_batch if self.batch_record is not None else None
            pool = PromptPool(self.train_dataset, row_ids, run.position, args.seed, plan_batch=per_batch)
            plan = RefillPlan(args.dapo_max_resample, pool)
        return FilterMetrics(plan, self.rollout_filter) if self.rollout_filter is not None else plan

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if self.batch_record is not None:
            planner = EpochFilter(self.rollout_filter, self.lze.pruner)
            self.train_sampler = BatchPlanningSampler(
                sampler.num_samples,
                sampler.mini_repeat_count,
                sampler.batch_size,
                sampler.repeat_count,
                sampler.shuffle,
                sampler.seed,
                planner=sampler.planner,
                position=sampler.position,
                plan_batch=planner.plan_batch,
                record=self.batch_record,
            )
        return self.train_sampler

    def _policy_logps(self, batch: dict[str, Any]):
        """Per-token log-probabilities of `batch`'s completions under the current policy (no gradient)."""
        import torch

        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                mask,
                batch["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    # ----------------------------------------------------------------------------------------------- checkpoints
    def save_lze_state(self, folder: str) -> None:
        """The core's LZE state; with replay, first each process's buffered rows beside it."""
        if self.replay is not None:
            save_rows(folder, self.accelerator.process_index, self.replay.rows_state())
            self.accelerator.wait_for_everyone()
        super().save_lze_state(folder)

    def load_lze_state(self, checkpoint: str) -> None:
        super().load_lze_state(checkpoint)
        if self.replay is not None:
            self.replay.load_rows_state(load_rows(checkpoint, self.accelerator.process_index))


class _Unfiltered:
    """The epoch planner of a per-batch filter: the epoch's order as it is (the batches are decided when drawn)."""

    def plan_epoch(self, epoch: int, order):
        return order
