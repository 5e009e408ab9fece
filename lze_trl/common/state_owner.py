"""What both trainers do with the LZE state, written once: [`LZEStateOwner`], a mixin ahead of TRL's trainer in
[`~lze_trl.LZEGRPOTrainer`]'s and [`~lze_trl.async_grpo.trainer.LZEAsyncGRPOTrainer`]'s bases, logs its metrics into
TRL's, shows it as tables, writes it into every checkpoint ([`SaveLZEState`]) and restores it.

A trainer sets `lze` ([`~lze_trl.method.run.LZERun`]) and `prompt_keys`, and defines `lze_state_dict` (what its
checkpoint file holds), `in_flight_state` (what each process keeps of its batches in flight) and `restore_lze_state`
(how it takes both back); the files, their atomic writes, the fingerprint check and the tables are here.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, SaveStrategy, get_last_checkpoint

from ..method import checkpoint as checkpoint_files
from ..method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET
from ..method.prompt_state import prompt_table
from .in_flight_files import load_in_flight, save_in_flight


class LZEStateOwner:
    """The LZE state's logging, tables and checkpoints, shared by both trainers (see the module's docstring). The
    trainer defines `restore_lze_state(arrays, counters, checkpoint)`, which takes back what `lze_state_dict` saved
    (raising an [`~lze_trl.method.checkpoint.LZEStateError`] when it does not fit)."""

    @property
    def holds_lze_state(self) -> bool:
        """Whether this process keeps the LZE state that a checkpoint restores; each trainer says which (the
        synchronous one: every process, when rows have a prompt identity; the async one: its main process)."""
        return True

    def resume_lze(self, resume_from_checkpoint: str | bool | None) -> str | None:
        """The checkpoint `train(resume_from_checkpoint=...)` resumes from (`True`: the last one in `output_dir`,
        refused when there is none), its LZE state loaded by the one resume rule of both trainers
        ([`~lze_trl.method.checkpoint.load_or_start_fresh`]): a state that cannot be loaded is refused when it
        decides what is trained, unless `resume_lze_state="fresh"`."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"No checkpoint found in output_dir={self.args.output_dir!r} to resume from.")
        if resume_from_checkpoint and self.holds_lze_state:
            checkpoint_files.load_or_start_fresh(
                lambda: self.load_lze_state(resume_from_checkpoint),
                self.lze.decides_training,
                self.args.resume_lze_state,
                stacklevel=3,
            )
        return resume_from_checkpoint or None

    @property
    def selection_log(self):
        """The run's [`~lze_trl.method.selection_log.SelectionLog`]."""
        return self.lze.selection_log

    def log_lze(self, metrics: dict[str, float]) -> None:
        """Appends `metrics` to TRL's metric lists of the training step (averaged and logged by TRL's `log`)."""
        for key, value in metrics.items():
            self._metrics["train"][key].append(float(value))

    def prompt_table(self, include_prompts: bool = True):
        """The per-prompt LZE state as a `pandas.DataFrame` ([`~lze_trl.method.prompt_state.prompt_table`]), with the
        train dataset's columns of each prompt's row when `include_prompts` (map-style datasets only)."""
        pruned = self.lze.pruner.pruned if self.lze.pruner is not None else None
        dataset = self.train_dataset if include_prompts and self.prompt_keys.dataset_keys is not None else None
        return prompt_table(self.lze.prompts, pruned, dataset)

    def save_lze_tables(self, folder: str) -> None:
        """Writes the prompt table and the selection log as parquet files into `folder`."""
        os.makedirs(folder, exist_ok=True)
        checkpoint_files.save_table(self.prompt_table(), os.path.join(folder, PROMPTS_PARQUET))
        checkpoint_files.save_table(self.selection_log.to_pandas(), os.path.join(folder, SELECTION_LOG_PARQUET))

    def lze_state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The LZE state as its checkpoint file holds it: arrays and counters (the train dataset's fingerprint)."""
        return self.lze.state_dict(), {"dataset": self.prompt_keys.fingerprint}

    def save_lze_state(self, folder: str) -> None:
        """Writes the LZE state into a checkpoint `folder` (where `args.should_save`: the main process): the tables,
        then the state file."""
        if self.args.should_save:
            self.save_lze_tables(folder)
            checkpoint_files.save_state(folder, *self.lze_state_dict())

    def in_flight_state(self) -> Any:
        """What this process keeps of its generation batches in flight, for its checkpoint file
        ([`~lze_trl.common.in_flight_files.save_in_flight`]); `None` (the default) where it keeps none."""
        return None

    def save_lze_checkpoint(self, folder: str) -> None:
        """What every checkpoint gets from LZE ([`SaveLZEState`]): the state (main process), and each process's
        batches in flight where it keeps some ([`~LZEStateOwner.in_flight_state`])."""
        self.save_lze_state(folder)
        batches = self.in_flight_state()
        if batches is not None:
            save_in_flight(folder, self.accelerator.process_index, self.accelerator.num_processes, batches)

    def load_in_flight(self, checkpoint: str, needed_by: str) -> Any:
        """What this process's [`~LZEStateOwner.in_flight_state`] saved in `checkpoint`
        ([`~lze_trl.common.in_flight_files.load_in_flight`]: refused when missing or kept by another number of
        processes)."""
        return load_in_flight(checkpoint, self.accelerator.process_index, self.accelerator.num_processes, needed_by)

    def load_lze_state(self, checkpoint: str) -> None:
        """Restores the LZE state saved in the folder `checkpoint`, or raises an
        [`~lze_trl.method.checkpoint.LZEStateError`] when it is missing, corrupt, or recorded on another train
        dataset."""
        arrays, counters = checkpoint_files.load_state(checkpoint)
        checkpoint_files.check_fingerprint(counters.get("dataset"), self.prompt_keys.fingerprint, checkpoint)
        log_frame = checkpoint_files.load_selection_log(checkpoint)
        self.restore_lze_state(arrays, counters, checkpoint)
        self.selection_log.load_pandas(log_frame)


class SaveLZEState(TrainerCallback):
    """
    Writes the LZE state into every checkpoint (`LZEStateOwner.save_lze_checkpoint`), and keeps the last state of a run
    that ends before the steps the Trainer planned: planned epochs are shorter than the Trainer counts them (forward
    pruning skips prompts), and an epoch left without prompts ends a run before `max_steps`. The Trainer saves the
    final checkpoint only at `max_steps` (`save_strategy="steps"`), so such a run would end without it: at the end of
    its last epoch this callback asks for the save a finished run makes, and says once, in one line, how many steps
    ran and why.
    """

    def __init__(self, trainer: LZEStateOwner) -> None:
        self.trainer = trainer
        self.saved_step = -1  # the step of the last checkpoint written

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        self.trainer.save_lze_checkpoint(folder)
        self.saved_step = state.global_step
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        run = self.trainer.lze
        planned_short = run.plans_rollouts and control.should_training_stop
        if not planned_short or not 0 < state.global_step < state.max_steps:
            return control  # training goes on, or ends where the Trainer planned (and saves as it does there)
        saves = args.save_strategy == SaveStrategy.STEPS and self.saved_step != state.global_step
        control.should_save = control.should_save or saves
        planner = "forward pruning" if run.pruner is not None else f"the selector {args.selector!r}'s epoch plans"
        if args.max_steps > 0:
            why = f"{planner} left epoch {run.position.epoch} without prompts to roll out (see the warning above)"
        else:
            why = (
                f"{planner} rolled out fewer prompts than the dataset holds "
                f"({run.position.groups_skipped(len(run.dataset_keys))} groups skipped), and the Trainer planned "
                f"{math.ceil(args.num_train_epochs)} full epochs"
            )
        if control.should_save or self.saved_step == state.global_step or args.save_strategy == SaveStrategy.EPOCH:
            saved = f"its last state is saved in checkpoint-{state.global_step}"
        else:
            saved = f"no checkpoint is saved (save_strategy={args.save_strategy.value!r})"
        run.warn(f"Training ended at step {state.global_step} of the {state.max_steps} planned: {why}; {saved}.")
        return control


__all__ = ["LZEStateOwner", "SaveLZEState"]
