"""
Shared test helpers, kept in one place the way TRL keeps `tests/testing_utils.py`.

A tiny offline Qwen2 with a character tokenizer, a prompt dataset whose prompts carry their row index, deterministic
reward functions, the settings of a tiny training run, a trainer built from them, and the plumbing of the two-process
(torchrun) runs. The test modules import it as `testing_utils` (pytest puts `tests/` on `sys.path`); so do the
`tests/dist_*.py` scripts that torchrun launches (Python puts a script's own folder on `sys.path`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset

from lze_trl import LZEGRPOConfig, LZEGRPOTrainer
from lze_trl.tiny import char_tokenizer, tiny_qwen2


# The settings of every tiny training run: 8 rollouts per micro-batch in groups of 4 (2 prompts per step), 6-token
# completions, one log entry per step, nothing saved, CPU, float32 (GRPOConfig's default bf16=True autocasts to
# bfloat16, about 30x slower on a CPU without bf16 instructions), seed 0.
TINY_ARGS: dict[str, Any] = dict(
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=6,
    max_steps=4,
    logging_steps=1,
    report_to="none",
    learning_rate=1e-3,
    save_strategy="no",
    use_cpu=True,
    bf16=False,
    seed=0,
    disable_tqdm=True,
)


# ----------------------------------------------------------------------------------------------- data and rewards
def prompt_dataset(n: int = 32, difficulty: bool = False) -> Dataset:
    """
    The test prompts: row `i` is `f"{i}+{i % 7}="`.

    Args:
        n (`int`, *optional*, defaults to `32`):
            Number of prompts.
        difficulty (`bool`, *optional*, defaults to `False`):
            Whether to add a `difficulty` column, `i % 3` (for the plots by difficulty).

    Returns:
        `Dataset`: a map-style dataset with a `prompt` column (and `difficulty`).
    """
    dataset = Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(n)]})
    return dataset.add_column("difficulty", [i % 3 for i in range(n)]) if difficulty else dataset


def prompt_number(prompt: str) -> int:
    """The `i` of a `prompt_dataset` prompt `f"{i}+{i % 7}="`: its row index."""
    return int(prompt.split("+")[0])


def completion_bucket(completion: str, buckets: int) -> int:
    """A deterministic bucket in `range(buckets)` of a completion's text (CRC-32 modulo `buckets`)."""
    return zlib.crc32(completion.encode()) % buckets


def mixed_reward(prompts, completions, **kwargs):
    """Deterministic reward whose pass rate depends on the prompt: (i % 9) of 8 completion buckets pass."""
    return [float(completion_bucket(c, 8) < prompt_number(p) % 9) for p, c in zip(prompts, completions)]


def even_solved_reward(prompts, completions, **kwargs):
    """Even prompts are always solved (they get pruned); odd ones pass on half the completion buckets."""
    return [
        1.0 if prompt_number(p) % 2 == 0 else float(completion_bucket(c, 2) == 0) for p, c in zip(prompts, completions)
    ]


def text_reward(completions, **kwargs):
    """A reward of the completion's text alone: one completion bucket of three passes."""
    return [float(completion_bucket(c, 3) == 0) for c in completions]


def always_right(completions, **kwargs):
    """Every completion passes: every group is dead (all-correct)."""
    return [1.0] * len(completions)


# ----------------------------------------------------------------------------------------------- models and trainers
def count_grad_rows(model) -> dict[str, int]:
    """
    Counts the rows that go through a forward pass with gradients enabled (the update's forward/backward).

    Args:
        model (`torch.nn.Module`):
            The model to watch (a forward pre-hook is registered on it).

    Returns:
        `dict[str, int]`: a counter whose `"rows"` grows with every such forward pass.
    """
    counter = {"rows": 0}

    def hook(module, args, kwargs):
        if torch.is_grad_enabled():
            counter["rows"] += kwargs["input_ids"].shape[0]

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def padded_forward_rows(kept_rows: int, steps_per_generation: int) -> int:
    """
    The rows a process hands its update for one generation batch whose largest process kept `kept_rows`: rounded up to
    a multiple of `steps_per_generation`, at least one row per micro-step (zero-weight padding rows run the micro-steps
    of a batch with nothing kept, as GRPO runs an all-dead batch).
    """
    return max(math.ceil(kept_rows / steps_per_generation), 1) * steps_per_generation


