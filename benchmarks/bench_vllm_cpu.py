"""Time per training step of GRPO (`selector="none"`) and LZE with vLLM colocate on the CPU, split into generation
(vLLM), scoring (rewards, the trainer's log-probabilities of the rollouts, LZE's selection) and update (forward,
backward and optimizer step of the rows that reach the loss).

Runs in the vLLM environment of `make test-vllm` (vLLM's CPU build) with the test-side CPU workaround of
`tests/support/vllm_cpu.py`; the model is a random Qwen2 built in code (character tokenizer), so completions run to
`--max-
completion-length`:

    .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py --selectors none lze --steps 6

A run (an arm) is a selector's name, optionally with `:key=value,...` LZEGRPOConfig overrides, typed by the config
field as `lze-trl grpo` types them (`true`/`false` for a flag, `+` between a list's items), e.g.
`lze:selection_ratio=0.33,prune_solved=true` or GRPO at half the rollouts,
`none:num_generations=4,per_device_train_batch_size=64`. The first arm is the baseline (GRPO) of every ratio.

Steps timed: each step records its seconds (all, generation, sync, scoring, update), its vLLM generation calls, its
generated rollouts (completions vLLM returned) and tokens, and what LZE logged (`lze/update_rows`); a run's figures
are the means over its measured steps. The first `--skip_steps` steps (default 1: vLLM's and torch's caches warm up)
are not measured, so that every arm measures `--steps - --skip_steps` steady-state steps. `--repeats N` runs every arm
N times: each repeat runs every arm once, in the order given, so that a drift of the machine touches every arm alike;
each run has a fresh trainer and vLLM engine. `results` are then per arm the median over the repeats of each figure,
`runs` every run (with its steps), and the report gives per arm the medians and the ratios of the medians to the first
arm's. E.g. GRPO, GRPO at half the group and LZE, 3 times each (BENCHMARKS.md section 2's size):

    .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py --steps 6 --repeats 3 --output OUT.json --selectors none \
        none:num_generations=4,per_device_train_batch_size=64 lze

The committed runs of sections 2 and 8 also time the probe, the adaptive budget and fused rounds (arms such as
`lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=true`), which left the library with
BENCHMARKS.md section 15's verdict: they ran from this script at commit 11e6ad3, and `--table` and `--report` still
read their JSON.

Besides the times, the first arm (the baseline, GRPO) gives the per-token profile that
`lze_examples.demo.projection` uses to project a run's step time under vLLM from its token counts: seconds per
generated completion token, per rollout scored, per update token, and the weight sync. `--profile PATH` writes that
profile as JSON. `--table SAVED.json` prints the figures of a saved run's step-time table (BENCHMARKS.md section 2's;
no training; `tests/benchmarks/test_vllm_step_table.py` checks them against BENCHMARKS.md and the README); `--report
SAVED.json` prints the medians' table of a saved run (no training)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def parse_run(spec: str) -> tuple[str, dict]:
    """`lze:energy_terms=anchor+uncertainty,prune_solved=true` -> `("lze", {"energy_terms": ["anchor",
    "uncertainty"], "prune_solved": True})`: each value typed by its LZEGRPOConfig field, as `lze-trl grpo` types it
    (a key that is not a field raises)."""
    if str(ROOT) not in sys.path:  # run as a script: `benchmarks` is a package of the repository root
        sys.path.insert(0, str(ROOT))
    from benchmarks.harness.specs import parse_value

    selector, _, rest = spec.partition(":")
    overrides = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        overrides[key] = parse_value(key, value)
    return selector, overrides


def run(spec: str, model_dir: str, args: argparse.Namespace) -> dict:
    """One run of the arm `spec`: its figures (means over its measured steps) and every step's (`per_step`)."""
    import numpy as np
    from transformers import AutoTokenizer, TrainerCallback

    from lze_trl import LZEGRPOConfig, LZEGRPOTrainer

    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "support")]
    sys.path.insert(0, str(ROOT))
    from testing_utils import mixed_reward, prompt_dataset
    from vllm_cpu import release_vllm_engines, track_vllm_engines

    track_vllm_engines()
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
        train_dataset=prompt_dataset(args.prompts_per_step * config.max_steps),
        processing_class=tokenizer,
    )
    clock = {"generate": 0.0, "sync": 0.0, "score": 0.0}
    tokens = {"completion": 0, "rollouts": 0, "update": 0, "calls": 0}
    steps = []
    generate_engine = trainer.vllm_generation.generate

    def counting_generate(*a, **k):
        result = generate_engine(*a, **k)
        completions = result[1] if isinstance(result, tuple) else result
        tokens["calls"] += 1
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
            tokens.update(completion=0, rollouts=0, update=0, calls=0)
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
                    generation_calls=tokens["calls"],
                )
            )

    trainer.add_callback(StepTimer())
    trainer.train()
    logged = {e["step"]: e for e in trainer.state.log_history if "lze/update_rows" in e}  # one entry per step
    for number, step in enumerate(steps, start=1):
        entry = logged.get(number, {})
        step["step"] = number
        step["update_rows"] = float(entry.get("lze/update_rows", np.nan))
    skipped = args.skip_steps
    measured = steps[skipped:]
    if not measured:
        raise SystemExit(f"{spec}: no step measured: --steps {args.steps} <= --skip_steps {args.skip_steps}")
    mean = {key: float(np.mean([s[key] for s in measured])) for key in measured[0] if key != "step"}
    release_vllm_engines()  # this trainer's vLLM engine and KV cache: the next run builds its own
    result = {"selector": spec, "steps": len(measured), "skipped_steps": skipped}
    return {**result, **mean, "per_step": steps}


