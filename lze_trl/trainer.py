"""[`LZEGRPOTrainer`]: TRL's `GRPOTrainer` that updates only on learning-zone prompt groups.

The class overrides TRL's hooks; a generation batch runs in `generation_batch.py`, the method's state lives in
[`LZERun`]. Every private TRL name used here is listed, with its reason, in `trl_coupling.py`.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import textwrap
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from datasets import IterableDataset
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from trl import GRPOConfig, GRPOTrainer

from . import checkpoint as checkpoint_files
from .checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET, LZEStateError
from .config import as_lze_config
from .engines import warn_if_not_sharded
from .generation_batch import train_on_generation_batch
from .guards import (
    LZEWarning,
    check_dataset_fits_batch,
    check_trainer_inputs,
    checked_reward_func,
    resolve_correctness_reward,
    warn_if_diluted,
)
from .prompt_ids import PromptIds
from .rollouts import Rollouts, Rows
from .run import LZERun
from .sampler import LZERepeatSampler


__all__ = ["LZEGRPOTrainer", "PROMPTS_PARQUET", "SELECTION_LOG_PARQUET"]


class _RolloutsGenerated(Exception):
    """Ends TRL's `_generate_and_score_completions` right after `_generate` (a generation round: no log-probs)."""


@dataclass
class _TRLCall:
    """One call of TRL's `_generate_and_score_completions`: our `_generate` stops it after generating, or serves the
    `served` rollouts ([`Rows`], every process's rewards); what TRL prepared, generated and rewarded is kept. TRL has
    no hook for either (`docs/upstream/score-generated-rollouts.md`)."""

    stop_after_generation: bool = False
    served: tuple[Rows, np.ndarray] | None = None
    prompts: list | None = None
    generated: tuple | None = None
    rewards: torch.Tensor | None = None


