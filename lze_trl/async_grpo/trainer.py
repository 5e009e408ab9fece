"""[`LZEAsyncGRPOTrainer`]: TRL's experimental `AsyncGRPOTrainer` with LZE drawing the prompts and updating only on
the groups it selects.

The trainer is TRL's. Two things change: its rollout worker is LZE's ([`~lze_trl.async_grpo.worker.LZERolloutWorker`],
which TRL builds with the arguments it gives its own; or one passed in that takes orders), and after TRL's
constructor its `rollout_queue` (which `get_train_dataloader` hands to `RolloutQueueDataset`) is replaced by a
[`~lze_trl.async_grpo.window.GroupWindow`], which sends the worker its orders (one per group), takes back the groups,
decides with the synchronous trainer's [`~lze_trl.method.run.LZERun`], and hands on the selected groups' rows only. The
LZE state is written into each checkpoint (`on_save`) and restored by `train(resume_from_checkpoint=...)`. What this
relies on in TRL's source is pinned by `tests/async/test_async_lze.py`; see `docs/source/async.md`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl.trainer.utils import get_callable_name

from ..common.clock import StepClock
from ..common.coupling import checkpointing_renames_quiet
from ..common.engines import apply_thread_policy, warn_if_slow_bf16
from ..common.state_owner import LZEStateOwner, SaveLZEState
from ..method.errors import LZEStateError, LZEWarning
from ..method.guards import resolve_correctness_reward, warn_if_quota_below_two
from ..method.prompt_keys import PromptKeys
from ..method.run import LZERun
from ..method.settings import LZE_FIELDS, LZESettings, count_at_least, documented, setting
from ..method.validation import as_config, hint_misspelled_keywords, parse_lze_lists, validate_lze_args
from .cpu import cpu_construction, use_cpu_tree_attention
from .samples import LZERolloutSample
from .upstream import AsyncGRPOConfig, AsyncGRPOTrainer, async_grpo_trainer
from .window import GroupWindow
from .worker import LZERolloutWorker


@hint_misspelled_keywords
@dataclass
class LZEAsyncGRPOConfig(LZESettings, AsyncGRPOConfig):
    window_groups: int | None = setting(
        None,
        valid=lambda v: v is None or count_at_least(1)(v),
        fix="use an integer >= 1 (None: one optimizer step of plain async GRPO).",
        help="""
            Groups per generation batch (drawn together, selected among once every one has arrived). Defaults to the
            groups of one optimizer step of plain async GRPO: `per_device_train_batch_size x
            gradient_accumulation_steps x processes // num_generations`.
        """,
    )
    batches_in_flight: int = setting(
        2,
        valid=count_at_least(1),
        fix="use an integer >= 1 (2 by default).",
        help="""
            Generation batches the worker rolls out at once: while the oldest one's groups come back, the next ones
            are rolled out (their selection still waits for the batches before them).
        """,
    )

    def __post_init__(self):
        with checkpointing_renames_quiet():  # TRL's default `gradient_checkpointing=True` reaches a renamed name
            super().__post_init__()  # AsyncGRPOConfig's: the LZE settings define none
        parse_lze_lists(self)
        validate_lze_args(self)


LZEAsyncGRPOConfig.__doc__ = """
    Configuration of [`LZEAsyncGRPOTrainer`]: TRL's `AsyncGRPOConfig` plus the LZE settings
    ([`~lze_trl.method.settings.LZESettings`]: the same names, defaults and checks as [`LZEGRPOConfig`]'s), and:

""" + documented(LZEAsyncGRPOConfig, ("window_groups", "batches_in_flight"))


def as_lze_async_config(args: AsyncGRPOConfig | None, model: Any) -> Any:
    """A copy of `args` as an [`LZEAsyncGRPOConfig`] ([`~lze_trl.method.validation.as_config`]): a plain
    `AsyncGRPOConfig` gets the LZE defaults."""
    settings = (*LZE_FIELDS, "window_groups", "batches_in_flight")
    output_dir = f"{str(model).split('/')[-1]}-AsyncLZE"
    return as_config(args, LZEAsyncGRPOConfig, settings, output_dir)


def check_async_inputs(args: Any, train_dataset: Any, rollout_worker: Any, environment_factory: Any) -> None:
    """Refuses, with the reason and the fix, the inputs LZE cannot work with on the async path."""
    if rollout_worker is not None and not callable(getattr(rollout_worker, "send_orders", None)):
        raise ValueError(
            f"rollout_worker={type(rollout_worker).__name__} cannot run LZE: LZE draws the prompts, so its worker "
            "rolls out the trainer's orders (send_orders), one group of num_generations rollouts each, and tags its "
            "rows (lze_trl.async_grpo.samples.LZERolloutSample). Pass rollout_worker=None (the trainer builds "
            "lze_trl.async_grpo.worker.LZERolloutWorker, TRL's vLLM worker taking orders) or "
            "lze_trl.testing.async_stand_ins.StandInRolloutWorker."
        )
    generations = getattr(rollout_worker, "num_generations", None)
    if generations is not None and generations != args.num_generations:
        raise ValueError(
            f"rollout_worker rolls out {generations} rollouts per group, not num_generations={args.num_generations}: "
            "LZE scores and selects whole groups of num_generations rollouts. Build the worker with the config's "
            "num_generations."
        )
    if not isinstance(train_dataset, Dataset):
        raise ValueError(
            "LZEAsyncGRPOTrainer needs a map-style train dataset (datasets.Dataset): the per-prompt state is keyed "
            f"by each row's content and saved against the dataset's fingerprint; got {type(train_dataset).__name__}."
        )
    if environment_factory is not None:
        raise ValueError(
            "LZEAsyncGRPOTrainer does not take an environment_factory: an environment may draw a new task at each "
            "reset, so a prompt key would not name what was rolled out, and its reward columns are named after its "
            "class. Use LZEGRPOTrainer with environment_factory, or tools= with the async trainer."
        )
    if args.max_steps <= 0:
        raise ValueError(
            f"max_steps={args.max_steps} is invalid with LZEAsyncGRPOTrainer: without it AsyncGRPOTrainer stops after "
            "num_train_epochs passes counted in groups trained, and LZE trains only the selected ones, so an 'epoch' "
            "would roll out about 1/selection_ratio passes over the prompts. Set max_steps > 0."
        )


@contextlib.contextmanager
def _builds(worker_class: type) -> Iterator[None]:
    """While it lasts, TRL's async trainer builds `worker_class` where it builds its `AsyncRolloutWorker` (with the
    same arguments). Why a bend of TRL: its constructor names the class itself and takes no worker class, and a worker
    passed in would have to be built without the arguments TRL computes for it."""
    original = async_grpo_trainer.AsyncRolloutWorker
    async_grpo_trainer.AsyncRolloutWorker = worker_class
    try:
        yield
    finally:
        async_grpo_trainer.AsyncRolloutWorker = original


class _StopWhenExhausted(TrainerCallback):
    """Ends training at the end of the step in which the window found an epoch without a prompt (forward pruning left
    none), on every process alike (the window lives on the main process), as the synchronous trainer's sampler ends
    it at an epoch without a generation batch."""

    def __init__(self, trainer: LZEAsyncGRPOTrainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        accelerator = self.trainer.accelerator
        exhausted = accelerator.is_main_process and bool(self.trainer.lze_window.exhausted)
        flag = torch.tensor([int(exhausted)], device=accelerator.device)
        if accelerator.reduce(flag, reduction="sum").item() > 0:
            control.should_training_stop = True
        return control


class LZEAsyncGRPOTrainer(LZEStateOwner, AsyncGRPOTrainer):
    """
    TRL's experimental `AsyncGRPOTrainer` with Learning-Zone Energy (LZE): the trainer draws each generation batch of
    `window_groups` prompts (forward pruning and planning selectors included) and orders their groups from the rollout
    worker, `num_generations` rollouts each; each batch, once all its groups have arrived, is scored into the
    per-prompt state in policy-version order, and only the groups its selector keeps reach the update.

    Takes `AsyncGRPOTrainer`'s arguments; `args` may be an [`LZEAsyncGRPOConfig`] or a plain `AsyncGRPOConfig` (which
    gets the LZE defaults), and is copied. With `rollout_worker=None` the trainer builds
    [`~lze_trl.async_grpo.worker.LZERolloutWorker`] (TRL's vLLM worker, taking orders); a worker passed in must take
    orders (`send_orders`), roll out `num_generations` rollouts for each (its `num_generations`, where it has one, is
    the config's; one left `None` is set to it) and tag its rows, as the test helper
    [`~lze_trl.testing.async_stand_ins.StandInRolloutWorker`] does. On a CPU (`use_cpu=True`, or no CUDA) the trainer
    runs TRL's tree attention in plain torch
    ([`~lze_trl.async_grpo.cpu.cpu_tree_attention`]).

    Attributes:
        lze ([`LZERun`]):
            The run's LZE state (main process).
        lze_window ([`~lze_trl.async_grpo.window.GroupWindow`]):
            The generation batches in flight, between the worker's queue and the trainer (main process).
        prompt_keys ([`~lze_trl.method.prompt_keys.PromptKeys`]):
            The train dataset's prompt keys and fingerprint.
    """

    def __init__(
        self,
        model: str,
        reward_funcs: Any = None,
        args: AsyncGRPOConfig | None = None,
        train_dataset: Dataset | None = None,
        rollout_worker: Any = None,
        weight_transfer: Any = None,
        **kwargs: Any,
    ) -> None:
        args = as_lze_async_config(args, model)
        check_async_inputs(args, train_dataset, rollout_worker, kwargs.get("environment_factory"))
        funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs] if reward_funcs else []
        names = [get_callable_name(f) for f in funcs] or ["correctness"]
        correctness = resolve_correctness_reward(args.correctness_reward, names)
        on_cpu = args.use_cpu or not torch.cuda.is_available()
        with contextlib.ExitStack() as stack:
            if on_cpu:
                stack.enter_context(cpu_construction())
            if rollout_worker is None:  # TRL builds its worker with LZE's class, from the arguments it gives its own
                stack.enter_context(_builds(LZERolloutWorker))
            super().__init__(
                model,
                reward_funcs,
                args=args,
                train_dataset=train_dataset,
                rollout_worker=rollout_worker,
                weight_transfer=weight_transfer,
                **kwargs,
            )
        if rollout_worker is not None and getattr(rollout_worker, "num_generations", 0) is None:
            rollout_worker.num_generations = args.num_generations  # a worker built without it rolls out the config's
        if on_cpu:
            use_cpu_tree_attention()
        warn_if_slow_bf16(self)
        if self.args.thread_policy:  # the setting's reason is in its docstring (LZESettings)
            apply_thread_policy(self.accelerator.device.type)
        self.prompt_keys = PromptKeys(train_dataset)  # the whole example: every column reaches the reward functions
        main = self.accelerator.is_main_process
        warn = lambda message: warnings.warn(message, LZEWarning, stacklevel=4) if main else None  # noqa: E731
        self.lze = LZERun(args, args.num_generations, self.prompt_keys.dataset_keys, names, correctness, warn)
        rows = args.per_device_train_batch_size * args.gradient_accumulation_steps * self.accelerator.num_processes
        window = args.window_groups or max(rows // args.num_generations, 1)  # one optimizer step of async GRPO
        warn_if_quota_below_two(args.selector, args.selection_ratio, window)
        self.lze_window = GroupWindow(
            self.lze,
            window,
            args.num_generations,
            args.batches_in_flight,
            self.log_lze,
            lambda: self.state.global_step,
            lambda: self.model_version - args.max_staleness,
        )
        if main:  # TRL reads `rollout_queue` when it builds the train dataloader, on the main process only
            self.lze_window.source = self.rollout_queue
            self.lze_window.send = self.rollout_worker.send_orders
            self.rollout_queue = self.lze_window
        self.add_callback(SaveLZEState(self))
        self.add_callback(_StopWhenExhausted(self))
        self.add_callback(StepClock(self, lambda: self.rollout_wait_seconds, "lze/rollout_wait_seconds"))

    # ----------------------------------------------------------------------------------------------- checkpoints
    @property
    def rollout_wait_seconds(self) -> float:
        """Seconds the trainer waited for rollouts (and scored them) in the window, over the run: the generation the
        update did not overlap (main process; 0 elsewhere)."""
        window = getattr(self, "lze_window", None)
        return window.waited_seconds if window is not None else 0.0

    def lze_state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The run's state and the policy version."""
        arrays, counters = super().lze_state_dict()
        counters["model_version"] = int(self.model_version)
        return arrays, counters

    def in_flight_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The window's open batches and every row it holds (main process; `None` elsewhere, where it holds none)."""
        return self.lze_window.state_dict() if self.accelerator.is_main_process else None

    def restore_lze_state(self, arrays: dict[str, np.ndarray], counters: dict[str, Any], checkpoint: str) -> None:
        """Takes back the run's state and the policy version, and the window's batches in flight, from `checkpoint`."""
        window = self.load_in_flight(checkpoint, "LZEAsyncGRPOTrainer's window")
        try:
            window_arrays, window_counters = window
            self.lze.load_state_dict(arrays)
            self.lze_window.load_state_dict(window_arrays, window_counters, LZERolloutSample)
            version = int(counters["model_version"])
        except (KeyError, ValueError, TypeError) as error:
            raise LZEStateError(f"The LZE state in {checkpoint!r} does not fit this run ({error!r}).") from error
        # TRL restores the policy version for its own worker only; the window's versions continue from it
        self.model_version = version
        if self.rollout_worker is not None:
            self.rollout_worker.update_model_version(version)

    @property
    def holds_lze_state(self) -> bool:
        return self.accelerator.is_main_process  # the window and the run live on the main process

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        output = super().train(resume_from_checkpoint=self.resume_lze(resume_from_checkpoint), **kwargs)
        self.lze.end_of_run()
        if self.args.should_save:
            self.save_lze_tables(self.args.output_dir)
        return output


__all__ = ["LZEAsyncGRPOConfig", "LZEAsyncGRPOTrainer"]