def expected_forward_rows(log, group_size: int = 4, steps_per_generation: int = 1) -> int:
    """
    The rows a single-process run hands its update, from its selection log: each generation batch's kept rollouts,
    padded as [`padded_forward_rows`] says.

    Args:
        log (`pandas.DataFrame`):
            `trainer.selection_log.to_pandas()`.
        group_size (`int`, *optional*, defaults to `4`):
            Rollouts per group (`num_generations`).
        steps_per_generation (`int`, *optional*, defaults to `1`):
            Micro-steps per generation batch.

    Returns:
        `int`: the number of rows through a forward pass with gradients.
    """
    kept = log.groupby("generation")["selected"].sum() * group_size
    return sum(padded_forward_rows(int(k), steps_per_generation) for k in kept)


def tiny_config(output_dir, config_class=LZEGRPOConfig, **overrides):
    """
    The config of a tiny run: `TINY_ARGS` with `overrides`, writing to `output_dir`.

    Args:
        output_dir (`str` or `Path`):
            The run's output folder.
        config_class (`type`, *optional*, defaults to `LZEGRPOConfig`):
            The config class (TRL's `GRPOConfig` for a stock run).
        **overrides:
            Config fields that replace or add to `TINY_ARGS`.

    Returns:
        An instance of `config_class`.
    """
    return config_class(**{**TINY_ARGS, "output_dir": str(output_dir), **overrides})


def experimental(overrides: dict[str, Any]) -> bool:
    """Whether `overrides` set a setting of the experimental modes (`benchmarks.experimental`) off its default."""
    from dataclasses import fields

    from benchmarks.experimental import ExperimentalConfig
    from benchmarks.harness.specs import EXPERIMENTAL_FIELDS

    defaults = {f.name: f.default for f in fields(ExperimentalConfig)}
    return any(key in EXPERIMENTAL_FIELDS and value != defaults[key] for key, value in overrides.items())


def lze_args(tmp_path, **overrides) -> LZEGRPOConfig:
    """
    The `LZEGRPOConfig` of a tiny run (`tiny_config`) in `tmp_path / "out"`, or in `overrides["output_dir"]`; an
    `ExperimentalConfig` when `overrides` set an experimental mode's setting.
    """
    if "config_class" not in overrides:
        if experimental(overrides):
            from benchmarks.experimental import ExperimentalConfig

            overrides["config_class"] = ExperimentalConfig
        else:  # the core's config: drop the experimental settings left at their defaults
            from benchmarks.harness.specs import EXPERIMENTAL_FIELDS

            overrides = {k: v for k, v in overrides.items() if k not in EXPERIMENTAL_FIELDS}
    return tiny_config(overrides.pop("output_dir", Path(tmp_path) / "out"), **overrides)


