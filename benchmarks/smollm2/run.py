"""The SmolLM2 case study's runs: GRPO, LZE, the probe and the adaptive budget training SmolLM2-135M-Instruct
(lze_trl/smollm2.py) on arithmetic word problems (lze_trl/tasks/word_problems.py) on a CPU, from the same start.

    OMP_NUM_THREADS=1 python benchmarks/smollm2/run.py start           # the starting model's measurements
    OMP_NUM_THREADS=1 python benchmarks/smollm2/run.py train grpo lze probe adaptive
    OMP_NUM_THREADS=2 python benchmarks/smollm2/run.py speed --threads 2   # seconds per step, 2 threads
    .venv-vllm/bin/python benchmarks/smollm2/run.py speed --backend vllm   # the same with vLLM's CPU build
    python benchmarks/smollm2/report.py                                    # REPORT.md from the raw results

Each piece writes one JSON under `benchmarks/results/smollm2/` (`start.json`, `runs/<method>.json`,
`speed/threads_<n>.json`, `speed/vllm_threads_<n>.json`) and is skipped when its file exists (`--force` redoes it). The
protocol (what is measured and how) is the header of `benchmarks/smollm2/REPORT.md`, written by `report.py`; the
settings are `PROTOCOL` below.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "smollm2"
PROTOCOL: dict[str, Any] = {
    "train_prompts": 512,  # the recipe's pool: make_dataset(512, seed=0), levels 0-4
    "test_prompts": 50,  # make_dataset(50, seed=0, split="test"): 10 a level
    "ood_prompts": 40,  # make_dataset(40, seed=0, split="ood"): 20 a level
    "pass_rate_prompts": 25,  # make_dataset(25, seed=1, split="train"): 5 a level, 8 samples each
    "pass_rate_samples": 8,
    "prompts_per_step": 8,
    "num_generations": 8,
    "max_completion_length": 32,
    "temperature": 0.7,
    "learning_rate": 1e-5,
    "steps": 8,
    "seed": 0,
}
METHODS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "lze": {"selector": "lze", "selection_ratio": 0.4},
    "probe": {"selector": "lze", "selection_ratio": 0.33, "generation_rounds": [2, 8], "round_policy": "probe"},
    "adaptive": {
        "selector": "lze",
        "selection_ratio": 0.4,
        "generation_rounds": [2, 4, 8],
        "round_policy": "adaptive",
    },
}
"""The four runs: LZEGRPOTrainer settings on top of the shared ones (`selector="none"` is plain GRPO)."""


def load_model():
    from lze_trl.smollm2 import load_smollm2

    return load_smollm2(source="package")


def splits() -> dict[str, Any]:
    from lze_trl.tasks.word_problems import make_dataset

    p = PROTOCOL
    return {
        "train": make_dataset(p["train_prompts"], seed=0, split="train"),
        "test": make_dataset(p["test_prompts"], seed=0, split="test"),
        "ood": make_dataset(p["ood_prompts"], seed=0, split="ood"),
        "pass_rate": make_dataset(p["pass_rate_prompts"], seed=1, split="train"),
    }


def _generate(model, tokenizer, dataset, num_samples: int, temperature: float) -> list[list[Any]]:
    from lze_trl.evaluation.benchmarks import render_prompts
    from lze_trl.evaluation.generation import generate_transformers

    texts, _ = render_prompts(dataset["prompt"], tokenizer)
    return generate_transformers(
        model,
        tokenizer,
        texts,
        add_special_tokens=False,
        num_samples=num_samples,
        temperature=temperature,
        max_new_tokens=PROTOCOL["max_completion_length"],
        batch_size=64,
        seed=PROTOCOL["seed"],
    )


def measure(model, tokenizer, data: dict[str, Any]) -> dict[str, Any]:
    """Greedy accuracy on the test and OOD splits and sampled pass rates on the pass-rate prompts, per prompt."""
    from lze_trl.tasks.word_problems import word_problem_reward

    out: dict[str, Any] = {}
    for name, samples, temperature in (
        ("test", 1, 0.0),
        ("ood", 1, 0.0),
        ("pass_rate", PROTOCOL["pass_rate_samples"], PROTOCOL["temperature"]),
    ):
        start = time.perf_counter()
        rows = _generate(model, tokenizer, data[name], samples, temperature)
        rates = [
            float(np.mean(word_problem_reward([c.text for c in row], [answer] * len(row))))
            for row, answer in zip(rows, data[name]["answer"])
        ]
        out[name] = {
            "difficulty": list(data[name]["difficulty"]),
            "rate": rates,
            "completion_tokens": float(np.mean([c.num_tokens for row in rows for c in row])),
            "truncated_frac": float(np.mean([c.truncated for row in rows for c in row])),
            "example": rows[0][0].text,
            "seconds": time.perf_counter() - start,
        }
    return out


def environment() -> dict[str, Any]:
    import transformers
    import trl

    return {
        "date": time.strftime("%Y-%m-%d"),
        "torch_threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }


VLLM = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3, "vllm_max_model_length": 512}
"""The settings of `speed --backend vllm`: vLLM colocated in the training process (its CPU build)."""


def train(
    method: str, model, tokenizer, data: dict[str, Any], steps: int, output_dir: Path, **extra: Any
) -> dict[str, Any]:
    """Trains `method` for `steps` steps from `model` (changed in place); its logs, meter, selections and timing."""
    from trl import GRPOTrainer

    from lze_trl import LZEGRPOConfig
    from lze_trl.demo import MeteredLZEGRPOTrainer, count_parameters
    from lze_trl.tasks.word_problems import word_problem_reward

    class GenerationCalls(GRPOTrainer):
        """Counts TRL's generation calls in training (one per generation round), below [`LZEGRPOTrainer`] in the
        method order, as the meter's rollouts are: the rollouts served again to TRL's update rows are no call."""

        generation_calls = 0

        def _generate(self, prompts):
            if self.model.training:
                self.generation_calls += 1
            return super()._generate(prompts)

    class Trainer(MeteredLZEGRPOTrainer, GenerationCalls):
        pass

    p = PROTOCOL
    args = LZEGRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=p["prompts_per_step"] * p["num_generations"],
        num_generations=p["num_generations"],
        max_completion_length=p["max_completion_length"],
        temperature=p["temperature"],
        learning_rate=p["learning_rate"],
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=p["seed"],
        **METHODS[method],
        **extra,
    )
    trainer = Trainer(
        model=model,
        reward_funcs=word_problem_reward,
        args=args,
        train_dataset=data["train"],
        processing_class=tokenizer,
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    log = trainer.selection_log.columns()
    level_of = dict(zip(trainer.prompt_keys.dataset_keys.tolist(), data["train"]["difficulty"]))
    return {
        "method": method,
        "settings": METHODS[method],
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "generation_calls": trainer.generation_calls,
        "meter": trainer.meter.snapshot(count_parameters(model)),
        "log_history": [e for e in trainer.state.log_history if "lze/fresh_rollouts" in e],
        "selection_log": {
            "step": log["step"].tolist(),
            "difficulty": [int(level_of[int(k)]) for k in log["prompt_key"]],
            "pass_rate": log["pass_rate"].tolist(),
            "weight": log["weight"].tolist(),
            "live": log["live"].tolist(),
        },
    }


def write(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["start", "train", "speed"])
    parser.add_argument("methods", nargs="*", default=list(METHODS), help="train: the methods to run")
    parser.add_argument("--steps", type=int, default=PROTOCOL["steps"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (speed; the runs use 1)")
    parser.add_argument(
        "--backend", choices=["transformers", "vllm"], default="transformers", help="speed: generation"
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads if args.what == "speed" else 1)
    data = splits()
    if args.what == "start":
        path = args.results / "start.json"
        if path.exists() and not args.force:
            return 0
        model, tokenizer = load_model()
        write(path, {"protocol": PROTOCOL, "environment": environment(), "measured": measure(model, tokenizer, data)})
    elif args.what == "speed":
        prefix, extra = ("", {}) if args.backend == "transformers" else ("vllm_", VLLM)
        path = args.results / "speed" / f"{prefix}threads_{args.threads}.json"
        if extra:  # vLLM's CPU build needs the test-side workarounds the project's vLLM tests use
            sys.path.insert(0, str(ROOT / "tests"))
            from vllm_cpu import apply_cpu_workarounds

            apply_cpu_workarounds()
        model, tokenizer = load_model()
        result = train("lze", model, tokenizer, data, 2, Path("/tmp/lze-smollm2-speed"), **extra)
        write(path, {"environment": environment(), "threads": args.threads, "backend": args.backend, **result})
    else:
        unknown = sorted(set(args.methods) - set(METHODS))
        if unknown:
            parser.error(f"unknown methods {unknown}: use some of {list(METHODS)}")
        for method in args.methods:
            path = args.results / "runs" / f"{method}.json"
            if path.exists() and not args.force:
                continue
            model, tokenizer = load_model()
            result = train(method, model, tokenizer, data, args.steps, Path(f"/tmp/lze-smollm2-{method}"))
            result["measured"] = measure(model, tokenizer, data)
            write(path, {"protocol": {**PROTOCOL, "steps": args.steps}, "environment": environment(), **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
