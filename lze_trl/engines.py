"""
The distributed engine under the trainer (DDP, FSDP, DeepSpeed ZeRO): what was asked for, what runs, and optimizer
windows that the selection skipped, accounted for in the same way on every engine.

When no micro-step of an optimizer window holds a selected row, [`LZEGRPOTrainer`] runs no forward or backward in it
(see `LZEGRPOTrainer.training_step`). The Trainer still counts the window as an optimizer step (`global_step`), and:

- the logged `grad_norm` of such a window is `0.0` on every engine (nothing was back-propagated), where DeepSpeed
  would repeat the previous window's norm and FSDP2 would log none;
- the optimizer makes no update, so AdamW's per-parameter `step` counts the windows that did update
  (`global_step` minus the skipped windows) on every engine;
- the learning-rate schedule advances with `global_step` on every engine: DeepSpeed's engine, whose `step()` is
  never called for such a window, gets its `global_steps`, `global_samples` and, when it owns the scheduler (a
  `scheduler` section in the DeepSpeed config), its scheduler advanced, and the window counted in `skipped_steps`
  (DeepSpeed's count of steps that applied no update), so `global_steps == global_step`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from accelerate.utils import DistributedType
from transformers import TrainerCallback
from transformers.utils import logging


if TYPE_CHECKING:
    from .trainer import LZEGRPOTrainer

logger = logging.get_logger(__name__)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").lower() in ("1", "true", "yes")


def requested_engine(args: Any) -> str | None:
    """
    The sharded engine the user asked for, `"FSDP"` or `"DeepSpeed"`, or `None` for none.

    Read from the training arguments (`fsdp=...`, `deepspeed=...`) and from the environment that `accelerate launch`
    sets for an FSDP or DeepSpeed config (`ACCELERATE_USE_FSDP`, `ACCELERATE_USE_DEEPSPEED`).
    """
    if getattr(args, "deepspeed", None) or _env_flag("ACCELERATE_USE_DEEPSPEED"):
        return "DeepSpeed"
    if getattr(args, "fsdp", None) or getattr(args, "fsdp_plugin_args", None) or _env_flag("ACCELERATE_USE_FSDP"):
        return "FSDP"
    return None


def running_engine(accelerator: Any) -> str:
    """The engine that really runs, in words: `"FSDP2"`, `"DeepSpeed ZeRO-3"`, `"DDP over 2 processes"`, ..."""
    kind = accelerator.distributed_type
    state = accelerator.state
    if kind == DistributedType.FSDP and getattr(state, "fsdp_plugin", None) is not None:
        return f"FSDP{state.fsdp_plugin.fsdp_version}"
    if kind == DistributedType.DEEPSPEED and getattr(state, "deepspeed_plugin", None) is not None:
        return f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"
    if accelerator.num_processes > 1:
        return f"DDP over {accelerator.num_processes} processes ({kind.value}, on {accelerator.device.type})"
    return f"one process without sharding (on {accelerator.device.type})"


def warn_if_not_sharded(trainer: LZEGRPOTrainer) -> str | None:
    """
    Warns once, on the main process, when FSDP or DeepSpeed was asked for but the model is not sharded.

    accelerate falls back silently: `fsdp=...` with `use_cpu=True` (or on a machine without GPUs) becomes DDP, and
    an FSDP or DeepSpeed config launched without GPUs becomes DDP too. Returns the message, or `None` when the
    requested engine runs (or none was requested).
    """
    requested = requested_engine(trainer.args)
    running = running_engine(trainer.accelerator)
    if requested is None or running.startswith(requested):
        return None
    message = (
        f"{requested} was requested but this run is not sharded: it runs {running}. Every process holds the whole "
        "model, gradients and optimizer state. accelerate only shards on GPUs (or other accelerators): launch "
        "without `--cpu` and without `use_cpu=True`, on a machine whose GPUs torch sees."
    )
    if trainer.accelerator.is_main_process:
        logger.warning(message)
    return message


def window_skipped(trainer: LZEGRPOTrainer) -> bool:
    """
    Whether the optimizer window that just ended ran no micro-step on any process.

    A window that runs any micro-step runs its last one (`batching.active_positions`), so the window was skipped
    exactly when its last micro-step, the one `training_step` has just finished, was.
    """
    last = (trainer._step - 1) % trainer.args.steps_per_generation
    return not bool(trainer._lze_active[last])


def _deepspeed_engine(trainer: LZEGRPOTrainer) -> Any | None:
    engine = getattr(trainer, "model_wrapped", None)
    return engine if trainer.is_deepspeed_enabled and hasattr(engine, "global_steps") else None


class SkippedWindowCallback(TrainerCallback):
    """
    Keeps DeepSpeed's engine counters in step with the Trainer's `global_step` over skipped optimizer windows.

    DeepSpeed advances its counters and its own scheduler inside `engine.step()`, which accelerate calls from the
    backward of a window's last micro-step: a window without any backward never reaches it. This callback does the
    engine's bookkeeping for such a window (no optimizer update: the window counts in `skipped_steps`). DDP and FSDP
    need nothing: the Trainer steps their optimizer (no gradient, no update) and scheduler itself.
    """

    def __init__(self, trainer: LZEGRPOTrainer) -> None:
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        engine = _deepspeed_engine(self.trainer)
        if engine is not None and window_skipped(self.trainer):
            if engine.lr_scheduler is not None:
                engine.lr_scheduler.step()
            engine.skipped_steps += 1
            engine.global_steps += 1
            engine.global_samples += engine.train_batch_size()
        return control
