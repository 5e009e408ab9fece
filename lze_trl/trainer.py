"""[`LZEGRPOTrainer`]: TRL's `GRPOTrainer` that updates only on learning-zone prompt groups.

Over 400 lines on purpose: one class holding only the overrides of `GRPOTrainer`'s hooks (construction, sampler,
generation and scoring, row marking, micro-step skipping, logging, checkpoint save/load and resume), which share the
per-run counters; the method (`energy`, `selection`, `selectors`), the refill (`refill`), the TRL mirrors
(`trl_coupling`) and the state files (`state`) live in their own modules.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import MISSING, fields
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather
from datasets import IterableDataset
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import get_config_model_id

from . import state as lze_state_files
from .batching import keep_rows
from .callbacks import add_plot_callback
from .config import LZE_FIELDS, LZEGRPOConfig, validate_lze_args
from .energy import EnergyScorer
from .engines import warn_if_not_sharded
from .guards import DeadRunDetector, check_dataset_fits_batch, checked_reward_func
from .judge import train_context
from .prompt_ids import PromptIds, has_prompt_column
from .pruning import PromptPruner
from .refill import refill_generation_batch
from .rollout_filter import build_rollout_filter
from .sampler import LZERepeatSampler
from .selection import group_pass_rates, is_dead, reward_spread_energies
from .selection_log import SelectionLog
from .selectors import GroupBatch, get_selector
from .state import PROMPTS_PARQUET, SELECTION_LOG_PARQUET, LZEStateError


logger = logging.get_logger(__name__)

__all__ = ["LZEGRPOTrainer", "PROMPTS_PARQUET", "SELECTION_LOG_PARQUET"]
# Loss types that normalise by a token count spanning the generation batch (`num_items_in_batch`): zero-weight
# padding rows change nothing in them. The others average over the rows of each micro-batch, padding included.
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "vespo")


def default_output_dir(model: Any) -> str:
    """The output directory of a run without `args`: named as `GRPOTrainer` names it, with `-LZE` for `-GRPO`."""
    name = model if isinstance(model, str) else get_config_model_id(model.config)
    return f"{name.split('/')[-1]}-LZE"


def as_lze_config(args: GRPOConfig | None, model: Any) -> LZEGRPOConfig:
    """Returns `args` as an [`LZEGRPOConfig`]; a plain `GRPOConfig` keeps its values and gets the LZE defaults."""
    if isinstance(args, LZEGRPOConfig):
        return args
    if args is None:
        return LZEGRPOConfig(default_output_dir(model))
    # Copy the already post-initialised values: running GRPOConfig.__post_init__ twice is not idempotent.
    lze_args = LZEGRPOConfig.__new__(LZEGRPOConfig)
    lze_args.__dict__.update(args.__dict__)
    for f in fields(LZEGRPOConfig):
        if f.name in LZE_FIELDS:
            setattr(lze_args, f.name, f.default_factory() if f.default is MISSING else f.default)
    validate_lze_args(lze_args)
    return lze_args


class _StopAtLastEpoch(TrainerCallback):
    """Ends an epoch-based run when the sampler (not the Trainer's own counter) has run its last epoch."""

    def __init__(self, trainer: LZEGRPOTrainer) -> None:
        self.trainer = trainer

    def on_epoch_end(self, args, state, control, **kwargs):
        sampler = self.trainer.train_sampler
        if args.max_steps <= 0 and sampler is not None and sampler.epoch + 1 >= math.ceil(args.num_train_epochs):
            control.should_training_stop = True
        return control


class LZEGRPOTrainer(GRPOTrainer):
    """
    Trainer for GRPO with Learning-Zone Energy (LZE) prompt selection.

    Rollouts are generated and rewarded for every prompt as in [`~trl.GRPOTrainer`]; then each prompt group is scored
    by its energy (difficulty anchor x outcome uncertainty x pass-rate momentum) and only the top `selection_ratio` of
    the groups take part in the policy update: the other rows are removed before the loss's forward/backward. With
    `prune_solved=True`, prompts that stay fully solved are no longer rolled out, and a few are replayed each epoch.

    Takes the arguments of [`~trl.GRPOTrainer`]; `args` may be an [`LZEGRPOConfig`] or a plain `GRPOConfig` (which
    then gets the LZE defaults). With `selector="none"` it trains exactly as `GRPOTrainer`.

    Attributes:
        scorer ([`EnergyScorer`]):
            Per-prompt pass-rate state and energies.
        pruner ([`PromptPruner`] or `None`):
            Prune/replay state, `None` when `prune_solved=False`.
    """

    _tag_names = ["trl", "grpo", "lze"]

    def __init__(self, model: Any, reward_funcs: Any = None, args: GRPOConfig | None = None, train_dataset=None, **kw):
        args = as_lze_config(args, model)
        selector_cls = get_selector(args.selector)
        selector = selector_cls(args)
        if args.num_generations < 2 and (selector_cls.needs_pass_rates or args.prune_solved):
            raise ValueError(
                f"num_generations={args.num_generations} is invalid with selector={args.selector!r}: pass rates need "
                "a group of rollouts per prompt; set num_generations >= 2 (the paper uses 8)."
            )
        # LZE keys its per-prompt state by a stable prompt identity read from each row (`prompt_ids`). Without a
        # train dataset (an environment_factory owns the prompts) or with an iterable one without `prompt`, there is
        # none.
        iterable = isinstance(train_dataset, IterableDataset)
        if (
            train_dataset is not None
            and kw.get("environment_factory") is None
            and not has_prompt_column(train_dataset)
        ):
            raise ValueError(
                "The train dataset has no `prompt` column: GRPO needs one (a string or a list of chat messages) "
                "unless an `environment_factory` provides the prompts. Rename your question column to `prompt`, e.g. "
                "`dataset.rename_column('question', 'prompt')`."
            )
        self._lze_enabled = train_dataset is not None and (not iterable or has_prompt_column(train_dataset))
        if not self._lze_enabled:
            if args.selector != "none" or args.prune_solved:
                warnings.warn(
                    f"selector={args.selector!r} needs a stable identity for each prompt: a map-style train dataset "
                    "(the row index) or an iterable one with a `prompt` column (a content hash); got "
                    + ("no train dataset" if train_dataset is None else "an IterableDataset without `prompt`")
                    + ". This run trains as plain GRPO (selector='none', no pruning). Pass a `datasets.Dataset` to "
                    "use LZE.",
                    stacklevel=2,
                )
            args.selector, args.prune_solved = "none", False
            selector_cls = get_selector("none")
            selector = selector_cls(args)
        if train_dataset is not None and self._lze_enabled:
            if args.prune_solved and isinstance(train_dataset, IterableDataset):
                raise ValueError(
                    "prune_solved=True needs a map-style train dataset (the sampler skips pruned indices); got an "
                    "IterableDataset. Set prune_solved=False or pass a `datasets.Dataset`."
                )
            if (selector.masks_rollouts or selector.refill_rounds > 0) and isinstance(train_dataset, IterableDataset):
                raise ValueError(
                    f"selector={args.selector!r} needs a map-style train dataset (it removes prompts from rollouts or "
                    "draws extra prompts by index); got an IterableDataset. Pass a `datasets.Dataset`"
                    + (
                        " or set dapo_max_resample=0."
                        if selector.refill_rounds > 0
                        else " or set softmax_allocate_rollouts=False."
                        if args.selector == "softmax"
                        else "."
                    )
                )
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kw)
        self._correctness_index = self._resolve_correctness_reward(args.correctness_reward)
        # Reward functions that return something other than one number (or None) per completion fail in TRL with a
        # tensor-construction error naming neither the function nor the value: check them by name instead.
        self.reward_funcs = [
            f if isinstance(f, torch.nn.Module) or not callable(f) else checked_reward_func(f, name)
            for f, name in zip(self.reward_funcs, self.reward_func_names)
        ]
        if self._lze_enabled and not isinstance(self.train_dataset, IterableDataset):
            check_dataset_fits_batch(len(self.train_dataset), self.args.generation_batch_size, self.num_generations)
        self._lze_dead_run = DeadRunDetector(args.pass_threshold, self.reward_func_names[self._correctness_index])
        map_style = self._lze_enabled and not isinstance(self.train_dataset, IterableDataset)
        self.prompt_ids = PromptIds(self.train_dataset if map_style else None)
        self.scorer = EnergyScorer(
            ema_decay=args.energy_ema_decay,
            momentum_weight=args.energy_momentum_weight,
            momentum_mode=args.energy_momentum_mode,
            d_init_min=args.energy_d_init_min,
            terms=args.energy_terms,
        )
        self.selector = selector
        self.selection_log = SelectionLog(args.selection_log_max_rows)
        self.pruner = None
        if args.prune_solved and self.train_dataset is not None:
            self.pruner = PromptPruner(
                len(self.train_dataset),
                solved_after=args.prune_solved_after,
                replay_fraction=args.prune_replay_fraction,
                seed=args.seed,
            )
        if args.selector != "none" and self.loss_type not in TOKEN_NORMALISED_LOSSES:
            logger.warning(
                f"loss_type={self.loss_type!r} averages over the rows of each micro-batch: the zero-weight rows that "
                "even out processes and micro-batches after selection dilute it slightly. loss_type='dapo' (TRL's "
                "default) is exact."
            )
        # Rollout-side selection (`rollout_filter`): skips prompts predicted dead before generating them
        self.rollout_filter = build_rollout_filter(args, self.train_dataset, self.num_generations)
        self.train_sampler: LZERepeatSampler | None = None
        self._lze_generation = 0  # generation batches selected so far: seeds each selection's noise
        self._lze_epoch = None  # sampler epoch of the batches counted below
        self._lze_batches_in_epoch = 0  # Trainer micro-steps taken in that epoch (what a resume skips)
        self._lze_rollouts_skipped = 0
        self._lze_resume: dict[str, Any] | None = None  # pending resume: sampler position and RNG reload
        self.add_callback(_StopAtLastEpoch(self))
        warn_if_not_sharded(self)
        add_plot_callback(self)  # learning-zone histograms and plots in wandb/trackio when either is a reporter

    def _resolve_correctness_reward(self, spec: str | int | None) -> int:
        names = list(self.reward_func_names)
        if spec is None:
            return 0
        if isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
            index = int(spec)
            if 0 <= index < len(names):
                return index
        elif spec in names:
            return names.index(spec)
        raise ValueError(
            f"correctness_reward={spec!r} is not among the reward functions {names}: set it to one of these names "
            f"or to an index in [0, {len(names) - 1}]."
        )

    # ----------------------------------------------------------------------------------------------- data
    def _get_train_sampler(self, dataset=None):
        dataset = self.train_dataset if dataset is None else dataset
        self.train_sampler = LZERepeatSampler(
            num_samples=len(dataset),
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
            pruner=self.pruner,
            rollout_filter=self.selector.rollout_mask,
            rollout_counts=self.selector.rollout_counts,
            rollout_planner=self._rollout_filter_hook("epoch", "plan_epoch"),
            batch_planner=self._rollout_filter_hook("batch", "plan_batch"),
            row_ids=self.prompt_ids.row_ids,
        )
        if self._lze_resume is not None:
            self.train_sampler.resume(
                self._lze_resume["epoch"],
                self._lze_resume["batches_in_epoch"],
                self._lze_resume.get("epoch_keep"),
                self._lze_resume.get("epoch_counts"),
                self._lze_resume.get("stream"),
            )
        return self.train_sampler

    def _rollout_filter_hook(self, granularity: str, name: str):
        """The rollout filter's planning method the sampler calls at `rollout_filter_granularity`, else `None`."""
        if self.rollout_filter is None or self.args.rollout_filter_granularity != granularity:
            return None
        return getattr(self.rollout_filter, name)

    def set_initial_training_values(self, args, dataloader):
        values = list(super().set_initial_training_values(args, dataloader))
        skips = self.pruner is not None or self.selector.masks_rollouts or self.rollout_filter is not None
        if skips and args.max_steps > 0:
            values[0] = sys.maxsize  # pruned epochs are shorter: run epochs until max_steps, not a precomputed count
        return tuple(values)

    # ----------------------------------------------------------------------------------------------- selection
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # Keep the rewards gathered over all processes: every process takes the same, global, selection from them.
        self._lze_rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._lze_rewards_per_func

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self._lze_enabled:
            # Evaluation (nothing to select, no training state to touch), or a run without prompt identity.
            return super()._generate_and_score_completions(inputs)
        local_ids = self.prompt_ids.of_rows(inputs)
        output = super()._generate_and_score_completions(inputs)

        G, num_processes = self.num_generations, self.accelerator.num_processes
        prompt_ids, rewards, pass_rates, energies = self._lze_observe(local_ids)
        weights = self._lze_select(prompt_ids, pass_rates, rewards, energies, refill_round=0)
        refills = 0
        if self.selector.refill_rounds > 0:
            generate = super()._generate_and_score_completions
            output, prompt_ids, pass_rates, energies, weights, refills = refill_generation_batch(
                self, generate, inputs, output, prompt_ids, pass_rates, energies, weights
            )
        self.scorer.record_selection(prompt_ids, weights > 0)
        self.selection_log.append(
            self.state.global_step, self._lze_generation, prompt_ids, pass_rates, energies, weights
        )
        self._lze_generation += 1

        metrics = {
            "lze/pass_rate_mean": float(np.nanmean(pass_rates)) if np.isfinite(pass_rates).any() else 0.0,
            "lze/energy_mean": float(energies.mean()),
            "lze/dead_frac": float(is_dead(pass_rates).mean()),
            "lze/selected_frac": float((weights > 0).mean()),
            "lze/update_rows": int((weights > 0).sum()) * G,
        }
        if self.selector.refill_rounds > 0:
            metrics["lze/refill_rounds"] = refills
        metrics.update({f"lze/{k}": v for k, v in self.selector.metrics().items()})
        if self.pruner is not None:
            metrics["lze/pruned_prompts"] = self.pruner.num_pruned
            metrics["lze/replayed_prompts"] = self.train_sampler.epoch_stats["replayed_prompts"]
        if self.train_sampler is not None:
            skipped = self._lze_rollouts_skipped
            if self.train_sampler.batch_planner is not None:  # skipped while filling batches, not at epoch starts
                skipped += int(self.rollout_filter.totals["skipped"]) * self.num_generations
            metrics["lze/rollouts_skipped"] = skipped
        if self.rollout_filter is not None:
            metrics.update({f"lze/{k}": v for k, v in self.rollout_filter.metrics().items()})

        tokens_before = output["num_items_in_batch"].item()
        if refills > 0 or not np.all(weights == 1.0):  # plain GRPO keeps its rows untouched
            if "pixel_values" in output or "num_images" in output:
                raise NotImplementedError(
                    f"selector={self.args.selector!r} does not support image inputs yet; set selector='none'."
                )
            # Rows in generation order (round, process, local row) -> this process's rows of every round, in order.
            row_weights = np.repeat(weights, G).reshape(refills + 1, num_processes, -1).transpose(1, 0, 2)
            row_weights = row_weights.reshape(num_processes, -1)
            local_weights = torch.as_tensor(row_weights[self.accelerator.process_index], dtype=torch.float32)
            output["advantages"] = output["advantages"] * local_weights.to(output["advantages"].device)
            output = keep_rows(output, row_weights > 0, self.accelerator, self.args.steps_per_generation)
        tokens_after = output["num_items_in_batch"].item()
        metrics["lze/update_tokens"] = tokens_after
        metrics["lze/update_tokens_saved_frac"] = 1.0 - tokens_after / max(tokens_before, 1.0)
        for name, value in metrics.items():
            self._metrics["train"][name].append(value)
        return output

    def _lze_observe(self, local_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """
        Scores the groups just generated for this process's rows `local_ids` (prompt ids, all processes together)
        and updates the per-prompt state. Groups held alive only by the spread of non-binary rewards get the energy
        of [`reward_spread_energies`].
        """
        G = self.num_generations
        local = torch.tensor(local_ids, dtype=torch.long, device=self.accelerator.device)
        prompt_ids = gather(local).cpu().numpy()[::G]
        rewards_per_func = self._lze_rewards_per_func.float()
        rewards = rewards_per_func[:, self._correctness_index].cpu().numpy().reshape(-1, G)
        weights = self.reward_weights.to(rewards_per_func.device).float()
        totals = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1).cpu().numpy().reshape(-1, G)
        pass_rates = group_pass_rates(rewards, G, self.args.pass_threshold)
        energies = reward_spread_energies(self.scorer.score(prompt_ids, pass_rates), pass_rates, rewards, totals)
        if self.pruner is not None:
            self.pruner.observe(prompt_ids, pass_rates)
        message = self._lze_dead_run.observe(pass_rates, rewards)
        if message is not None and self.accelerator.is_main_process:
            warnings.warn(message, UserWarning, stacklevel=2)
        if self.rollout_filter is not None:
            self.rollout_filter.observe(prompt_ids, pass_rates)
        return prompt_ids, rewards, pass_rates, energies

    def _lze_select(self, prompt_ids, pass_rates, rewards, energies, refill_round: int) -> np.ndarray:
        seed = [self.args.seed, self._lze_generation] + ([refill_round] if refill_round > 0 else [])
        batch = GroupBatch(prompt_ids, pass_rates, rewards, energies, np.random.default_rng(seed))
        return np.asarray(self.selector.select(batch), dtype=np.float64)

    # ----------------------------------------------------------------------------------------------- steps
    def training_step(self, model, inputs, num_items_in_batch):
        self._count_batch()
        if self._lze_resume is not None:
            # Mid-epoch, nothing between the checkpoint and this step drew random numbers in the uninterrupted run,
            # but the resumed run created its dataloader iterator (one draw) after the Trainer restored the RNG
            # states. At an epoch's end both runs created a new iterator after the checkpoint: nothing to redo.
            if not self.train_sampler.resumed_at_epoch_end:
                self._load_rng_state(self._lze_resume["checkpoint"])
            self._lze_resume = None
        return super().training_step(model, inputs, num_items_in_batch)

    def _count_batch(self) -> None:
        epoch = self.train_sampler.epoch if self.train_sampler is not None else None
        if epoch != self._lze_epoch:
            # A new epoch starts: the rollouts of the prompts its pool left out are saved for all of it.
            if self.train_sampler is not None and self._lze_epoch is not None:
                self._lze_rollouts_skipped += self.train_sampler.epoch_stats["skipped_prompts"] * self.num_generations
            self._lze_epoch, self._lze_batches_in_epoch = epoch, 0
        self._lze_batches_in_epoch += 1

    # ----------------------------------------------------------------------------------------------- checkpoints
    def lze_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The LZE training state: arrays (scorer, pruner) and counters, as saved in checkpoints."""
        arrays = {f"scorer.{k}": v for k, v in self.scorer.state_dict().items()}
        arrays.update({f"selector.{k}": v for k, v in self.selector.state_dict().items()})
        if self.pruner is not None:
            arrays.update({f"pruner.{k}": v for k, v in self.pruner.state_dict().items()})
        if self.rollout_filter is not None:
            arrays.update({f"rollout_filter.{k}": v for k, v in self.rollout_filter.state_dict().items()})
        if self.train_sampler is not None and self.train_sampler.epoch_keep is not None:
            arrays["sampler.epoch_keep"] = self.train_sampler.epoch_keep.copy()
        if self.train_sampler is not None and self.train_sampler.epoch_counts is not None:
            arrays["sampler.epoch_counts"] = self.train_sampler.epoch_counts.copy()
        if self.train_sampler is not None and self.train_sampler.batch_planner is not None:
            sampler = self.train_sampler
            record = np.asarray(sampler.epoch_record, dtype=np.int64).reshape(len(sampler.epoch_record), -1)
            arrays["sampler.epoch_record"] = record
            arrays["sampler.epoch_stream"] = np.asarray([sampler.epoch_cursor, int(sampler.epoch_exhausted)])
        counters = {
            "generation": self._lze_generation,
            "step": self._step,
            "epoch": self._lze_epoch if self._lze_epoch is not None else 0,
            "batches_in_epoch": self._lze_batches_in_epoch,
            "rollouts_skipped": self._lze_rollouts_skipped,
            "dataset": self.prompt_ids.fingerprint,
        }
        return arrays, counters

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            # Tables first, the state file last: a state file in a checkpoint means its tables are complete too.
            self.save_lze_tables(folder)
            arrays, counters = self.lze_state()
            lze_state_files.save_state(folder, arrays, counters)

    def prompt_table(self, include_prompts: bool = True):
        """
        The per-prompt LZE state as a `pandas.DataFrame`, one row per prompt observed so far.

        Columns: `prompt_id`, `initial_pass_rate`, `ema_pass_rate`, `last_pass_rate`, `last_energy`,
        `num_observations`, `num_selected`; with pruning, `pruned` and `solved_streak`; for a map-style train
        dataset and `include_prompts=True`, the dataset's scalar columns (`prompt` text, `difficulty`, ...).

        Args:
            include_prompts (`bool`, *optional*, defaults to `True`):
                Join the train dataset's columns (map-style datasets only; `prompt_id` is the row index).
        """
        import pandas as pd

        table = pd.DataFrame(self.scorer.table())
        ids = table["prompt_id"].to_numpy()
        if self.pruner is not None:
            table["pruned"] = self.pruner.pruned[ids]
            table["solved_streak"] = self.pruner.solved_streak[ids]
        if include_prompts and self.train_dataset is not None and not isinstance(self.train_dataset, IterableDataset):
            rows = self.train_dataset.select(ids.tolist())
            for name in rows.column_names:
                values = rows[name]
                if name == "prompt" and values and not isinstance(values[0], str):
                    values = [m[-1]["content"] if m else "" for m in values]  # last message of a conversation
                if not values or isinstance(values[0], (str, int, float, bool)):
                    table[name] = values
        return table

    def save_lze_tables(self, folder: str) -> None:
        """Writes the prompt table and the selection log as parquet files into `folder`."""
        os.makedirs(folder, exist_ok=True)
        lze_state_files.save_table(self.prompt_table(), os.path.join(folder, PROMPTS_PARQUET))
        lze_state_files.save_table(self.selection_log.to_pandas(), os.path.join(folder, SELECTION_LOG_PARQUET))

    def load_lze_state(self, checkpoint: str) -> None:
        """
        Restores the LZE state saved in `checkpoint` (a checkpoint folder): per-prompt state, selector, prune pool,
        sampler position, counters and selection log.

        Raises:
            [`~lze_trl.state.LZEStateError`]: when the state file or the selection log is missing or corrupt, or the
            state was recorded on another train dataset (size or prompts).
        """
        arrays, counters = lze_state_files.load_state(checkpoint)
        lze_state_files.check_fingerprint(counters.get("dataset"), self.prompt_ids.fingerprint, checkpoint)
        log_path = os.path.join(checkpoint, SELECTION_LOG_PARQUET)
        if not os.path.isfile(log_path):
            raise LZEStateError(f"The checkpoint {checkpoint!r} has no selection log {SELECTION_LOG_PARQUET!r}.")
        try:
            import pandas as pd

            log_frame = pd.read_parquet(log_path)
        except Exception as error:
            raise LZEStateError(f"The selection log {log_path!r} is corrupt ({type(error).__name__}).") from error
        self.scorer.load_state_dict({k[len("scorer.") :]: v for k, v in arrays.items() if k.startswith("scorer.")})
        self.selector.load_state_dict(
            {k[len("selector.") :]: v for k, v in arrays.items() if k.startswith("selector.")}
        )
        if self.pruner is not None:
            self.pruner.load_state_dict({k[len("pruner.") :]: v for k, v in arrays.items() if k.startswith("pruner.")})
        self.selection_log.load_pandas(log_frame)
        if self.rollout_filter is not None:
            prefix = "rollout_filter."
            state = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            self.rollout_filter.load_state_dict(state)
        self._lze_generation = counters["generation"]
        self._step = counters["step"]
        self._lze_epoch = counters["epoch"]
        self._lze_batches_in_epoch = counters["batches_in_epoch"]
        self._lze_rollouts_skipped = counters["rollouts_skipped"]
        self._lze_resume = {
            **counters,
            "checkpoint": checkpoint,
            "epoch_keep": arrays.get("sampler.epoch_keep"),
            "epoch_counts": arrays.get("sampler.epoch_counts"),
            "stream": self._saved_stream(arrays),
        }

    @staticmethod
    def _saved_stream(arrays: dict[str, np.ndarray]) -> tuple[list[list[int]], int, bool] | None:
        """The per-batch planner's position saved in a checkpoint: (batches of the epoch, cursor, exhausted)."""
        if "sampler.epoch_stream" not in arrays:
            return None
        cursor, exhausted = (int(v) for v in arrays["sampler.epoch_stream"])
        return [list(map(int, row)) for row in arrays["sampler.epoch_record"]], cursor, bool(exhausted)

    def _resume_lze_state(self, checkpoint: str) -> bool:
        """
        Loads the LZE state of `checkpoint` for a resumed run; returns whether there was one to load.

        A checkpoint without a usable LZE state (missing, corrupt, recorded on another train dataset) is refused with
        an [`~lze_trl.state.LZEStateError`] when the state decides what is trained (any selector but `"none"`, or
        forward pruning), unless `resume_lze_state="fresh"`: then, as for `selector="none"`, the run resumes with a
        fresh LZE state after a warning.
        """
        if not self._lze_enabled:
            return False
        try:
            self.load_lze_state(checkpoint)
            return True
        except LZEStateError as error:
            decides = self.args.selector != "none" or self.pruner is not None
            if decides and self.args.resume_lze_state != "fresh":
                raise LZEStateError(
                    f"{error} Resuming would silently restart LZE's per-prompt state. Resume from a complete "
                    "checkpoint of this run with the same train dataset, or set resume_lze_state='fresh' to resume "
                    "the model and optimizer with a fresh LZE state on purpose."
                ) from error
            warnings.warn(f"{error} The run resumes with a fresh LZE state.", UserWarning, stacklevel=3)
            return False

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"No checkpoint found in output_dir={self.args.output_dir!r} to resume from.")
        has_state = bool(resume_from_checkpoint) and self._resume_lze_state(resume_from_checkpoint)
        self.selector.on_train_begin(train_context(self))  # e.g. the prefilter judges the prompts with the policy
        if not has_state:
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        else:
            # The sampler resumes at its own (epoch, batch): pruned epochs are shorter than the Trainer's
            # `global_step // steps_per_epoch` arithmetic assumes, so the Trainer must not skip batches itself.
            ignore_data_skip, self.args.ignore_data_skip = self.args.ignore_data_skip, True
            try:
                output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
            finally:
                self.args.ignore_data_skip = ignore_data_skip
        if self.args.should_save and self._lze_enabled:
            self.save_lze_tables(self.args.output_dir)
        return output