def _numpy(rewards: torch.Tensor) -> np.ndarray:
    return rewards.detach().float().cpu().numpy().astype(np.float64)


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

    Each prompt group is scored by its energy (difficulty anchor x outcome uncertainty x pass-rate momentum) and only
    the top `selection_ratio` of the groups take part in the policy update. Generating in rounds (`probe_generations`,
    `rollout_rounds`) completes only the groups worth completing; `prune_solved=True` stops rolling out prompts that
    stay solved, revisiting a few each epoch.

    Takes the arguments of [`~trl.GRPOTrainer`]; `args` may be an [`LZEGRPOConfig`] or a plain `GRPOConfig` (which
    gets the LZE defaults), and is copied. With `selector="none"` it trains exactly as `GRPOTrainer`.

    Attributes:
        lze ([`LZERun`]):
            The run's LZE state: per-prompt table, selector, prune pool, selection log, position in the data.
        prompt_ids ([`~lze_trl.prompt_ids.PromptIds`]):
            How each row's prompt id is read.
    """

    _call: _TRLCall | None = None  # a class default: a trainer built without `__init__` generates as GRPOTrainer
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
        self.lze_enabled = check_trainer_inputs(args, train_dataset, kw)  # whether rows have a prompt identity
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kw)
        names = list(self.reward_func_names)
        correctness = resolve_correctness_reward(args.correctness_reward, names)
        # A reward function returning something else than one number (or None) per completion fails in TRL with a
        # tensor-construction error naming neither the function nor the value: check them by name instead.
        self.reward_funcs = [
            f if isinstance(f, torch.nn.Module) or not callable(f) else checked_reward_func(f, name)
            for f, name in zip(self.reward_funcs, names)
        ]
        map_style = self.lze_enabled and not isinstance(train_dataset, IterableDataset)
        if map_style:
            check_dataset_fits_batch(len(self.train_dataset), self.args.generation_batch_size, self.num_generations)
        # A row's identity is what TRL hands the step of it: every column, or those `remove_unused_columns` keeps.
        columns = ["prompt", "image", "images"] if self.args.remove_unused_columns else None
        environments = kw.get("environment_factory") is not None
        self.prompt_ids = PromptIds(self.train_dataset if map_style else None, columns, environments)
        main = self.accelerator.is_main_process
        warn = lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None  # noqa: E731
        self.lze = LZERun(args, self.num_generations, self.prompt_ids.row_ids, names, correctness, warn)
        # Planned epochs are shorter than the Trainer's `global_step // steps_per_epoch` arithmetic assumes: the
        # sampler resumes at its own position (saved with the LZE state), so the Trainer must not skip batches.
        self.args.ignore_data_skip = self.args.ignore_data_skip or (map_style and self.lze.plans_rollouts)
        warn_if_diluted(args.selector, self.loss_type)
        self.train_sampler: LZERepeatSampler | None = None
        self.add_callback(_LZECallback(self))
        warn_if_not_sharded(self)

    @property
    def selection_log(self):
        """The run's [`~lze_trl.selection_log.SelectionLog`] (`trainer.lze.selection_log`)."""
        return self.lze.selection_log

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

    # ----------------------------------------------------------------------------------------------- the batch
    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self.lze_enabled:
            # Evaluation (nothing to select, no training state to touch), or a run without prompt identity.
            return super()._generate_and_score_completions(inputs)
        return train_on_generation_batch(self, inputs, self.state.global_step)

    def generate_rollouts(self, inputs: list[dict], num_rollouts: int) -> Rollouts:
        """Rollouts of `inputs` (`num_rollouts` consecutive rows per prompt), generated and rewarded once by TRL,
        without log-probabilities (those come only for the rows that reach [`~LZEGRPOTrainer.update_rows`])."""
        prompt_ids = self._gathered_prompt_ids(inputs)  # before a rollout_func's extra fields join the rows
        call = _TRLCall(stop_after_generation=True)
        with self._calling(call, num_rollouts), contextlib.suppress(_RolloutsGenerated):
            super()._generate_and_score_completions(inputs)
        if call.generated is None:
            raise RuntimeError("TRL's _generate_and_score_completions returned without calling _generate.")
        completions, completion_ids, extra_fields = call.generated[3], call.generated[1], call.generated[5]
        for i, row in enumerate(inputs):  # a rollout_func's extra fields reach the reward functions, as TRL hands them
            row.update({k: v[i] for k, v in extra_fields.items() if isinstance(v, list) and len(v) > i})
            row.update({k: v for k, v in extra_fields.items() if not isinstance(v, list)})
        logged, self._pending_extra_logs = self._pending_extra_logs, defaultdict(list)
        rewards = super()._calculate_rewards(inputs, call.prompts, completions, completion_ids)
        # What reward functions log for these rows (`log_extra`) is kept with them, for the update rows they reach
        extra_logs, self._pending_extra_logs = dict(self._pending_extra_logs), logged
        rows = Rows(inputs, call.prompts, call.generated, extra_logs)
        return Rollouts(rows, prompt_ids, _numpy(rewards))

    def update_rows(
        self, inputs: list[dict], served: tuple[Rows, np.ndarray] | None = None
    ) -> tuple[dict, Rollouts | None]:
        """TRL's update rows of `inputs` (`_generate_and_score_completions`), made from the `served` rollouts
        ([`Rows`], every process's rewards); without `served`, TRL generates and rewards the rollouts, which are
        returned as [`Rollouts`] too."""
        # the prompt ids before TRL adds a rollout_func's extra fields to the rows
        prompt_ids = self._gathered_prompt_ids(inputs) if served is None else None
        call = _TRLCall(served=served)
        if served is not None:  # the values reward functions logged for these rows, in their order
            self._pending_extra_logs.update(served[0].extra_logs)
        with self._calling(call):
            rows = super()._generate_and_score_completions(inputs)
        if served is not None:
            return rows, None
        return rows, Rollouts(Rows(inputs, call.prompts, (), {}), prompt_ids, _numpy(call.rewards))

    def _generate(self, prompts):
        call = self._call
        if call is not None and call.served is not None:
            served = call.served[0]
            if prompts != served.prompts:
                raise RuntimeError(
                    "TRL prepared other prompts for its update rows than those the served rollouts were generated "
                    "for: lze-trl cannot tell which rollout belongs to which row (trl_coupling.py, `_generate`)."
                )
            return served.generated
        result = super()._generate(prompts)
        if call is not None:
            call.prompts, call.generated = prompts, result
            if call.stop_after_generation:
                raise _RolloutsGenerated
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        call = self._call
        if call is not None and call.served is not None:
            return torch.as_tensor(call.served[1], dtype=torch.float32, device=self.accelerator.device)
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if call is not None:
            call.rewards = rewards
        return rewards

    @contextlib.contextmanager
    def _calling(self, call: _TRLCall, group_size: int | None = None):
        """`call` for our overrides of TRL's methods inside, and TRL's group size `num_generations` (which sets vLLM
        server's completions per prompt) `group_size`."""
        saved, self._call = self.num_generations, call
        self.num_generations = group_size or saved
        try:
            yield
        finally:
            self._call, self.num_generations = None, saved

    def _gathered_prompt_ids(self, inputs: list[dict]) -> np.ndarray:
        ids = torch.as_tensor(self.prompt_ids.of_rows(inputs), device=self.accelerator.device)
        return self.accelerator.gather(ids).cpu().numpy()

    def total_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """The total reward of each rollout (`rewards` shaped `(..., reward functions)`), weighted as TRL weighs it;
        NaN where no function scored it."""
        totals = np.nansum(rewards * self.reward_weights.float().cpu().numpy(), axis=-1)
        totals[np.isnan(rewards).all(axis=-1)] = np.nan
        return totals

    def log_lze(self, metrics: dict[str, float]) -> None:
        """Appends `metrics` to TRL's metric lists of the training step (averaged and logged by TRL's `log`)."""
        for key, value in metrics.items():
            self._metrics["train"][key].append(value)

    def training_step(self, model, inputs, num_items_in_batch):
        resumed = self.lze.position.count_micro_step()
        if resumed is not None:
            # The sampler resumed mid-epoch at its own position: nothing between the checkpoint and this step drew
            # random numbers in the uninterrupted run, but the resumed run created its dataloader iterator (one draw)
            # after the Trainer restored the RNG states.
            self._load_rng_state(resumed)
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.lze.position.micro_steps = self._step  # TRL's micro-step counter, which paces generation
        return loss

    # ----------------------------------------------------------------------------------------------- checkpoints
    def lze_state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The LZE training state as saved in checkpoints: arrays and counters (the train dataset's fingerprint)."""
        return self.lze.state_dict(), {"dataset": self.prompt_ids.fingerprint}

    def save_lze_state(self, folder: str) -> None:
        """Writes the LZE state into a checkpoint `folder` (on the main process): the tables, then the state file."""
        if self.args.should_save:
            self.save_lze_tables(folder)
            checkpoint_files.save_state(folder, *self.lze_state_dict())

    def prompt_table(self, include_prompts: bool = True):
        """The per-prompt LZE state as a `pandas.DataFrame` ([`~lze_trl.plotting.prompt_table`]), with the train
        dataset's columns of each prompt's row when `include_prompts` (map-style datasets only)."""
        from .plotting.tables import prompt_table

        pruned = self.lze.pruner.pruned if self.lze.pruner is not None else None
        dataset = self.train_dataset if include_prompts and self.prompt_ids.row_ids is not None else None
        return prompt_table(self.lze.prompts, pruned, dataset)

    def save_lze_tables(self, folder: str) -> None:
        """Writes the prompt table and the selection log as parquet files into `folder`."""
        os.makedirs(folder, exist_ok=True)
        checkpoint_files.save_table(self.prompt_table(), os.path.join(folder, PROMPTS_PARQUET))
        checkpoint_files.save_table(self.selection_log.to_pandas(), os.path.join(folder, SELECTION_LOG_PARQUET))

    def load_lze_state(self, checkpoint: str) -> None:
        """Restores the LZE state saved in the folder `checkpoint`, or raises an
        [`~lze_trl.checkpoint.LZEStateError`] when it is missing, corrupt, or recorded on another train dataset."""
        arrays, counters = checkpoint_files.load_state(checkpoint)
        checkpoint_files.check_fingerprint(counters.get("dataset"), self.prompt_ids.fingerprint, checkpoint)
        log_frame = checkpoint_files.load_selection_log(checkpoint)
        try:
            self.lze.load_state_dict(arrays)
        except (KeyError, ValueError) as error:
            raise LZEStateError(f"The LZE state in {checkpoint!r} does not fit this run ({error}).") from error
        self.selection_log.load_pandas(log_frame)
        self._step = self.lze.position.micro_steps
        if self.args.ignore_data_skip and self.lze.plans_rollouts:
            self.lze.position.resumed_from = checkpoint  # the sampler continues at the saved position

    def _resume_lze_state(self, checkpoint: str) -> None:
        """Loads the LZE state of `checkpoint` for a resumed run: one that cannot be loaded is refused when it decides
        what is trained (a selector, pruning) unless `resume_lze_state="fresh"`; else the run warns and starts it
        fresh."""
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

    def create_model_card(self, *args, **kwargs):
        super().create_model_card(*args, **kwargs)
        # TRL names no base model for a model loaded from a folder or built in code, and its template then reads
        # "a fine-tuned version of [None]": say what is true instead.
        path = os.path.join(self.args.output_dir, "README.md")
        if self.is_world_process_zero() and os.path.exists(path):
            with open(path) as f:
                text = f.read()
            unnamed = "a fine-tuned version of [None](https://huggingface.co/None)"
            if unnamed in text:
                with open(path, "w") as f:
                    f.write(text.replace(unnamed, "trained from a local model"))

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
