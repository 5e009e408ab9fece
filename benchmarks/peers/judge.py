"""The trainer side of the peers: judging every prompt with the current policy before training ([`prepare`]).

These functions drive the trainer's own generation and reward paths (TRL's `GRPOTrainer._generate` and
`_calculate_rewards`, private methods: fine in the benchmarks, kept out of the package). [`prepare`] is called with the
built trainer before `trainer.train()` (the benchmark harness's trainer does) and hands the judged pass rates to the
`"prefilter"` selector, reading them from its cache when another run judged the same model and data.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np
import torch

from lze_trl.method.selection import group_pass_rates

from .prefilter import PrefilterSelector


PREFILTER_CACHE_VERSION = 1


def model_fingerprint(model: torch.nn.Module) -> str:
    """
    A cheap fingerprint of a model: its config and, for every tensor of its state dict, name, shape, dtype and a
    strided sample of up to 4096 values (exact bytes, no reduction, so every process and device agrees).
    """
    h = hashlib.sha256()
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_json_string"):
        h.update(config.to_json_string().encode())
    for name, tensor in sorted(model.state_dict().items()):
        h.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}".encode())
        if tensor.is_meta or tensor.numel() == 0:
            continue
        flat = tensor.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 4096)][:4096]
        h.update(sample.to(device="cpu", dtype=torch.float32).numpy().tobytes())
    return h.hexdigest()


def dataset_content_hash(dataset: Any) -> str:
    """A content hash of every row and column of a map-style dataset, in order."""
    h = hashlib.sha256(str(len(dataset)).encode())
    for batch in dataset.with_format(None).iter(batch_size=4096):
        h.update(json.dumps(batch, sort_keys=True, default=str).encode())
    return h.hexdigest()


def judge_key(trainer: Any) -> str:
    """Key of the judged pass rates: model, dataset, group size, seed and everything else they depend on."""
    args = trainer.args
    tokenizer = getattr(trainer, "processing_class", None)
    parts = {
        "version": PREFILTER_CACHE_VERSION,
        "model": model_fingerprint(trainer.accelerator.unwrap_model(trainer.model)),
        "dataset": dataset_content_hash(trainer.train_dataset),
        "num_generations": trainer.num_generations,
        "seed": args.seed,
        "generation": [
            args.temperature,
            args.top_p,
            args.top_k,
            args.min_p,
            args.repetition_penalty,
            args.max_completion_length,
            args.generation_kwargs,
            args.chat_template_kwargs,
        ],
        "tokenizer": [
            type(tokenizer).__name__,
            getattr(tokenizer, "chat_template", None),
            len(tokenizer) if hasattr(tokenizer, "__len__") else None,
        ],
        "pass_threshold": args.pass_threshold,
        "correctness_reward": list(trainer.reward_func_names)[trainer.lze.correctness_index],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def judge_pass_rates(trainer: Any) -> np.ndarray:
    """
    Rolls out every prompt of the train dataset `num_generations` times with the trainer's current policy and
    generation settings, and returns each prompt's pass rate under the correctness reward (NaN if unscorable).

    Prompts are dealt to the processes in equal chunks (the last one padded) through the trainer's own generation
    and reward paths (`_generate`, `_calculate_rewards`), whose gather returns every process's rewards: all processes
    end with the same array. Sampling runs under a forked torch RNG seeded with `args.seed`, and the metrics TRL
    records while generating are left out of the training logs.
    """
    args, dataset, accelerator = trainer.args, trainer.train_dataset, trainer.accelerator
    G, P, rank = trainer.num_generations, accelerator.num_processes, accelerator.process_index
    per_process = max(1, (args.per_device_train_batch_size * args.steps_per_generation) // G)
    num_prompts = len(dataset)
    pass_rates = np.full(num_prompts, np.nan)

    model = trainer.model
    was_training = model.training
    saved_metrics = {k: list(v) for k, v in trainer._metrics["train"].items()}
    devices = [accelerator.device] if accelerator.device.type == "cuda" else []
    model.train()  # TRL's generation reads train/eval mode (and the group size) from the model
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(args.seed)
            for start in range(0, num_prompts, P * per_process):
                chunk = np.arange(start, start + P * per_process) % num_prompts
                local = chunk[rank * per_process : (rank + 1) * per_process].tolist()
                columns = dataset[local]
                rows = [{k: v[i] for k, v in columns.items()} for i in range(len(local))]
                inputs = [dict(row) for row in rows for _ in range(G)]
                prompts = [x["prompt"] for x in inputs]
                generated = trainer._generate(prompts)
                completion_ids, completions = generated[1], generated[3]
                rewards = trainer._calculate_rewards(inputs, prompts, completions, completion_ids)
                rates = group_pass_rates(rewards[:, trainer.lze.correctness_index], G, args.pass_threshold)
                real = min(num_prompts - start, P * per_process)
                pass_rates[start : start + real] = rates[:real]
    finally:
        model.train(was_training)
        trainer._metrics["train"].clear()
        trainer._metrics["train"].update(saved_metrics)
        for pending in ("_pending_extra_logs", "_pending_metrics"):
            if hasattr(trainer, pending):
                getattr(trainer, pending).clear()
    return pass_rates


def all_processes(trainer: Any, flag: bool) -> bool:
    """Whether `flag` is true on every process (a collective: every process must call it)."""
    found = torch.tensor([float(flag)], device=trainer.accelerator.device)
    return bool(trainer.accelerator.gather(found).min().item() > 0)


def prepare(trainer: Any) -> None:
    """
    Does what the run's selector needs before training: for `"prefilter"`, judges every prompt of the train dataset
    with the initial policy ([`judge_pass_rates`]) and hands the pass rates to the selector, unless every process
    finds them in the cache (a node with its own disk may not see it); the main process writes the cache. Nothing
    for the other selectors, or when the pass rates are already there.

    Call it on every process, with the built trainer, before `trainer.train()`. A resumed run restores the pass rates
    from its checkpoint afterwards.

    Args:
        trainer ([`~lze_trl.LZEGRPOTrainer`]):
            The trainer, not trained yet.
    """
    selector = trainer.lze.selector
    if not isinstance(selector, PrefilterSelector) or selector.pass_rates is not None:
        return
    num_prompts = len(trainer.train_dataset)
    path = selector.cache_path(judge_key(trainer), trainer.args.output_dir)
    pass_rates = None
    if os.path.isfile(path):
        with np.load(path) as data:
            if len(data["pass_rates"]) == num_prompts:
                pass_rates = data["pass_rates"].astype(np.float64)
    from_cache = all_processes(trainer, pass_rates is not None)
    if not from_cache:
        pass_rates = judge_pass_rates(trainer)
        if trainer.accelerator.is_main_process:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp.npz"
            np.savez(tmp, pass_rates=pass_rates)
            os.replace(tmp, path)
    selector.judged(pass_rates, from_cache)
