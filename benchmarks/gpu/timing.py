"""One arm of the GPU timing script (`benchmarks/gpu/run.py`) timed with the real [`LZEGRPOTrainer`]: TRL's training
loop (`trainer.train()`) for the arm's steps, each step's wall-clock seconds, its seconds in TRL's generation calls
(`_generate_single_turn`, wrapped on the trainer instance), its generated rollouts and completion tokens, and what
reached the update (`compute_loss`, wrapped likewise), on a fresh model of the run's size."""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
import traceback
from typing import Any

import numpy as np
import torch
from transformers import PrinterCallback, TrainerCallback

from benchmarks.gpu.arms import Arm
from benchmarks.gpu.workload import EOSHazard, Size, build_model, pass_fail_reward, prompt_rows


STEP_KEYS = (
    "seconds",
    "generation_seconds",
    "generation_calls",
    "generated_rollouts",
    "completion_tokens",
    "update_rows",
    "update_loss_tokens",
    "update_forward_tokens",
)
"""What each step records (besides the trainer's own `lze/` metrics)."""


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def trainer_settings(arm: Arm, size: Size, max_steps: int, output_dir: str) -> dict[str, Any]:
    """The arm's `LZEGRPOConfig` keyword arguments: a generation batch of `size.prompts_per_step` prompts per optimizer
    step, in micro-batches of `size.micro_batch` rows (TRL's defaults otherwise, `gradient_checkpointing` included)."""
    group = arm.num_generations(size)
    rows = size.prompts_per_step * group
    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=min(size.micro_batch, rows),
        gradient_accumulation_steps=max(rows // size.micro_batch, 1),
        num_generations=group,
        max_completion_length=size.max_completion_length,
        max_steps=max_steps,
        learning_rate=1e-6,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        bf16=size.dtype == "bfloat16",
        use_cpu=size.device == "cpu",
    )
    settings.update(arm.settings)
    if arm.backend == "continuous_batching" and size.extra.get("continuous_batching_config"):
        settings["transformers_continuous_batching_config"] = size.extra["continuous_batching_config"]
    return settings


class StepMeter(TrainerCallback):
    """Each optimizer step's seconds and counters; stops training after the step that ends past `deadline` (a
    `time.perf_counter()` value)."""

    def __init__(self, device: str, deadline: float | None) -> None:
        self.device, self.deadline, self.steps, self.cut = device, deadline, [], False
        self.current: dict[str, float] = dict.fromkeys(STEP_KEYS, 0)
        self.lengths: list[list[int]] = []  # each step's completion lengths

    def on_step_begin(self, args, state, control, **kwargs):
        synchronize(self.device)
        self.current = dict.fromkeys(STEP_KEYS, 0)
        self.lengths.append([])
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        synchronize(self.device)
        now = time.perf_counter()
        self.steps.append({"step": state.global_step, **self.current, "seconds": now - self.start})
        if self.deadline is not None and now > self.deadline and state.global_step < state.max_steps:
            self.cut = control.should_training_stop = True
        return control

    def instrument(self, trainer: Any, hazard: EOSHazard) -> None:
        """Wraps the trainer's generation calls (the EOS hazard on while they run) and its loss."""
        generate, compute_loss = trainer._generate_single_turn, trainer.compute_loss

        def generate_single_turn(prompt_ids, *args, **kwargs):
            synchronize(self.device)
            start, hazard.active = time.perf_counter(), True
            try:
                completion_ids, logprobs = generate(prompt_ids, *args, **kwargs)
            finally:
                hazard.active = False
                synchronize(self.device)
            lengths = [len(c) for c in completion_ids]
            self.current["generation_seconds"] += time.perf_counter() - start
            self.current["generation_calls"] += 1
            self.current["generated_rollouts"] += len(lengths)
            self.current["completion_tokens"] += sum(lengths)
            self.lengths[-1].extend(lengths)
            return completion_ids, logprobs

        def counted_loss(model, inputs, *args, **kwargs):
            mask = inputs["completion_mask"]
            self.current["update_rows"] += int((mask.sum(dim=1) > 0).sum())
            self.current["update_loss_tokens"] += int(mask.sum())
            width = inputs["prompt_ids"].shape[1] + inputs["completion_ids"].shape[1]
            self.current["update_forward_tokens"] += int(mask.shape[0] * width)
            return compute_loss(model, inputs, *args, **kwargs)

        trainer._generate_single_turn, trainer.compute_loss = generate_single_turn, counted_loss