def make_trainer(
    tmp_path,
    selector: str = "lze",
    reward=mixed_reward,
    dataset=None,
    model=None,
    tokenizer=None,
    trainer_kwargs: dict | None = None,
    trainer_class: type | None = None,
    **overrides,
) -> LZEGRPOTrainer:
    """
    An `LZEGRPOTrainer` of a fresh tiny Qwen2 on `prompt_dataset()` (or `dataset`) with `lze_args(**overrides)`.

    Args:
        tmp_path (`Path`):
            The test's folder (the run writes to `tmp_path / "out"`).
        selector (`str`, *optional*, defaults to `"lze"`):
            The config's `selector`.
        reward (`callable` or `list`, *optional*, defaults to `mixed_reward`):
            The reward function(s).
        dataset (`Dataset` or `IterableDataset`, *optional*):
            The train dataset; `prompt_dataset()` when `None`.
        model (`PreTrainedModel`, *optional*):
            The model; a fresh `tiny_qwen2` of `tokenizer` when `None`.
        tokenizer (`PreTrainedTokenizerFast`, *optional*):
            The processing class; a fresh `char_tokenizer()` when `None`.
        trainer_kwargs (`dict`, *optional*):
            Further arguments of the trainer (`eval_dataset`, `peft_config`, `rollout_func`, ...).
        trainer_class (`type`, *optional*):
            A subclass of `LZEGRPOTrainer` to build (e.g. one that records what it sees).
        **overrides:
            Config fields (see `lze_args`).

    Returns:
        `LZEGRPOTrainer`: the trainer, not trained yet (an `ExperimentalLZETrainer` when `overrides` set an
        experimental mode's setting).
    """
    tokenizer = char_tokenizer() if tokenizer is None else tokenizer
    if trainer_class is None and experimental(overrides):
        from benchmarks.experimental import ExperimentalLZETrainer as trainer_class
    trainer_class = trainer_class or LZEGRPOTrainer
    return trainer_class(
        model=tiny_qwen2(tokenizer) if model is None else model,
        reward_funcs=reward,
        args=lze_args(tmp_path, selector=selector, **overrides),
        train_dataset=prompt_dataset() if dataset is None else dataset,
        processing_class=tokenizer,
        **(trainer_kwargs or {}),
    )


def logged(trainer, key: str) -> list:
    """The values of metric `key` in `trainer.state.log_history`, in logging order."""
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def flat_parameters(model) -> np.ndarray:
    """Every parameter of `model` (local tensors, not gathered), flattened and concatenated."""
    return torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()


@contextlib.contextmanager
def restored_environ():
    """Restores `os.environ` as it was on entry, whatever the block set or removed (recipes' `env:`, accelerate)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ----------------------------------------------------------------------------------------------- two processes
def end_distributed() -> None:
    """
    Ends a torchrun worker cleanly: a barrier, then `destroy_process_group`, so that no rank tears down the gloo
    group's threads at interpreter exit while the other still uses it (a rank once aborted at exit with "terminate
    called without an active exception").
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def save_rank_results(trainer, out_dir, params: np.ndarray, log_keys=("loss",), **info) -> None:
    """
    Writes what one process of a torchrun test ends with: `rank{r}.npz` (`params` and the LZE state arrays) and
    `rank{r}.json` (`counters`, `world`, the `lze/` and `log_keys` entries of the log history, and `info`).

    Args:
        trainer (`LZEGRPOTrainer`):
            The trained trainer.
        out_dir (`str` or `Path`):
            Folder of the results.
        params (`np.ndarray`):
            The parameters to save (the whole model, gathered where it is sharded).
        log_keys (`tuple[str, ...]`, *optional*, defaults to `("loss",)`):
            Log-history keys kept besides the `lze/` ones.
        **info:
            Further JSON-serialisable entries of `rank{r}.json`.
    """
    out_dir = Path(out_dir)
    rank = trainer.accelerator.process_index
    arrays, counters = trainer.lze_state()
    np.savez(out_dir / f"rank{rank}.npz", params=params, **arrays)
    log = [{k: v for k, v in e.items() if k.startswith("lze/") or k in log_keys} for e in trainer.state.log_history]
    results = {"counters": counters, "world": trainer.accelerator.num_processes, "log": log, **info}
    (out_dir / f"rank{rank}.json").write_text(json.dumps(results))


def run_torchrun(script, *script_args, timeout: int = 300):
    """
    Runs `script` in two CPU processes with torchrun (gloo) on a free local port; the whole process group is killed
    if it outlives `timeout`, so a hang fails the test instead of leaving workers behind.

    Args:
        script (`str` or `Path`):
            The script (one of `tests/dist_*.py`).
        *script_args:
            Its command-line arguments.
        timeout (`int`, *optional*, defaults to `300`):
            Seconds before the processes are killed and the test fails.

    Returns:
        `subprocess.CompletedProcess`: the return code and the captured stdout and stderr.
    """
    import signal
    import socket
    import subprocess
    import sys

    import pytest

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    proc = subprocess.Popen(
        [*cmd, str(script), *map(str, script_args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"torchrun {script} timed out after {timeout} s:\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
