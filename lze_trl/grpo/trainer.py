"""[`LZEGRPOTrainer`]: TRL's `GRPOTrainer` that updates only on learning-zone prompt groups.

The class overrides TRL's hooks; a generation batch runs top to bottom in `lze_trl/grpo/step.py` and the method's
state lives in [`LZERun`]. Every private TRL name used is listed, with its reason, in `lze_trl/common/coupling.py`.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap
import time
import warnings
from typing import Any

import numpy as np
import torch
from datasets import IterableDataset
from trl import GRPOConfig, GRPOTrainer

from ..common.clock import StepClock
from ..common.coupling import PRIVATE_NAMES, check_trl, checkpointing_renames_quiet
from ..common.engines import apply_thread_policy, warn_if_not_sharded, warn_if_slow_bf16
from ..common.state_owner import LZEStateOwner, SaveLZEState
from ..method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET
from ..method.errors import LZEStateError, LZEWarning
from ..method.guards import (
    check_dataset_fits_batch,
    check_trainer_inputs,
    checked_reward_func,
    resolve_correctness_reward,
    warn_if_diluted,
    warn_if_quota_below_two,
)
from ..method.prompt_keys import PromptKeys
from ..method.run import LZERun
from ..method.selection import total_rewards
from .config import as_lze_config
from .rows import Batch
from .sampler import LZERepeatSampler
from .step import generation_batch


__all__ = ["LZEGRPOTrainer", "PROMPTS_PARQUET", "SELECTION_LOG_PARQUET"]

check_trl((GRPOTrainer, GRPOConfig), PRIVATE_NAMES, what="LZEGRPOTrainer")  # one line for an untested TRL


class _LZECallback(SaveLZEState):
    """Writes the LZE state into every checkpoint, and ends an epoch-based run at the sampler's last epoch (with its
    last state saved, [`SaveLZEState`])."""

    def on_epoch_end(self, args, state, control, **kwargs):
        sampler = self.trainer.train_sampler
        if args.max_steps <= 0 and sampler is not None and sampler.epoch + 1 >= math.ceil(args.num_train_epochs):
            control.should_training_stop = True
        return super().on_epoch_end(args, state, control, **kwargs)


class LZEGRPOTrainer(LZEStateOwner, GRPOTrainer):
    """
    Trainer for GRPO with Learning-Zone Energy (LZE) prompt selection.

    Each prompt group is scored by its energy (difficulty anchor x outcome uncertainty x pass-rate momentum) and only
    the top `selection_ratio` of the groups take part in the policy update. Forward pruning (`prune_solved`,
    `prune_unsolved`) stops rolling out prompts whose history says their next group will be dead, exploring a few of
    them again.

    Takes the arguments of [`~trl.GRPOTrainer`]; `args` may be an [`LZEGRPOConfig`] or a plain `GRPOConfig` (which
    gets the LZE defaults), and is copied. With `selector="none"` it trains exactly as `GRPOTrainer`.

    Attributes:
        lze ([`LZERun`]):
            The run's LZE state: per-prompt table, selector, prune pool, selection log, position in the data.
        prompt_keys ([`~lze_trl.method.prompt_keys.PromptKeys`]):
            How each row's prompt key is read.
        generation_seconds (`float`):
            Seconds in TRL's `_generate` in training, over the run (`lze/generation_seconds`).
        sampler_resumes_itself (`bool`):
            Whether the sampler resumes at its own saved position (epochs planned by pruning or the selector), with
            `args.ignore_data_skip` set so that the Trainer does not skip batches itself.
    """

    generation_seconds: float = 0.0  # a class default: a trainer built without `__init__` generates as GRPOTrainer
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
        self.prompt_keys = PromptKeys(self.train_dataset if map_style else None, columns, environments)
        main = self.accelerator.is_main_process
        warn = lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None  # noqa: E731
        self.lze = LZERun(args, self.num_generations, self.prompt_keys.dataset_keys, names, correctness, warn)
        self._step_rewards: torch.Tensor | None = None  # the rewards TRL computed in `generate_and_score`'s call
        # Planned epochs are shorter than the Trainer's `global_step // steps_per_epoch` arithmetic assumes: the
        # sampler resumes at its own position (saved with the LZE state), so the Trainer must not skip batches
        # (`ignore_data_skip`, set on the trainer's copy of the config, which the user sees in `trainer.args`).
        self.sampler_resumes_itself = map_style and self.lze.plans_rollouts
        self.args.ignore_data_skip = self.args.ignore_data_skip or self.sampler_resumes_itself
        warn_if_diluted(args.selector, self.loss_type)
        if self.lze_enabled:
            groups = self.args.generation_batch_size // self.num_generations
            warn_if_quota_below_two(args.selector, args.selection_ratio, groups)
        self.train_sampler: LZERepeatSampler | None = None
        # the checkpoint a resumed run's sampler continues from (planned epochs), until the first micro-step
        self._sampler_resumes: str | None = None
        self.add_callback(_LZECallback(self))
        self.add_callback(StepClock(self, lambda: self.generation_seconds, "lze/generation_seconds"))
        warn_if_not_sharded(self)
        warn_if_slow_bf16(self)
        if self.args.thread_policy:  # the setting's reason is in its docstring (LZESettings)
            apply_thread_policy(self.accelerator.device.type)

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
            run=self.lze if self.lze_enabled else None,
            position=self.lze.position,
            resuming=self._sampler_resumes is not None,
        )
        return self.train_sampler

    def set_initial_training_values(self, args, dataloader):
        values = list(super().set_initial_training_values(args, dataloader))
        if self.lze.plans_rollouts and args.max_steps > 0:
            values[0] = sys.maxsize  # planned epochs are shorter: run epochs until max_steps, not a precomputed count
        return tuple(values)

    # ----------------------------------------------------------------------------------------------- the batch
    def _generate_and_score_completions(self, inputs):
        with checkpointing_renames_quiet():  # TRL's log-probability forwards toggle gradient checkpointing
            return self._lze_generate_and_score_completions(inputs)

    def _lze_generate_and_score_completions(self, inputs):
        if not self.model.training or not self.lze_enabled:
            # Evaluation (nothing to select, no training state to touch), or a run without prompt identity.
            return super()._generate_and_score_completions(inputs)
        return generation_batch(self, inputs)

    def generate_and_score(self, inputs: list[dict]) -> tuple[Batch, np.ndarray]:
        """TRL's update rows of `inputs` (one call of TRL's `_generate_and_score_completions`, which generates and
        rewards them), and the rewards it computed: every process's rows x reward functions, NaN where unscored."""
        self._step_rewards = None
        rows = super()._generate_and_score_completions(inputs)
        rewards, self._step_rewards = self._step_rewards, None
        if rewards is None:
            raise RuntimeError(
                "TRL's _generate_and_score_completions returned without calling _calculate_rewards: lze-trl cannot "
                "read the rewards (lze_trl/common/coupling.py)."
            )
        return rows, rewards.detach().float().cpu().numpy().astype(np.float64)

    def _generate(self, prompts):
        start = time.perf_counter()
        result = super()._generate(prompts)
        if self.model.training:  # the step's split (`StepClock`): evaluation's generation is not the step's
            self.generation_seconds += time.perf_counter() - start
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._step_rewards = rewards  # every process's, as TRL gathers them
        return rewards

    def gathered_prompt_keys(self, inputs: list[dict]) -> np.ndarray:
        """The prompt key of every row of `inputs`, every process's in process order (a collective)."""
        keys = torch.as_tensor(self.prompt_keys.of(inputs), device=self.accelerator.device)
        return self.accelerator.gather(keys).cpu().numpy()

    def total_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """The total reward of each rollout (`rewards` shaped `(..., reward functions)`), weighted as TRL weighs it;
        NaN where no function scored it ([`~lze_trl.method.selection.total_rewards`])."""
        return total_rewards(rewards, self.reward_weights.float().cpu().numpy())

    def training_step(self, model, inputs, num_items_in_batch):
        self.lze.position.batches_in_epoch += 1
        checkpoint, self._sampler_resumes = self._sampler_resumes, None
        if checkpoint is not None and self.train_sampler.redraw_after_resume:
            # The sampler resumed mid-epoch at its own position: nothing between the checkpoint and this step drew
            # random numbers in the uninterrupted run, but the resumed run created its dataloader iterator (one draw)
            # after the Trainer restored the RNG states.
            self._load_rng_state(checkpoint)
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.lze.position.micro_steps = self._step  # TRL's micro-step counter, which paces generation
        return loss

    # ----------------------------------------------------------------------------------------------- checkpoints
    def restore_lze_state(self, arrays: dict[str, np.ndarray], counters: dict[str, Any], checkpoint: str) -> None:
        """Takes back the run's state from `checkpoint`."""
        try:
            self.lze.load_state_dict(arrays)
        except (KeyError, ValueError) as error:
            raise LZEStateError(f"The LZE state in {checkpoint!r} does not fit this run ({error}).") from error
        self._step = self.lze.position.micro_steps
        if self.sampler_resumes_itself:
            self._sampler_resumes = checkpoint  # the sampler continues at the saved position

    def save_lze_checkpoint(self, folder: str) -> None:
        if self.lze_enabled:
            super().save_lze_checkpoint(folder)

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

    @property
    def holds_lze_state(self) -> bool:
        return self.lze_enabled

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        output = super().train(resume_from_checkpoint=self.resume_lze(resume_from_checkpoint), **kwargs)
        if self.lze_enabled:
            self.lze.end_of_run()
        if self.args.should_save and self.lze_enabled:
            self.save_lze_tables(self.args.output_dir)
        return output
