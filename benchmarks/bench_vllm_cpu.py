"""Time per training step of GRPO (`selector="none"`) and LZE with vLLM colocate on the CPU, split into generation
(vLLM), scoring (rewards, the trainer's log-probabilities of the rollouts, LZE's selection) and update (forward,
backward and optimizer step of the rows that reach the loss).

Runs in the vLLM environment of `make test-vllm` (vLLM's CPU build) with the test-side CPU workaround of
`tests/vllm_cpu.py`; the model is a random Qwen2 built in code (character tokenizer), so completions run to `--max-
completion-length`:

    .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py --selectors none lze --steps 6

A run is a selector's name, optionally with `:key=value,...` LZEGRPOConfig overrides (numbers are parsed), e.g.
`lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33` or GRPO at half the rollouts,
`none:num_generations=4,per_device_train_batch_size=64`. Besides the times, each run records its tokens per step
(completion tokens generated, rollouts, prompt + completion tokens through the update), and the first run (the
baseline, GRPO) gives the per-token profile that `lze_trl.demo.projection` uses to project a run's step time under vLLM
from its token counts: seconds per generated completion token, per rollout scored, per update token, and the weight
sync. `--profile PATH` writes that profile as JSON. `--table SAVED.json` prints the figures of a saved run's step-time
table (BENCHMARKS.md section 2's; no training; `tests/test_vllm_step_table.py` checks them against BENCHMARKS.md and
the README)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def parse_run(spec: str) -> tuple[str, dict]:
    """`lze:fresh_fraction=0.25,replay_max_uses=2` -> ("lze", {...}), numbers parsed."""
    selector, _, rest = spec.partition(":")
    overrides = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            overrides[key] = float(value) if "." in value or "e" in value else int(value)
        except ValueError:
            overrides[key] = value
    return selector, overrides


def run(spec: str, model_dir: str, args: argparse.Namespace) -> dict:
    import numpy as np
    from transformers import AutoTokenizer, TrainerCallback

    from lze_trl import LZEGRPOConfig, LZEGRPOTrainer

    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from testing_utils import mixed_reward, prompt_dataset

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    selector, overrides = parse_run(spec)
    config_class, trainer_class = LZEGRPOConfig, LZEGRPOTrainer
    settings = dict(
        output_dir=tempfile.mkdtemp(),
        selector=selector,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=512,
        use_cpu=True,
        bf16=False,  # GRPOConfig's default bf16=True autocasts on the CPU too: ~30x slower matmuls without AVX512-BF16
        per_device_train_batch_size=args.prompts_per_step * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    config = config_class(**{**settings, **overrides})  # a run's overrides win, e.g. GRPO at half the batch
    trainer = trainer_class(
        model=model_dir,
        reward_funcs=mixed_reward,
        args=config,
        train_dataset=prompt_dataset(args.prompts_per_step * args.steps),
        processing_class=tokenizer,
    )
    clock = {"generate": 0.0, "sync": 0.0, "score": 0.0}
    tokens = {"completion": 0, "rollouts": 0, "update": 0}
    steps = []
    generate_engine = trainer.vllm_generation.generate

    def counting_generate(*a, **k):
        result = generate_engine(*a, **k)
        completions = result[1] if isinstance(result, tuple) else result
        tokens["rollouts"] += len(completions)
        tokens["completion"] += sum(len(c) for c in completions)
        return result

    trainer.vllm_generation.generate = counting_generate
    compute_loss = trainer.compute_loss

    def counting_loss(model, inputs, *a, **k):
        tokens["update"] += int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum())
        return compute_loss(model, inputs, *a, **k)

    trainer.compute_loss = counting_loss

    def timed(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                clock[name] += time.perf_counter() - start

        return wrapper

    engine = trainer.vllm_generation
    engine.generate = timed("generate", engine.generate)
    engine.sync_weights = timed("sync", engine.sync_weights)
    trainer._generate_and_score_completions = timed("score", trainer._generate_and_score_completions)

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            clock.update(generate=0.0, sync=0.0, score=0.0)
            tokens.update(completion=0, rollouts=0, update=0)
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            total = time.perf_counter() - self.start
            generation = clock["generate"]
            scoring = clock["score"] - clock["generate"] - clock["sync"]
            update = total - clock["score"]
            steps.append(
                dict(
                    total=total,
                    generation=generation,
                    sync=clock["sync"],
                    scoring=scoring,
                    update=update,
                    completion_tokens=tokens["completion"],
                    rollouts=tokens["rollouts"],
                    update_tokens=tokens["update"],
                )
            )

    trainer.add_callback(StepTimer())
    trainer.train()
    measured = steps[1:]  # the first step warms up vLLM's and torch's caches
    mean = {key: float(np.mean([s[key] for s in measured])) for key in measured[0]}
    log = trainer.state.log_history
    rows = [e["lze/update_rows"] for e in log if "lze/update_rows" in e][1:]
    return {"selector": spec, "steps": len(measured), "update_rows": float(np.mean(rows)), **mean}


def profile(baseline: dict) -> dict:
    """Seconds per generated completion token, per rollout scored, per update token, and per weight sync."""
    return {
        "generation_seconds_per_token": baseline["generation"] / baseline["completion_tokens"],
        "scoring_seconds_per_rollout": baseline["scoring"] / baseline["rollouts"],
        "update_seconds_per_token": baseline["update"] / baseline["update_tokens"],
        "sync_seconds": baseline["sync"],
    }


def step_table(saved: dict) -> list[list[str]]:
    """
    The figures of BENCHMARKS.md section 10's step-time table, one row per run of a saved `--output` JSON (no
    training): rollouts per step, seconds per step (all, generation, scoring, update) and the step over the first
    run's (GRPO's): measured, projected with this run's profile and with the shipped GPU-like one.
    """
    base = saved["results"][0]
    return [
        [
            f"{r['rollouts']:.0f}",
            *(f"{r[part]:.2f}" for part in ("total", "generation", "scoring", "update")),
            *(f"{r[key] / base[key]:.2f}" for key in ("total", "projected", "projected_shipped")),
        ]
        for r in saved["results"]
    ]


def main() -> None:
    if sys.argv[1:2] == ["--table"]:  # python benchmarks/bench_vllm_cpu.py --table SAVED.json: no vLLM, no training
        for row in step_table(json.loads(Path(sys.argv[2]).read_text())):
            print(" | ".join(row))
        return
    from lze_trl.commands import option

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--selectors", nargs="+", default=["none", "lze"])
    parser.add_argument("--steps", type=int, default=6, help="training steps per run; the first is not counted")
    parser.add_argument(*option("prompts_per_step"), type=int, default=16)
    parser.add_argument(*option("num_generations"), type=int, default=8)
    parser.add_argument(*option("max_completion_length"), type=int, default=128)
    parser.add_argument(*option("hidden_size"), type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    parser.add_argument("--profile", default=None, help="write the first run's per-token profile as JSON here")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    from vllm_cpu import apply_cpu_workarounds

    from lze_trl.tiny import char_tokenizer, tiny_qwen2

    apply_cpu_workarounds()
    model_dir = tempfile.mkdtemp()
    tokenizer = char_tokenizer()
    heads = args.hidden_size // 64  # head_dim 64, which vLLM's CPU attention takes
    model = tiny_qwen2(tokenizer, args.hidden_size, args.layers, heads, max_position_embeddings=512)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    params = sum(p.numel() for p in model.parameters())
    results = [run(selector, model_dir, args) for selector in args.selectors]
    print(f"model: Qwen2, {params / 1e6:.1f}M parameters; {args.prompts_per_step} prompts x {args.num_generations}")
    from lze_trl.demo.projection import load_profile, projected_step_seconds

    rates, shipped = profile(results[0]), load_profile()  # this run's own profile; the GPU-like one the demo ships
    print(
        "run | s/step | generation | sync | scoring | update | update rows | projected s/step | ratio: measured, "
        "projected (this run's profile), projected (shipped GPU-like profile)"
    )
    for r in results:
        counts = (r["completion_tokens"], r["rollouts"], r["update_tokens"])
        r["projected"] = projected_step_seconds(rates, *counts)
        r["projected_shipped"] = projected_step_seconds(shipped, *counts)
        print(
            f"{r['selector']} | {r['total']:.2f} | {r['generation']:.2f} | {r['sync']:.3f} | {r['scoring']:.2f} | "
            f"{r['update']:.2f} | {r['update_rows']:.0f} | {r['projected']:.2f} | "
            f"{r['total'] / results[0]['total']:.2f}, {r['projected'] / results[0]['projected']:.2f}, "
            f"{r['projected_shipped'] / results[0]['projected_shipped']:.2f}"
        )
    if args.output:
        Path(args.output).write_text(
            json.dumps({"params": params, "args": vars(args), "results": results, "profile": rates}, indent=1)
        )
    if args.profile:
        Path(args.profile).write_text(json.dumps({**rates, "measured_by": " ".join(sys.argv)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
