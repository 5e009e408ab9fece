"""[`LZEGRPOTrainer`]: TRL's `GRPOTrainer` that updates only on learning-zone prompt groups.

The class holds only overrides of `GRPOTrainer`'s hooks; the method and its state live in [`LZERun`] (`run.py`), the
prompt identity in `prompt_ids.py`, the row bookkeeping in `batching.py` and the refill in `refill.py`. Every private
name of TRL's and transformers' trainers used here is listed, and pinned by a test, in `trl_coupling.py`.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import torch
from datasets import IterableDataset
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer

from . import state as lze_state_files
from .batching import keep_rows
from .config import as_lze_config
from .engines import warn_if_not_sharded
from .experimental.replay import load_rows, save_rows
from .experimental.replay_step import replay_generation_batch
from .experimental.settings import check_replay
from .guards import LZEWarning, check_dataset_fits_batch, check_map_style, checked_reward_func
from .prompt_ids import PromptIds, has_prompt_column
from .refill import refill_generation_batch
from .run import LZERun
from .sampler import LZERepeatSampler
from .selectors import GroupBatch, get_selector
from .state import PROMPTS_PARQUET, SELECTION_LOG_PARQUET, LZEStateError


logger = logging.get_logger(__name__)

__all__ = ["LZEGRPOTrainer", "PROMPTS_PARQUET", "SELECTION_LOG_PARQUET"]
# Loss types that normalise by a token count spanning the generation batch (`num_items_in_batch`): zero-weight
# padding rows change nothing in them. The others average over the rows of each micro-batch, padding included.
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "vespo")


class _LZECallback(TrainerCallback):
    """Writes the LZE state into every checkpoint, and ends an epoch-based run at the sampler's last epoch."""

    def __init__(self, trainer: LZEGRPOTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        if self.trainer._lze_enabled:
            self.trainer.save_lze_state(os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"))
        return control

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
    the groups take part in the policy update: the other rows are removed before TRL splits the batch into
    micro-batches. With `prune_solved=True`, prompts that stay fully solved are no longer rolled out, and a few are
    replayed each epoch.

    Takes the arguments of [`~trl.GRPOTrainer`]; `args` may be an [`LZEGRPOConfig`] or a plain `GRPOConfig` (which
    then gets the LZE defaults). With `selector="none"` it trains exactly as `GRPOTrainer`.

    Attributes:
        lze ([`LZERun`]):
            The run's LZE state: per-prompt table, selector, prune pool, selection log, counters.
        prompt_ids ([`~lze_trl.prompt_ids.PromptIds`]):
            How each row's prompt id is read.
    """

    _tag_names = ["trl", "grpo", "lze"]
    _name = "LZE"
    _paper = {
        "title": "Learning-Zone Energy: Online Data Selection for Efficient RL Post-Training",
        "id": "2605.17003",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{lze2026,
                title        = {{Learning-Zone Energy: Online Data Selection for Efficient RL Post-Training}},
                year         = 2026,
                eprint       = {arXiv:2605.17003},
            }"""),
    }

    def __init__(self, model: Any, reward_funcs: Any = None, args: GRPOConfig | None = None, train_dataset=None, **kw):
        args = as_lze_config(args, model)
        selector_cls = get_selector(args.selector)
        if args.num_generations < 2 and (selector_cls.needs_pass_rates or args.prune_solved):
            raise ValueError(
                f"num_generations={args.num_generations} is invalid with selector={args.selector!r}: pass rates need "
                "a group of rollouts per prompt; set num_generations >= 2 (the paper uses 8)."
            )
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
        # The per-prompt state is keyed by a prompt identity read from each row (`prompt_ids`). Without a train
        # dataset (an environment_factory owns the prompts) or with an iterable one without `prompt`, there is none.
        self._lze_enabled = train_dataset is not None and (not iterable or has_prompt_column(train_dataset))
        if not self._lze_enabled and (args.selector != "none" or args.prune_solved):
            warnings.warn(
                f"selector={args.selector!r} needs a stable identity for each prompt: a map-style train dataset or an "
                "iterable one with a `prompt` column; got "
                + ("no train dataset" if train_dataset is None else "an IterableDataset without `prompt`")
                + ". This run trains as plain GRPO (selector='none', no pruning). Pass a `datasets.Dataset` to "
                "use LZE.",
                LZEWarning,
                stacklevel=2,
            )
            args.selector, args.prune_solved, args.rollout_filter = "none", False, "none"
        if self._lze_enabled and iterable:
            check_map_style(args)
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kw)
        names = list(self.reward_func_names)
        self._correctness_index = self._resolve_correctness_reward(args.correctness_reward)
        # Reward functions that return something other than one number (or None) per completion fail in TRL with a
        # tensor-construction error naming neither the function nor the value: check them by name instead.
        self.reward_funcs = [
            f if isinstance(f, torch.nn.Module) or not callable(f) else checked_reward_func(f, name)
            for f, name in zip(self.reward_funcs, names)
        ]
        map_style = self._lze_enabled and not iterable
        if map_style:
            check_dataset_fits_batch(len(self.train_dataset), self.args.generation_batch_size, self.num_generations)
        self.prompt_ids = PromptIds(self.train_dataset if map_style else None)
        main = self.accelerator.is_main_process
        self.lze = LZERun(
            args,
            self.num_generations,
            self.prompt_ids.row_ids,
            dataset=self.train_dataset if map_style else None,
            correctness_name=names[self._correctness_index],
            warn=lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None,
        )
        if self.lze.replay is not None:
            self.lze.replay.process_index = self.accelerator.process_index
            check_replay(args, self.num_generations, self.args.per_device_train_batch_size)
        if args.selector != "none" and self.loss_type not in TOKEN_NORMALISED_LOSSES:
            logger.warning(
                f"loss_type={self.loss_type!r} averages over the rows of each micro-batch: the zero-weight rows that "
                "even out processes and micro-batches after selection dilute it slightly. loss_type='dapo' (TRL's "
                "default) is exact."
            )
        self.train_sampler: LZERepeatSampler | None = None
        self.add_callback(_LZECallback(self))
        warn_if_not_sharded(self)
        from .plotting.callback import add_plot_callback

        add_plot_callback(self)  # learning-zone histograms and plots in wandb/trackio, when either is a reporter

    @property
    def selection_log(self):
        """The run's [`~lze_trl.selection_log.SelectionLog`] (`trainer.lze.selection_log`)."""
        return self.lze.selection_log

    def _resolve_correctness_reward(self, spec: str | int | None) -> int:
        names = list(self.reward_func_names)
        if spec is None:
            return 0
        if isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
            if 0 <= int(spec) < len(names):
                return int(spec)
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
            planner=self.lze if self._lze_enabled else None,
        )
        if self.lze.resume is not None:
            resume = self.lze.resume
            self.train_sampler.resume(resume["epoch"], resume["batches_in_epoch"], resume["sampler"])
        return self.train_sampler

    def set_initial_training_values(self, args, dataloader):
        values = list(super().set_initial_training_values(args, dataloader))
        if self.lze.plans_rollouts and args.max_steps > 0:
            values[0] = sys.maxsize  # planned epochs are shorter: run epochs until max_steps, not a precomputed count
        return tuple(values)

    # ----------------------------------------------------------------------------------------------- selection
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.model.training:
            # Gathered over all processes: every process scores and selects from the same rewards.
            self.lze.pending_rewards = rewards
        return rewards

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self._lze_enabled:
            # Evaluation (nothing to select, no training state to touch), or a run without prompt identity.
            return super()._generate_and_score_completions(inputs)
        if self.lze.replay is not None:
            return replay_generation_batch(self, super()._generate_and_score_completions, inputs)
        local_ids = self.prompt_ids.of_rows(inputs)
        output = super()._generate_and_score_completions(inputs)
        batch = self._score(local_ids)
        weights = self.lze.select(batch)
        refills = 0
        if self.lze.selector.refill_rounds > 0:
            generate = super()._generate_and_score_completions
            output, batch, weights, refills = refill_generation_batch(self, generate, inputs, output, batch, weights)
        metrics = self.lze.record(batch, weights, self.state.global_step)
        if refills or self.lze.selector.refill_rounds > 0:
            metrics["lze/refill_rounds"] = refills
        if self.train_sampler is not None:
            metrics["lze/rollouts_skipped"] = self.train_sampler.groups_skipped * self.num_generations
        tokens_before = output["num_items_in_batch"].item()
        if refills > 0 or not np.all(weights == 1.0):  # plain GRPO keeps its rows untouched
            if "pixel_values" in output or "num_images" in output:
                raise NotImplementedError(
                    f"selector={self.args.selector!r} does not support image inputs yet; set selector='none'."
                )
            # Rows in generation order (round, process, local row) -> this process's rows of every round, in order.
            processes = self.accelerator.num_processes
            row_weights = np.repeat(weights, self.num_generations).reshape(refills + 1, processes, -1)
            row_weights = row_weights.transpose(1, 0, 2).reshape(processes, -1)
            local = torch.as_tensor(row_weights[self.accelerator.process_index], dtype=torch.float32)
            output["advantages"] = output["advantages"] * local.to(output["advantages"].device)
            output = keep_rows(output, row_weights > 0, self.accelerator, self.args.steps_per_generation)
        metrics["lze/update_tokens"] = output["num_items_in_batch"].item()
        metrics["lze/update_tokens_saved_frac"] = 1.0 - metrics["lze/update_tokens"] / max(tokens_before, 1.0)
        for name, value in metrics.items():
            self._metrics["train"][name].append(value)
        return output

    def _score(self, local_ids: np.ndarray, refill_round: int = 0) -> GroupBatch:
        """Scores the groups just generated (this process's rows have the prompt ids `local_ids`) into the state."""
        G = self.num_generations
        ids = self.accelerator.gather(torch.as_tensor(local_ids, device=self.accelerator.device)).cpu().numpy()[::G]
        rewards = self.lze.pending_rewards.float()
        self.lze.pending_rewards = None
        totals = (rewards * self.reward_weights.to(rewards.device).float().unsqueeze(0)).nansum(dim=1)
        correctness = rewards[:, self._correctness_index].cpu().numpy().reshape(-1, G)
        return self.lze.score(ids, correctness, totals.cpu().numpy().reshape(-1, G), refill_round)

    def training_step(self, model, inputs, num_items_in_batch):
        sampler = self.train_sampler
        self.lze.count_micro_step(sampler.epoch if sampler is not None else None)
        resume, self.lze.resume = self.lze.resume, None
        if resume is not None and sampler is not None and not sampler.resumed_at_epoch_end:
            # Mid-epoch, nothing between the checkpoint and this step drew random numbers in the uninterrupted run,
            # but the resumed run created its dataloader iterator (one draw) after the Trainer restored the RNG
            # states. At an epoch's end both runs created a new iterator after the checkpoint: nothing to redo.
            self._load_rng_state(resume["checkpoint"])
        return super().training_step(model, inputs, num_items_in_batch)

    # ----------------------------------------------------------------------------------------------- checkpoints
    def lze_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The LZE training state as saved in checkpoints: arrays (the run's and the sampler's) and counters."""
        arrays = self.lze.state_dict()
        if self.train_sampler is not None:
            arrays.update({f"sampler.{k}": v for k, v in self.train_sampler.state_dict().items()})
        return arrays, {"step": self._step, **self.lze.position(), "dataset": self.prompt_ids.fingerprint}

    def save_lze_state(self, folder: str) -> None:
        """
        Writes the LZE state into a checkpoint `folder`: on the main process the tables, then the state file; on
        every process, with rollout replay, the rows of the buffered groups it holds (before the state file).
        """
        if self.lze.replay is not None:
            save_rows(folder, self.accelerator.process_index, self.lze.replay.rows_state())
            self.accelerator.wait_for_everyone()
        if self.args.should_save:
            self.save_lze_tables(folder)
            lze_state_files.save_state(folder, *self.lze_state())

    def prompt_table(self, include_prompts: bool = True):
        """The per-prompt LZE state as a `pandas.DataFrame` ([`LZERun.prompt_table`]), with the train dataset's
        columns of each prompt's row when `include_prompts` (map-style datasets only)."""
        return self.lze.prompt_table(
            self.train_dataset if include_prompts and self.prompt_ids.row_ids is not None else None
        )

    def save_lze_tables(self, folder: str) -> None:
        """Writes the prompt table and the selection log as parquet files into `folder`."""
        os.makedirs(folder, exist_ok=True)
        lze_state_files.save_table(self.prompt_table(), os.path.join(folder, PROMPTS_PARQUET))
        lze_state_files.save_table(self.selection_log.to_pandas(), os.path.join(folder, SELECTION_LOG_PARQUET))

    def load_lze_state(self, checkpoint: str) -> None:
        """
        Restores the LZE state saved in `checkpoint` (a checkpoint folder): per-prompt table, selector, prune pool,
        sampler position, counters and selection log.

        Raises:
            [`~lze_trl.state.LZEStateError`]: when the state file or the selection log is missing or corrupt, or the
            state was recorded on another train dataset (size or prompts).
        """
        arrays, counters = lze_state_files.load_state(checkpoint)
        lze_state_files.check_fingerprint(counters.get("dataset"), self.prompt_ids.fingerprint, checkpoint)
        log_frame = lze_state_files.load_selection_log(checkpoint)
        try:
            self.lze.load_state_dict(arrays)
        except (KeyError, ValueError) as error:
            raise LZEStateError(f"The LZE state in {checkpoint!r} does not fit this run ({error}).") from error
        self.selection_log.load_pandas(log_frame)
        if self.lze.replay is not None:
            self.lze.replay.load_rows_state(load_rows(checkpoint, self.accelerator.process_index))
        self._step = counters["step"]
        sampler = {k[len("sampler.") :]: v for k, v in arrays.items() if k.startswith("sampler.")}
        self.lze.resume = {**counters, "checkpoint": checkpoint, "sampler": sampler or None}
        self.lze.set_position(counters["epoch"], counters["batches_in_epoch"])

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
            decides = self.args.selector != "none" or self.lze.plans_rollouts
            if decides and self.args.resume_lze_state != "fresh":
                raise LZEStateError(
                    f"{error} Resuming would silently restart LZE's per-prompt state. Resume from a complete "
                    "checkpoint of this run with the same train dataset, or set resume_lze_state='fresh' to resume "
                    "the model and optimizer with a fresh LZE state on purpose."
                ) from error
            warnings.warn(f"{error} The run resumes with a fresh LZE state.", LZEWarning, stacklevel=3)
            return False

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"No checkpoint found in output_dir={self.args.output_dir!r} to resume from.")
        has_state = bool(resume_from_checkpoint) and self._resume_lze_state(resume_from_checkpoint)
        # The sampler resumes at its own (epoch, batch): planned epochs are shorter than the Trainer's
        # `global_step // steps_per_epoch` arithmetic assumes, so the Trainer must not skip batches itself.
        ignore_data_skip = self.args.ignore_data_skip
        self.args.ignore_data_skip = ignore_data_skip or has_state
        try:
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.args.ignore_data_skip = ignore_data_skip
        if self.args.should_save and self._lze_enabled:
            self.save_lze_tables(self.args.output_dir)
        return output
