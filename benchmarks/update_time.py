"""CPU time of LZE's policy update, per optimizer step: how the kept rows reach the loss (issue #22, move 1).

`python benchmarks/update_time.py --steps 20 --seeds 0 1 --layouts 1 4 8 --output OUT.json`

Trains LZE on the demo's task (shipped warm start, 64 prompts x 8 rollouts per generation batch, lr 1e-4) with the
generation batch cut into 1, 4 or 8 micro-steps (`gradient_accumulation_steps`, hence `steps_per_generation`), and
times, in CPU seconds (`time.process_time`), every `training_step` and every generation
(`_generate_and_score_completions`); the update's time is the first minus the second. It uses only the harness's
`prepare` and the trainer's public hooks, so the same script measures another checkout of the package
(`PYTHONPATH=/path/to/checkout python benchmarks/update_time.py ...`).

`--isolated` times the update alone, on one fixed generation batch: LZE's kept rows of the batch go through
`compute_loss`, backward and the optimizer step either split into the `m` micro-steps TRL makes of them (what the
trainer does now) or packed into the fewest micro-batches of at most `per_device_train_batch_size` rows (what it did
before), alternately, `--repeats` times each. Both compute the same loss on the same rows.
"""

from __future__ import annotations

import argparse
import json
import time

import lze_trl
from lze_examples.demo.config import DemoConfig, MethodSpec, lze_config
from lze_examples.demo.training import prepare
from lze_examples.tasks.arithmetic import arithmetic_reward
from lze_trl import LZEGRPOTrainer


class TimedTrainer(LZEGRPOTrainer):
    """Accumulates the CPU time of training steps and of generation (which a training step contains)."""

    step_cpu = 0.0
    generation_cpu = 0.0

    def _generate_and_score_completions(self, inputs):
        start = time.process_time()
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            if self.model.training:
                self.generation_cpu += time.process_time() - start

    def training_step(self, model, inputs, num_items_in_batch):
        start = time.process_time()
        try:
            return super().training_step(model, inputs, num_items_in_batch)
        finally:
            self.step_cpu += time.process_time() - start


def measure(seed: int, steps: int, accumulation: int) -> dict:
    config = DemoConfig(seed=seed, steps=steps, progress=False)
    model, tokenizer, splits, _ = prepare(config)
    rows = config.prompts_per_step * config.num_generations
    layout = {"per_device_train_batch_size": rows // accumulation, "gradient_accumulation_steps": accumulation}
    args = lze_config(config, MethodSpec("lze", {"selector": "lze", **layout}), f"/tmp/update_time_{seed}")
    trainer = TimedTrainer(
        model=model,
        reward_funcs=arithmetic_reward,
        args=args,
        train_dataset=splits["train"],
        processing_class=tokenizer,
    )
    trainer.train()
    kept = [e["lze/update_rows"] for e in trainer.state.log_history if "lze/update_rows" in e]
    return {
        "seed": seed,
        "micro_steps": accumulation,
        "steps": steps,
        "step_cpu_per_step": trainer.step_cpu / steps,
        "generation_cpu_per_step": trainer.generation_cpu / steps,
        "update_cpu_per_step": (trainer.step_cpu - trainer.generation_cpu) / steps,
        "kept_rows_per_step": sum(kept) / max(len(kept), 1),
        "final_loss": next(e["train_loss"] for e in reversed(trainer.state.log_history) if "train_loss" in e),
    }


def isolated(seed: int, accumulation: int, repeats: int) -> dict:
    import numpy as np
    import torch

    from lze_trl.grpo.rows import pad_rows, take_rows

    config = DemoConfig(seed=seed, steps=1, progress=False)
    model, tokenizer, splits, _ = prepare(config)
    rows = config.prompts_per_step * config.num_generations
    layout = {"per_device_train_batch_size": rows // accumulation, "gradient_accumulation_steps": accumulation}
    args = lze_config(config, MethodSpec("lze", {"selector": "lze", **layout}), f"/tmp/update_time_{seed}")
    trainer = LZEGRPOTrainer(
        model=model,
        reward_funcs=arithmetic_reward,
        args=args,
        train_dataset=splits["train"],
        processing_class=tokenizer,
    )
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.current_gradient_accumulation_steps = accumulation
    batch = [dict(row) for row in next(iter(trainer.get_train_dataloader()))]
    model.train()
    generated = super(LZEGRPOTrainer, trainer)._generate_and_score_completions(batch)  # every row, as GRPO's
    # LZE keeps 25 of the 64 groups at the default selection_ratio=0.4: keep 25 random groups
    groups = np.random.default_rng(seed).choice(config.prompts_per_step, size=25, replace=False)
    keep = np.zeros((1, rows), dtype=bool)
    keep[0, (groups[:, None] * config.num_generations + np.arange(config.num_generations)).ravel()] = True
    kept = int(keep.sum())
    local = torch.as_tensor(keep[0])
    full = pad_rows(generated, local, kept, accumulation, trainer.accelerator)  # what the trainer hands TRL to split
    packed_batch = pad_rows(generated, local, kept, 1, trainer.accelerator)  # the kept rows alone, unpadded

    def run(micro_batches):
        start = time.process_time()
        for inputs in micro_batches:
            loss = trainer.compute_loss(model, inputs)
            loss.backward()
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()
        return time.process_time() - start

    n_split = len(full["advantages"]) // accumulation
    split = [take_rows(full, torch.arange(i * n_split, (i + 1) * n_split)) for i in range(accumulation)]
    per = args.per_device_train_batch_size
    steps = -(-kept // per)
    size = -(-kept // steps)
    packed = [take_rows(packed_batch, torch.arange(i * size, min((i + 1) * size, kept))) for i in range(steps)]
    times = {"split": [], "packed": []}
    for _ in range(repeats):
        times["split"].append(run(split))
        times["packed"].append(run(packed))
    return {
        "seed": seed,
        "micro_steps": accumulation,
        "kept_rows": kept,
        "split_rows_per_micro_step": n_split,
        "packed_micro_steps": steps,
        "split_cpu_median": float(np.median(times["split"])),
        "packed_cpu_median": float(np.median(times["packed"])),
        "split_cpu": times["split"],
        "packed_cpu": times["packed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--layouts", type=int, nargs="+", default=[1, 4, 8], help="micro-steps per generation batch")
    parser.add_argument("--output", default=None)
    parser.add_argument("--isolated", action="store_true", help="time the update alone on a fixed batch")
    parser.add_argument("--repeats", type=int, default=20)
    cli = parser.parse_args()
    if cli.isolated:
        results = [isolated(seed, m, cli.repeats) for m in cli.layouts for seed in cli.seeds]
    else:
        results = [measure(seed, cli.steps, m) for m in cli.layouts for seed in cli.seeds]
    report = {"package": lze_trl.__file__, "results": results}
    print(json.dumps(report, indent=1))
    if cli.output:
        with open(cli.output, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
