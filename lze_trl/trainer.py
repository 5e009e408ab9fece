"""[`LZEGRPOTrainer`]: TRL's `GRPOTrainer` that updates only on learning-zone prompt groups.

The class holds only overrides of `GRPOTrainer`'s hooks; one generation batch runs in `step.py` (through a rollout
plan), the method and its state live in [`LZERun`] (`run.py`), the prompt identity in `prompt_ids.py`. Every private
name of TRL's and transformers' trainers used here is listed, and pinned by a test, in `trl_coupling.py`.
"""

from __future__ import annotations

import contextlib
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
from .config import as_lze_config
from .engines import warn_if_not_sharded
from .guards import LZEWarning, check_dataset_fits_batch, check_map_style, check_probe, checked_reward_func
from .probe import ProbePlan, RolloutCache
from .prompt_ids import PromptIds, has_prompt_column
from .run import LZERun
from .sampler import LZERepeatSampler
from .selectors import get_selector
from .state import PROMPTS_PARQUET, SELECTION_LOG_PARQUET, LZEStateError
from .step import FreshPlan, Generated, RewardTap, RolloutPlan, StepContext, run_step


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
        if self.trainer.lze_enabled:
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
    revisited each epoch.

    Takes the arguments of [`~trl.GRPOTrainer`]; `args` may be an [`LZEGRPOConfig`] or a plain `GRPOConfig` (which
    then gets the LZE defaults); the trainer works on its own copy of it. With `selector="none"` it trains exactly as
    `GRPOTrainer`.

    Attributes:
        lze ([`LZERun`]):
            The run's LZE state: per-prompt table, selector, prune pool, selection log, position in the data.
        prompt_ids ([`~lze_trl.prompt_ids.PromptIds`]):
            How each row's prompt id is read.
        rollout_plan ([`~lze_trl.step.RolloutPlan`]):
            Where each generation batch's groups come from ([`~LZEGRPOTrainer.make_rollout_plan`]).
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
        if args.num_generations < 2 and (get_selector(args.selector).needs_pass_rates or args.prune_solved):
            raise ValueError(
                f"num_generations={args.num_generations} is invalid with selector={args.selector!r}: pass rates need "
                "a group of rollouts per prompt; set num_generations >= 2 (the paper uses 8)."
            )
        iterable = isinstance(train_dataset, IterableDataset)
        environments = kw.get("environment_factory") is not None
        if train_dataset is not None and not environments and not has_prompt_column(train_dataset):
            raise ValueError(
                "The train dataset has no `prompt` column: GRPO needs one (a string or a list of chat messages) "
                "unless an `environment_factory` provides the prompts. Rename your question column to `prompt`, e.g. "
                "`dataset.rename_column('question', 'prompt')`."
            )
        # The per-prompt state is keyed by a prompt identity read from each row (`prompt_ids`). Without a train
        # dataset (an environment_factory owns the prompts) or with an iterable one without `prompt`, there is none.
        self.lze_enabled = train_dataset is not None and (not iterable or has_prompt_column(train_dataset))
        if not self.lze_enabled and (args.selector != "none" or args.prune_solved):
            warnings.warn(
                f"selector={args.selector!r} needs a stable identity for each prompt: a map-style train dataset or an "
                "iterable one with a `prompt` column; got "
                + ("no train dataset" if train_dataset is None else "an IterableDataset without `prompt`")
                + ". This run trains as plain GRPO (no selection, no pruning). Pass a `datasets.Dataset` to use LZE.",
                LZEWarning,
                stacklevel=2,
            )
        map_style = self.lze_enabled and not iterable
        if self.lze_enabled and iterable:
            check_map_style(args)
        if args.probe_generations:
            check_probe(
                args, self.lze_enabled, [k for k in ("tools", "environment_factory", "rollout_func") if kw.get(k)]
            )
        self._reward_tap, self._rollout_cache = RewardTap(), RolloutCache()
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kw)
        names = list(self.reward_func_names)
        self._correctness_index = self._resolve_correctness_reward(args.correctness_reward)
        # Reward functions that return something other than one number (or None) per completion fail in TRL with a
        # tensor-construction error naming neither the function nor the value: check them by name instead.
        self.reward_funcs = [
            f if isinstance(f, torch.nn.Module) or not callable(f) else checked_reward_func(f, name)
            for f, name in zip(self.reward_funcs, names)
        ]
        if map_style:
            check_dataset_fits_batch(len(self.train_dataset), self.args.generation_batch_size, self.num_generations)
        # A row's identity is what TRL hands the step of it: every column, or those `remove_unused_columns` keeps.
        columns = ["prompt", "image", "images"] if self.args.remove_unused_columns else None
        self.prompt_ids = PromptIds(self.train_dataset if map_style else None, columns, environments)
        main = self.accelerator.is_main_process
        self.lze = LZERun(
            args,
            self.num_generations,
            self.prompt_ids.row_ids,
            correctness_name=names[self._correctness_index],
            warn=lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None,
        )
        self.rollout_plan = self.make_rollout_plan()
        if map_style and self.lze.plans_rollouts:
            # Planned epochs are shorter than the Trainer's `global_step // steps_per_epoch` arithmetic assumes: the
            # sampler resumes at its own position (saved with the LZE state), so the Trainer must not skip batches.
            self.args.ignore_data_skip = True
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
        index = 0 if spec is None else names.index(spec) if spec in names else int(spec) if str(spec).isdigit() else -1
        if not 0 <= index < len(names):
            raise ValueError(
                f"correctness_reward={spec!r} is not among the reward functions {names}: set it to one of these "
                f"names or to an index in [0, {len(names) - 1}]."
            )
        return index

    def make_rollout_plan(self) -> RolloutPlan:
        """
        Where each generation batch's groups come from ([`~lze_trl.step.RolloutPlan`]), built once at init: a probe
        then the completion of the chosen groups with `probe_generations`, else one fresh generation of every prompt.
        Subclasses return their own plan (the experimental modes and DAPO's refill rounds in the repository's
        `benchmarks/experimental/` do).
        """
        if self.args.probe_generations:
            main = self.accelerator.is_main_process
            warn = lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None  # noqa: E731
            return ProbePlan(self.args.probe_generations, self.lze, self._rollout_cache, warn)
        return FreshPlan()

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
            planner=self.lze if self.lze_enabled else None,
            position=self.lze.position,
        )
        return self.train_sampler

    def set_initial_training_values(self, args, dataloader):
        values = list(super().set_initial_training_values(args, dataloader))
        if self.lze.plans_rollouts and args.max_steps > 0:
            values[0] = sys.maxsize  # planned epochs are shorter: run epochs until max_steps, not a precomputed count
        return tuple(values)

    # ----------------------------------------------------------------------------------------------- the step
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._reward_tap.put(rewards)  # kept only inside a training step's generation call (`_generate_scored`)
        return rewards

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self.lze_enabled:
            # Evaluation (nothing to select, no training state to touch), or a run without prompt identity.
            return super()._generate_and_score_completions(inputs)
        return run_step(self.rollout_plan, self.step_context(), self.lze, inputs, self.state.global_step)

    def step_context(self) -> StepContext:
        """The [`~lze_trl.step.StepContext`] of the current generation batch: what a rollout plan may use."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        return StepContext(
            accelerator=self.accelerator,
            num_generations=self.num_generations,
            pad_token_id=tokenizer.pad_token_id,
            generate=self._generate_scored,
            score=self._score_groups,
            select=self.lze.select,
            log=lambda metrics: [self._metrics["train"][k].append(v) for k, v in metrics.items()],
            generation=self.lze.generation,
            correctness_index=self._correctness_index,
        )

    def _generate_scored(self, inputs: list[dict], num_rollouts: int) -> Generated:
        """
        TRL's generation and scoring of `inputs` in groups of `num_rollouts`, with the prompt ids of all processes'
        rows and the rewards. A call with other groups than `num_generations` (a probe) leaves no TRL metric behind:
        TRL's metrics describe the groups that may reach the update.
        """
        ids = torch.as_tensor(self.prompt_ids.of_rows(inputs), device=self.accelerator.device)
        logged = {key: len(values) for key, values in self._metrics["train"].items()}
        with self._reward_tap.capture() as captured, self._group_size(num_rollouts):
            rows = super()._generate_and_score_completions(inputs)
        if num_rollouts != self.num_generations:
            for key, values in self._metrics["train"].items():
                del values[logged.get(key, 0) :]
        return Generated(rows, self.accelerator.gather(ids).cpu().numpy(), captured["rewards"])

    @contextlib.contextmanager
    def _group_size(self, size: int | None):
        """TRL's group size inside: `num_generations`, its advantages' groups and vLLM server's n per prompt."""
        saved = self.num_generations
        self.num_generations = saved if size is None else size
        try:
            yield
        finally:
            self.num_generations = saved

    def _generate(self, prompts):
        return self._rollout_cache.generate(prompts, self._generate_rollouts)  # served rollouts are not generated

    def _generate_rollouts(self, prompts: list, group_size: int | None):
        with self._group_size(group_size):
            return self.generate_rollouts(prompts)

    def generate_rollouts(self, prompts: list):
        """TRL's `_generate` of the rollouts really generated (a probe's reused rows are not): the demo meters here."""
        return super()._generate(prompts)

    def _score_groups(self, prompt_ids: np.ndarray, rewards: np.ndarray, extra_round: int = 0, anchor=None):
        """Scores groups (rewards shaped `(groups, rollouts, reward functions)`) into the LZE state ([`LZERun.score`]):
        the correctness reward defines their pass rates, the weighted sum of all rewards their spread."""
        totals = np.nansum(rewards * self.reward_weights.float().cpu().numpy(), axis=2)
        totals[np.isnan(rewards).all(axis=2)] = np.nan  # a rollout no function scored (or not generated)
        return self.lze.score(prompt_ids, rewards[:, :, self._correctness_index], totals, extra_round, anchor)

    def training_step(self, model, inputs, num_items_in_batch):
        resumed = self.lze.position.count_micro_step()
        if resumed is not None:
            # The sampler resumed mid-epoch at its own position: nothing between the checkpoint and this step drew
            # random numbers in the uninterrupted run, but the resumed run created its dataloader iterator (one draw)
            # after the Trainer restored the RNG states.
            self._load_rng_state(resumed)
        return super().training_step(model, inputs, num_items_in_batch)

    # ----------------------------------------------------------------------------------------------- checkpoints
    def lze_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The LZE training state as saved in checkpoints: arrays and counters (the train dataset's fingerprint)."""
        self.lze.position.micro_steps = self._step  # TRL's micro-step counter, which paces generation
        return self.lze.state_dict(), {"dataset": self.prompt_ids.fingerprint}

    def save_lze_state(self, folder: str) -> None:
        """Writes the LZE state into a checkpoint `folder` (on the main process): the tables, then the state file."""
        if self.args.should_save:
            self.save_lze_tables(folder)
            lze_state_files.save_state(folder, *self.lze_state())

    def prompt_table(self, include_prompts: bool = True):
        """The per-prompt LZE state as a `pandas.DataFrame` ([`~lze_trl.plotting.prompt_table`]), with the train
        dataset's columns of each prompt's row when `include_prompts` (map-style datasets only)."""
        from .plotting.tables import prompt_table

        pruned = self.lze.pruner.pruned if self.lze.pruner is not None else None
        dataset = self.train_dataset if include_prompts and self.prompt_ids.row_ids is not None else None
        return prompt_table(self.lze.state, pruned, dataset)

    def save_lze_tables(self, folder: str) -> None:
        """Writes the prompt table and the selection log as parquet files into `folder`."""
        os.makedirs(folder, exist_ok=True)
        lze_state_files.save_table(self.prompt_table(), os.path.join(folder, PROMPTS_PARQUET))
        lze_state_files.save_table(self.selection_log.to_pandas(), os.path.join(folder, SELECTION_LOG_PARQUET))

    def load_lze_state(self, checkpoint: str) -> None:
        """
        Restores the LZE state saved in `checkpoint` (a checkpoint folder): per-prompt table, selector, prune pool,
        position in the data, counters and selection log.

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
        self._step = self.lze.position.micro_steps
        if self.args.ignore_data_skip and self.lze.plans_rollouts:
            self.lze.position.resumed_from = checkpoint  # the sampler continues at the saved position

    def _resume_lze_state(self, checkpoint: str) -> None:
        """
        Loads the LZE state of `checkpoint` for a resumed run.

        A checkpoint without a usable LZE state (missing, corrupt, recorded on another train dataset) is refused with
        an [`~lze_trl.state.LZEStateError`] when the state decides what is trained (any selector but `"none"`, or
        forward pruning), unless `resume_lze_state="fresh"`: then, as for `selector="none"`, the run resumes with a
        fresh LZE state after a warning.
        """
        try:
            self.load_lze_state(checkpoint)
        except LZEStateError as error:
            decides = self.args.selector != "none" or self.lze.plans_rollouts
            if decides and self.args.resume_lze_state != "fresh":
                raise LZEStateError(
                    f"{error} Resuming would silently restart LZE's per-prompt state. Resume from a complete "
                    "checkpoint of this run with the same train dataset, or set resume_lze_state='fresh' to resume "
                    "the model and optimizer with a fresh LZE state on purpose."
                ) from error
            warnings.warn(f"{error} The run resumes with a fresh LZE state.", LZEWarning, stacklevel=3)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"No checkpoint found in output_dir={self.args.output_dir!r} to resume from.")
        if resume_from_checkpoint and self.lze_enabled:
            self._resume_lze_state(resume_from_checkpoint)
        output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        if self.args.should_save and self.lze_enabled:
            self.save_lze_tables(self.args.output_dir)
        return output