def summary(steps: list[dict], lengths: list[int], max_length: int) -> dict[str, Any]:
    """Per timed step: the median seconds (all, generation), the mean counters; the completion lengths' spread."""
    if not steps:
        return {}
    out = {
        "s_per_step": float(np.median([s["seconds"] for s in steps])),
        "generation_s_per_step": float(np.median([s["generation_seconds"] for s in steps])),
    }
    out.update({f"{k}_per_step": float(np.mean([s[k] for s in steps])) for k in STEP_KEYS[2:]})
    if lengths:
        values = np.asarray(lengths)
        out["completion_length"] = {
            "mean": float(values.mean()),
            "p50": float(np.median(values)),
            "p90": float(np.percentile(values, 90)),
            "max": int(values.max()),
            "truncated_frac": float((values >= max_length).mean()),
        }
    return out


def lze_metrics(log_history: list[dict]) -> dict[int, dict[str, float]]:
    """The trainer's own `lze/` metrics of each step, from its log (one entry per step)."""
    out: dict[int, dict[str, float]] = {}
    for entry in log_history:
        if "step" in entry and any(k.startswith("lze/") for k in entry):
            out[entry["step"]] = {k: v for k, v in entry.items() if k.startswith("lze/")}
    return out


def time_arm(arm: Arm, size: Size, tokenizer: Any, deadline: float | None = None, seed: int = 0) -> dict[str, Any]:
    """
    Trains `arm` for `arm.steps(size)` steps on a fresh model and returns its record: `steps` (every step, `timed` or
    not), the summary of the timed ones, `setup_seconds`, `peak_gpu_memory_gb`, `status` (`"ok"`, `"cut"` when the
    `deadline` stopped it early, or `"error"` with the traceback) and the trainer's full `config`.
    """
    from datasets import Dataset

    from lze_trl import LZEGRPOConfig, LZEGRPOTrainer

    record: dict[str, Any] = {"arm": arm.name, "backend": arm.backend, "settings": arm.settings, "status": "ok"}
    skipped, steps = arm.skipped_steps(size), arm.steps(size)
    record.update(skipped_steps=skipped)
    if size.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start, output_dir = time.perf_counter(), tempfile.mkdtemp(prefix="gpu_bench_")
    trainer = model = hazard = None
    try:
        model = build_model(size, tokenizer, seed)
        record["parameters"] = sum(p.numel() for p in model.parameters())
        hazard = EOSHazard(model, tokenizer.eos_token_id, size.hazard)
        dataset = Dataset.from_dict(prompt_rows(size, size.prompts_per_step * (steps + 4), seed))
        args = LZEGRPOConfig(**trainer_settings(arm, size, steps, output_dir))
        reward = pass_fail_reward(seed)
        trainer = LZEGRPOTrainer(model, reward, args=args, train_dataset=dataset, processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)  # no log dict printed per step
        meter = StepMeter(size.device, deadline)
        meter.instrument(trainer, hazard)
        trainer.add_callback(meter)
        record["config"] = args.to_dict()
        record["setup_seconds"] = time.perf_counter() - start
        trainer.train()
        record["train_seconds"] = time.perf_counter() - start - record["setup_seconds"]
        logged = lze_metrics(trainer.state.log_history)
        for i, step in enumerate(meter.steps):
            step.update(timed=skipped <= i < skipped + size.timed_steps, lze=logged.get(step["step"], {}))
        timed = [s for s in meter.steps if s["timed"]]
        lengths = [n for s, ls in zip(meter.steps, meter.lengths) if s["timed"] for n in ls]
        record.update(steps=meter.steps, timed_steps=len(timed), **summary(timed, lengths, size.max_completion_length))
        if meter.cut:
            record["status"] = "cut"
    except Exception:  # an arm that fails is recorded, and the run goes on to the next one
        record.update(status="error", error=traceback.format_exc()[-4000:])
    finally:
        if size.device == "cuda":
            record["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
            record["peak_gpu_memory_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
        if hazard is not None:
            hazard.remove()
        del trainer, model, hazard
        gc.collect()
        if size.device == "cuda":
            torch.cuda.empty_cache()
        shutil.rmtree(output_dir, ignore_errors=True)
    record["wall_seconds"] = time.perf_counter() - start
    return record
