"""The distributed engine under the trainer (DDP, FSDP, DeepSpeed ZeRO): what was asked for and what really runs."""

from __future__ import annotations

import os
from typing import Any

import torch
from accelerate.utils import DistributedType
from transformers.utils import logging


logger = logging.get_logger(__name__)


def requested_engine(args: Any) -> str | None:
    """The sharded engine asked for, `"FSDP"` or `"DeepSpeed"` (by the training arguments `fsdp=...`, `deepspeed=...`,
    or the environment `accelerate launch` sets for such a config), or `None`."""
    flag = lambda name: os.environ.get(name, "false").lower() in ("1", "true", "yes")  # noqa: E731
    if getattr(args, "deepspeed", None) or flag("ACCELERATE_USE_DEEPSPEED"):
        return "DeepSpeed"
    if getattr(args, "fsdp", None) or getattr(args, "fsdp_plugin_args", None) or flag("ACCELERATE_USE_FSDP"):
        return "FSDP"
    return None


def running_engine(accelerator: Any) -> str:
    """The engine that really runs, in words: `"FSDP2"`, `"DeepSpeed ZeRO-3"`, `"DDP over 2 processes"`, ..."""
    kind, state = accelerator.distributed_type, accelerator.state
    if kind == DistributedType.FSDP and getattr(state, "fsdp_plugin", None) is not None:
        return f"FSDP{state.fsdp_plugin.fsdp_version}"
    if kind == DistributedType.DEEPSPEED and getattr(state, "deepspeed_plugin", None) is not None:
        return f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"
    if accelerator.num_processes > 1:
        return f"DDP over {accelerator.num_processes} processes ({kind.value}, on {accelerator.device.type})"
    return f"one process without sharding (on {accelerator.device.type})"


def warn_if_not_sharded(trainer: Any) -> str | None:
    """
    Warns once, on the main process, when FSDP or DeepSpeed was asked for but the model is not sharded (accelerate
    falls back to DDP silently on a machine without GPUs or with `use_cpu=True`); returns the message, or `None`.
    """
    requested, running = requested_engine(trainer.args), running_engine(trainer.accelerator)
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


def warn_if_slow_bf16(trainer: Any) -> str | None:
    """
    Warns once, on the main process, when a run on the CPU computes in bfloat16 (`bf16=True`, TRL's default) on a CPU
    without bfloat16 instructions (`torch.ops.mkldnn._is_mkldnn_bf16_supported()` is False): its matmuls then run
    far slower than in float32 (on an AVX2 CPU, 0.84 GFLOP/s against 55 for a 1024 x 1024 matmul on one thread,
    2026-12-01); returns the message, or `None`.
    """
    if trainer.accelerator.device.type != "cpu" or not getattr(trainer.args, "bf16", False):
        return None
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return None
    message = (
        "bf16=True on a CPU without bfloat16 instructions: every matmul of the run is emulated, many times slower "
        "than float32 (a training step can take an hour). Set bf16=False (float32), as lze-trl's CPU recipes do."
    )
    if trainer.accelerator.is_main_process:
        logger.warning(message)
    return message


SMALL_CPU_CORES = 2
"""A CPU with at most this many cores runs lze-trl on one thread unless `OMP_NUM_THREADS` says otherwise
([`thread_policy`])."""


def thread_policy(device_type: str = "cpu") -> tuple[int | None, str]:
    """
    The torch threads every lze-trl command and trainer runs on (the trainers' `thread_policy`, on by default), and
    why (`None` off the CPU): `OMP_NUM_THREADS` when it is set; else one thread on a CPU of at most `SMALL_CPU_CORES`
    cores, where torch's default (one thread per core) competes with anything else the machine runs (the README's
    quick start beside one busy process: 9.1 s on one thread, 12.3 and 12.9 s on two, on an earlier machine; 8.6 s and
    89 s on this one, 2026-12-02; SmolLM2-135M under load: 60 s a step on one thread, 122 s on two); else torch's
    default.
    """
    cores = os.cpu_count() or 1
    if device_type != "cpu":
        return None, f"on {device_type}: torch's CPU threads do not run the model"
    if "OMP_NUM_THREADS" in os.environ:
        return torch.get_num_threads(), f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"
    if cores <= SMALL_CPU_CORES:
        return 1, f"a {cores}-core CPU: one thread unless OMP_NUM_THREADS is set"
    return torch.get_num_threads(), f"torch's default on a {cores}-core CPU"


def apply_thread_policy(device_type: str = "cpu") -> int | None:
    """Sets torch's threads to [`thread_policy`]'s (logged when it changes them); returns them (`None` off the CPU)."""
    threads, why = thread_policy(device_type)
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
        logger.info(f"torch uses {threads} thread(s): {why}.")
    return threads
