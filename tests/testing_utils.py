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

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl import LZEGRPOConfig, LZEGRPOTrainer


ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("method", "rounds", "trainer", "async", "distributed", "with_vllm", "cli", "docs", "benchmarks", "support")
TEST_PATHS = [ROOT / "tests", *(ROOT / "tests" / folder for folder in FOLDERS)]
"""tests/ and its folders (tests grouped by what they test, `support` for the launched scripts): on `sys.path` in
the test run (conftest.py) and in the processes it launches, so that a test module or a script imports another
by name."""
SUPPORT = ROOT / "tests" / "support"
"""The scripts the tests launch (torchrun, accelerate) and the vLLM CPU workarounds."""


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


def sided_reward(prompts, completions, **kwargs):
    """Dead on both sides: prompts 0 mod 3 always solved, 1 mod 3 never solved; 2 mod 3 pass on half the buckets."""
    side = {0: lambda c: 1.0, 1: lambda c: 0.0, 2: lambda c: float(completion_bucket(c, 2) == 0)}
    return [side[prompt_number(p) % 3](c) for p, c in zip(prompts, completions)]


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
    kept = log.groupby("batch")["selected"].sum() * group_size
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


def lze_args(tmp_path, **overrides) -> LZEGRPOConfig:
    """The `LZEGRPOConfig` (or `overrides["config_class"]`) of a tiny run (`tiny_config`) in `tmp_path / "out"`, or in
    `overrides["output_dir"]`."""
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
        `LZEGRPOTrainer`: the trainer, not trained yet.
    """
    tokenizer = char_tokenizer() if tokenizer is None else tokenizer
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
    `rank{r}.json` (`counters`, `world`, the `lze/` (but the step's seconds) and `log_keys` entries of the log history,
    and `info`).

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
    arrays, counters = trainer.lze_state_dict()
    np.savez(out_dir / f"rank{rank}.npz", params=params, **arrays)
    # each process times its own steps (StepClock): the step's split is not a decision, and differs across processes
    timing = {"lze/step_seconds", "lze/generation_seconds", "lze/rollout_wait_seconds", "lze/update_seconds"}
    log = [
        {k: v for k, v in e.items() if (k.startswith("lze/") and k not in timing) or k in log_keys}
        for e in trainer.state.log_history
    ]
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
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(map(str, [ROOT, *TEST_PATHS]))}
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


# ----------------------------------------------------------------------------------------------- vision-language
def tiny_qwen2_vl(seed: int = 0):
    """
    A tiny randomly initialised Qwen2-VL and its processor, built offline: the character tokenizer with Qwen2-VL's
    vision tokens and a chat template that places an image before the text, and an image processor that cuts a
    28x28 image into 4 patches (one image token after the 2x2 merge). Qwen2-VL's processor also takes videos, which
    needs torchvision; this one takes images only.

    Returns:
        `tuple[Qwen2VLForConditionalGeneration, ProcessorMixin]`: the model and its processor.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
        Qwen2VLProcessor,
    )
    from transformers.processing_utils import ProcessorMixin

    from lze_examples.tiny import DEFAULT_CHARSET, SPECIAL_TOKENS

    vision = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *vision, *dict.fromkeys(DEFAULT_CHARSET)])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens([AddedToken(t, special=True) for t in (*SPECIAL_TOKENS, *vision)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )
    template = (
        "{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{% endfor %}{% if add_generation_prompt %}={% endif %}"
    )
    tokenizer.chat_template = template

    class ImageQwen2VLProcessor(Qwen2VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    images = Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=28 * 28, patch_size=14, merge_size=2)
    processor = ImageQwen2VLProcessor(image_processor=images, tokenizer=tokenizer, chat_template=template)
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=256,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=None,
        ),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14),
        image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model, processor


def colour_dataset(n: int = 16) -> Dataset:
    """Image prompts: a 28x28 image of one of `n` colours and one of two texts, so every text comes with many images
    (a row's identity is its text and its image)."""
    from PIL import Image

    colours = [((37 * i) % 256, (91 * i) % 256, (53 * i) % 256) for i in range(n)]
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": "which?" if i % 2 else "what?"}] for i in range(n)],
            "image": [Image.new("RGB", (28, 28), c) for c in colours],
        }
    )


def decided(decisions, window_groups: int) -> tuple[set, set]:
    """The selected groups, and those of the generation batches that selected none (handed on at zero advantage);
    group ids count up, `window_groups` per batch."""
    batches: dict[int, list] = {}
    for group, _, _, weight in decisions:
        batches.setdefault(group // window_groups, []).append((group, weight))
    idle = {g for members in batches.values() if all(w == 0 for _, w in members) for g, _ in members}
    return {g for g, _, _, w in decisions if w > 0}, idle