def medians(runs: list[list[dict]]) -> list[dict]:
    """Per arm (the runs' order), the median over the repeats (`runs[repeat][arm]`) of each figure of a run."""
    import numpy as np

    out = []
    for arm in zip(*runs):
        numbers = [k for k, v in arm[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out.append({"selector": arm[0]["selector"], **{k: float(np.median([r[k] for r in arm])) for k in numbers}})
    return out


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


REPORT_HEADER = [
    "arm",
    "rollouts/step",
    "generation calls/step",
    "generation s/step",
    "step s",
    "generation / GRPO",
    "rollouts / GRPO",
    "step / GRPO",
]


def report_table(saved: dict) -> list[list[str]]:
    """
    The medians' table of a saved `--output` JSON (no training), one row per arm ([`REPORT_HEADER`]): per arm the
    median over the repeats of each run's mean over its measured steps (generated rollouts, vLLM generation calls and
    generation seconds per step, seconds per step) and the ratios of those medians to the first arm's (GRPO's).
    """
    base = saved["results"][0]
    return [
        [
            r["selector"],
            f"{r['rollouts']:.1f}",
            f"{r['generation_calls']:.2f}",
            f"{r['generation']:.2f}",
            f"{r['total']:.2f}",
            *(f"{r[key] / base[key]:.2f}" for key in ("generation", "rollouts", "total")),
        ]
        for r in saved["results"]
    ]


def report(saved: dict) -> str:
    """[`report_table`] as a Markdown table, headed by the number of repeats and the steps measured."""
    runs = saved.get("runs", [saved["results"]])
    measured = ", ".join(f"{r['selector']} {r['steps']:.0f} (after {r.get('skipped_steps', 1):.0f})" for r in runs[0])
    rows = [REPORT_HEADER, ["---"] * len(REPORT_HEADER), *report_table(saved)]
    return (
        f"Medians over {len(runs)} run(s) of each run's mean over its measured steps (steps measured, after the steps "
        f"skipped: {measured}); ratios to the first arm's medians.\n\n"
        + "\n".join("| " + " | ".join(row) + " |" for row in rows)
    )


def main() -> None:
    if sys.argv[1:2] == ["--table"]:  # python benchmarks/bench_vllm_cpu.py --table SAVED.json: no vLLM, no training
        for row in step_table(json.loads(Path(sys.argv[2]).read_text())):
            print(" | ".join(row))
        return
    if sys.argv[1:2] == ["--report"]:  # python benchmarks/bench_vllm_cpu.py --report SAVED.json: no vLLM, no training
        print(report(json.loads(Path(sys.argv[2]).read_text())))
        return
    from lze_trl.commands import option

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--selectors", nargs="+", default=["none", "lze"], help="the arms; the first is the baseline")
    parser.add_argument(
        "--steps",
        type=int,
        default=6,
        help="training steps per run, --skip_steps not timed",
    )
    parser.add_argument(
        *option("skip_steps"),
        type=int,
        default=1,
        help="first steps not timed (vLLM's and torch's caches warm up)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of every arm; the results are their medians")
    parser.add_argument(*option("prompts_per_step"), type=int, default=16)
    parser.add_argument(*option("num_generations"), type=int, default=8)
    parser.add_argument(*option("max_completion_length"), type=int, default=128)
    parser.add_argument(*option("hidden_size"), type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--output", default=None, help="write the results (medians and every run) as JSON here")
    parser.add_argument("--profile", default=None, help="write the first arm's per-token profile as JSON here")
    args = parser.parse_args()
    for spec in args.selectors:
        parse_run(spec)  # a misspelt override fails here, before any training

    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "support")]
    from vllm_cpu import apply_cpu_workarounds

    from lze_examples.tiny import char_tokenizer, tiny_qwen2

    apply_cpu_workarounds()
    model_dir = tempfile.mkdtemp()
    tokenizer = char_tokenizer()
    heads = args.hidden_size // 64  # head_dim 64, which vLLM's CPU attention takes
    model = tiny_qwen2(tokenizer, args.hidden_size, args.layers, heads, max_position_embeddings=512)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    params = sum(p.numel() for p in model.parameters())
    started = time.perf_counter()
    runs = [[run(selector, model_dir, args) for selector in args.selectors] for _ in range(args.repeats)]
    results = medians(runs)
    print(f"model: Qwen2, {params / 1e6:.1f}M parameters; {args.prompts_per_step} prompts x {args.num_generations}")
    from lze_examples.demo.projection import load_profile, projected_step_seconds

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
    saved = {"params": params, "args": vars(args), "results": results, "runs": runs, "profile": rates}
    saved["wall_seconds"] = time.perf_counter() - started
    print()
    print(report(saved))
    if args.output:
        Path(args.output).write_text(json.dumps(saved, indent=1))
    if args.profile:
        Path(args.profile).write_text(json.dumps({**rates, "measured_by": " ".join(sys.argv)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
