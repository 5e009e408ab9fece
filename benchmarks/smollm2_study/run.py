"""The SmolLM2 study (BENCHMARKS.md section 11): GRPO and LZE training SmolLM2-135M-Instruct
(examples/lze_examples/smollm2.py) on arithmetic word problems (examples/lze_examples/tasks/word_problems.py) on a
CPU, from the same start, seed after seed, each finished run written to git-tracked JSON and skipped when there.

    python benchmarks/smollm2_study/run.py budget [--options ..] # what a step and an evaluation cost, by option
    python benchmarks/smollm2_study/run.py start                # the starting model's measurements (start.json)
    python benchmarks/smollm2_study/run.py train ARM SEED       # one run (its evaluations included)
    python benchmarks/smollm2_study/run.py jobs [--seeds N]     # the runs not yet in results, one `ARM SEED` a line
    python benchmarks/smollm2_study/run.py jobs --controls      # the same for the controls (`CONTROLS`)
    python benchmarks/smollm2_study/run.py speed ARM            # seconds a step, alone on the machine, no evaluation
    .venv-vllm/bin/python benchmarks/smollm2_study/run.py speed ARM --generation vllm --model_dir DIR  # vLLM colocate
    python benchmarks/smollm2_study/report.py                   # REPORT.md from the raw results

Each run writes `benchmarks/results/smollm2_study/runs/<arm>/seed_<k>.json` (atomically, when it has finished),
holding its settings, the machine's load average, its per-step seconds split into generation, scoring and update,
its logs, what the selector kept, its token meter and its evaluations; the runs go two at a time, for accuracy.
`speed` writes `speed/<arm>.json`: `SPEED_STEPS` steps of seed 0 with no evaluation, to be run one at a time with
nothing else on the machine (the study's wall-clock); with `--generation vllm`, `speed/<arm>_vllm.json`, the same
steps generating with vLLM colocated in the training process (TRL's `use_vllm=True, vllm_mode="colocate"`; vLLM's
CPU build in `.venv-vllm`, with `tests/support/vllm_cpu.py`'s workarounds), the other generation path the study could
have used (`vllm_uncorrected`: the same without TRL's importance-sampling correction). The protocol is
`benchmarks/results/smollm2_study/protocol.md`, committed before the runs; its settings are `PROTOCOL` and `ARMS`.
Runs use one torch thread (the package's policy on this 2-core machine, `lze-trl env`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import torch


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "smollm2_study"
if str(ROOT) not in sys.path:  # run as a script: the controls' selectors are in `benchmarks.peers`
    sys.path.insert(0, str(ROOT))
PROTOCOL: dict[str, Any] = {
    "train_prompts": 512,  # the recipe's pool: make_dataset(512, seed=0), levels 0-4
    "test_per_level": 80,  # distinct questions of make_dataset(.., seed=0, split="test"), levels 0-4: 400
    "ood_per_level": 128,  # distinct questions of make_dataset(.., seed=0, split="ood"), levels 5-6: 256
    "pass_rate_per_level": 5,  # distinct train-pool questions (the first of each level), 8 samples each
    "pass_rate_samples": 8,
    "prompts_per_step": 8,
    "num_generations": 8,
    "max_completion_length": 32,
    "temperature": 0.7,
    "learning_rate": 1e-5,
    "steps": 8,
    "eval_steps": [4, 8],  # test accuracy at each; OOD and pass rates at the last
    "eval_batch_size": 64,
}
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "grpo_half": {"selector": "none", "num_generations": 4},
    "lze": {"selector": "lze", "selection_ratio": 0.4},
}
"""The arms: LZEGRPOTrainer settings on top of the shared ones (`selector="none"` is plain GRPO; `grpo_half` is GRPO
with half the group, the equal-rollout control). The protocol's three other arms, the probe (`probe`), the adaptive
budget (`adaptive`) and the probe in fused rounds (`probe_fused`), left the library with BENCHMARKS.md section 15's
verdict: their runs are committed (their settings in each run's record) and ran from this script at commit 11e6ad3;
`report.py`'s `DECLARED` lists every arm of the protocol."""
CONTROLS: dict[str, dict[str, Any]] = {
    "uniform_live": {"selector": "uniform_live", "selection_ratio": 0.4},
}
"""The controls (the protocol's second addendum), outside the arms' Holm family: `uniform_live` draws LZE's quota of
groups uniformly at random among the live ones (`benchmarks/peers/uniform.py`), which isolates LZE's ranking."""
RUNS = {**ARMS, **CONTROLS}
"""Every arm and control, by name."""


def _distinct(split: str, levels: list[int], per_level: int, seed: int = 0):
    """`per_level` distinct questions of each level of `split`, in the task's order (it repeats easy ones)."""
    from lze_examples.tasks.word_problems import make_dataset

    pool = make_dataset(40 * per_level * len(levels), seed=seed, split=split, levels=levels)
    seen: set[str] = set()
    taken = {level: [] for level in levels}
    for i, (prompt, level) in enumerate(zip(pool["prompt"], pool["difficulty"])):
        text = prompt[0]["content"]
        if text not in seen and len(taken[level]) < per_level:
            seen.add(text)
            taken[level].append(i)
    short = {level: len(rows) for level, rows in taken.items() if len(rows) < per_level}
    if short:
        raise RuntimeError(f"{split}: fewer than {per_level} distinct questions at levels {short}")
    return pool.select(sorted(i for rows in taken.values() for i in rows))


def splits() -> dict[str, Any]:
    """The training pool and the evaluation sets (the same for every arm and seed)."""
    from lze_examples.tasks.word_problems import OOD_LEVELS, TRAIN_LEVELS, make_dataset

    p = PROTOCOL
    train = make_dataset(p["train_prompts"], seed=0, split="train")
    first: dict[int, list[int]] = {}
    for i, level in enumerate(train["difficulty"]):
        first.setdefault(level, [])
        if len(first[level]) < p["pass_rate_per_level"]:
            first[level].append(i)
    return {
        "train": train,
        "test": _distinct("test", list(TRAIN_LEVELS), p["test_per_level"]),
        "ood": _distinct("ood", list(OOD_LEVELS), p["ood_per_level"]),
        "pass_rate": train.select(sorted(i for rows in first.values() for i in rows)),
    }


def load_model(folder: str | None = None):
    """The starting model and its tokenizer: the installed file's (`examples/lze_examples/smollm2.py`), or its
    converted `folder` (`python -m lze_examples.smollm2` prints it) in an environment without the file, as
    `.venv-vllm`."""
    from lze_examples.smollm2 import load_smollm2

    if folder is None:
        return load_smollm2(source="package")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder, padding_side="left")


def evaluate(
    model,
    tokenizer,
    dataset,
    samples: int = 1,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: int = 0,
    lengths: bool = False,
) -> dict[str, Any]:
    """Per-prompt accuracy (greedy) or pass rate (`samples` at `temperature`) of `dataset`, its levels and seconds;
    completions of at most `max_new_tokens` (the protocol's `max_completion_length` unless given); with `lengths`,
    every completion's tokens and whether it ended (prompt by prompt)."""
    from lze_examples.evaluation.benchmarks import render_prompts
    from lze_examples.evaluation.generation import generate_transformers
    from lze_examples.tasks.word_problems import word_problem_reward

    start = time.perf_counter()
    texts, _ = render_prompts(dataset["prompt"], tokenizer)
    rows = generate_transformers(
        model,
        tokenizer,
        texts,
        add_special_tokens=False,
        num_samples=samples,
        temperature=temperature,
        max_new_tokens=max_new_tokens or PROTOCOL["max_completion_length"],
        batch_size=PROTOCOL["eval_batch_size"],
        seed=seed,
    )
    every = [c for row in rows for c in row]
    return {
        **({"lengths": [c.num_tokens for c in every], "ended": [not c.truncated for c in every]} if lengths else {}),
        "difficulty": list(dataset["difficulty"]),
        "rate": [
            float(np.mean(word_problem_reward([c.text for c in row], [answer] * len(row))))
            for row, answer in zip(rows, dataset["answer"])
        ],
        "completion_tokens": float(np.mean([c.num_tokens for row in rows for c in row])),
        "truncated_frac": float(np.mean([c.truncated for row in rows for c in row])),
        "seconds": time.perf_counter() - start,
    }


def measure(model, tokenizer, data: dict[str, Any], final: bool) -> dict[str, Any]:
    """Test accuracy; with `final`, OOD accuracy and the pass rates of the train-side prompts too."""
    out = {"test": evaluate(model, tokenizer, data["test"])}
    if final:
        out["ood"] = evaluate(model, tokenizer, data["ood"])
        out["pass_rate"] = evaluate(
            model, tokenizer, data["pass_rate"], PROTOCOL["pass_rate_samples"], PROTOCOL["temperature"]
        )
    return out


def environment() -> dict[str, Any]:
    import transformers
    import trl

    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }


def make_trainer(
    arm: str,
    model,
    tokenizer,
    data: dict[str, Any],
    seed: int,
    steps: int,
    settings: dict[str, Any] | None = None,
    protocol: dict[str, Any] | None = None,
    **extra: Any,
):
    """The metered trainer of `arm` (timing TRL's generation and reward calls), and its step clock callback; another
    study passes its own arm `settings` and `protocol` (this study's `RUNS[arm]` and `PROTOCOL` otherwise)."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    import benchmarks.peers  # noqa: F401  (registers the controls' selectors)
    from lze_examples.demo import MeteredLZEGRPOTrainer
    from lze_examples.tasks.word_problems import word_problem_reward
    from lze_trl import LZEGRPOConfig

    class Clock(GRPOTrainer):
        """Times TRL's `_generate` (generation) and `_calculate_rewards` (the reward) in training: below
        [`LZEGRPOTrainer`] in the method order, so only TRL's real work is timed, never rollouts served again."""

        generation_seconds = 0.0
        reward_seconds = 0.0
        generation_calls = 0
        truncated_rollouts = 0  # generated in training without their end of sequence within max_completion_length

        def _generate(self, prompts):
            start = time.perf_counter()
            try:
                result = super()._generate(prompts)
            finally:
                if self.model.training:
                    self.generation_seconds += time.perf_counter() - start
                    self.generation_calls += 1
            if self.model.training:
                limit, eos = self.max_completion_length, set(self.eos_token_ids)  # TRL 1.16's list of end ids
                self.truncated_rollouts += sum(len(c) >= limit and c[-1] not in eos for c in result[1])
            return result

        def _calculate_rewards(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return super()._calculate_rewards(*args, **kwargs)
            finally:
                self.reward_seconds += time.perf_counter() - start

    class Trainer(MeteredLZEGRPOTrainer, Clock):
        pass

    class Steps(TrainerCallback):
        """Each step's seconds split by the trainer's clocks, the load average, and the evaluations (not timed)."""

        def __init__(self) -> None:
            self.steps: list[dict[str, float]] = []
            self.evaluations: list[dict[str, Any]] = []

        def on_step_begin(self, args, state, control, **kwargs):
            t = trainer
            self._start = (time.perf_counter(), t.generation_seconds, t.reward_seconds, t.meter.rollout_seconds)

        def on_step_end(self, args, state, control, **kwargs):
            t, (start, gen, reward, rollout) = trainer, self._start
            seconds = time.perf_counter() - start
            generation = t.generation_seconds - gen
            scoring = t.meter.rollout_seconds - rollout - generation  # reward, selection and TRL's bookkeeping
            self.steps.append(
                {
                    "step": state.global_step,
                    "seconds": seconds,
                    "generation": generation,
                    "reward": t.reward_seconds - reward,
                    "scoring": scoring,
                    "update": seconds - generation - scoring,
                    "load": os.getloadavg()[0],
                }
            )
            if state.global_step in p["eval_steps"]:
                final = state.global_step == p["eval_steps"][-1]
                self.evaluations.append({"step": state.global_step, **measure(t.model, tokenizer, data, final)})

    p = PROTOCOL if protocol is None else protocol
    settings = {**(RUNS[arm] if settings is None else settings), **extra}
    num_generations = settings.pop("num_generations", p["num_generations"])
    prompts_per_step = settings.pop("prompts_per_step", p["prompts_per_step"])
    args = LZEGRPOConfig(
        output_dir=f"/tmp/lze-smollm2-study/{arm}-{seed}",
        per_device_train_batch_size=prompts_per_step * num_generations,
        num_generations=num_generations,
        max_completion_length=p["max_completion_length"],
        temperature=p["temperature"],
        learning_rate=p["learning_rate"],
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
        **settings,
    )
    clock = Steps()
    trainer = Trainer(
        model=model.name_or_path if args.use_vllm else model,  # TRL's colocated vLLM loads the model's folder
        reward_funcs=word_problem_reward,
        args=args,
        train_dataset=data["train"],
        processing_class=tokenizer,
        callbacks=[clock],
    )
    return trainer, clock


def train(
    arm: str, seed: int, data: dict[str, Any], steps: int, model_dir: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One run of `arm` from the starting model (of `model_dir`, see [`load_model`]); its record (see the module's
    docstring)."""
    from lze_examples.demo import count_parameters

    model, tokenizer = load_model(model_dir)
    trainer, clock = make_trainer(arm, model, tokenizer, data, seed, steps, **extra)
    load_before = os.getloadavg()[0]
    trainer.train()
    log = trainer.selection_log.columns()
    level_of = dict(zip(trainer.prompt_keys.dataset_keys.tolist(), data["train"]["difficulty"]))
    return {
        "arm": arm,
        "seed": seed,
        "settings": RUNS[arm],
        "extra": extra,
        "load_before": load_before,
        "steps": clock.steps,
        "evaluations": clock.evaluations,
        "generation_calls": trainer.generation_calls,
        "meter": trainer.meter.snapshot(count_parameters(model)),
        "log_history": [e for e in trainer.state.log_history if "lze/generated_rollouts" in e],
        "selection_log": {
            "step": log["step"].tolist(),
            "difficulty": [int(level_of[int(k)]) for k in log["prompt_key"]],
            "pass_rate": log["pass_rate"].tolist(),
            "weight": log["weight"].tolist(),
            "live": log["live"].tolist(),
        },
    }


VLLM_COLOCATE: dict[str, Any] = {
    "use_vllm": True,
    "vllm_mode": "colocate",
    "vllm_max_model_length": 512,
    "vllm_gpu_memory_utilization": 0.3,
}
GENERATION: dict[str, dict[str, Any]] = {
    "transformers": {},
    "vllm": VLLM_COLOCATE,
    "vllm_uncorrected": {**VLLM_COLOCATE, "vllm_importance_sampling_correction": False},
}
"""`speed --generation`'s trainer settings: transformers' `generate` (the study's), or TRL's vLLM colocated in the
training process (on a CPU, vLLM's CPU build; its KV cache is `VLLM_CPU_KVCACHE_SPACE` GiB, 1 unless set, not the
memory fraction), with TRL's default importance-sampling correction (a forward of the policy on every rollout to get
the log-probabilities it corrects against) or without it."""

SPEED_STEPS = 4
"""Steps of a `speed` run (the first, which pays one-time costs, is left out of its mean)."""


def write(path: Path, result: dict[str, Any]) -> None:
    """Writes `result` as JSON to `path` atomically (a run is in results only once it has finished)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}")


def run_path(results: Path, arm: str, seed: int) -> Path:
    return results / "runs" / arm / f"seed_{seed}.json"


BUDGET_OPTIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "lora": {"use_peft": True},
    "completion_24": {"max_completion_length": 24},
    "prompts_4": {"prompts_per_step": 4},
}
"""What `budget` times: GRPO's step as the study runs it, with LoRA (rank 16 on every linear layer, as the
recipes' variants), with completions of at most 24 tokens, and with 4 prompts a step instead of 8 (a `PROTOCOL` key in
an option replaces the protocol's value for that option)."""


def budget(data: dict[str, Any], steps: int, results: Path, options: list[str], evaluation: bool) -> None:
    """Seconds of GRPO's step under each of `options` (`BUDGET_OPTIONS`), each written to `budget/<option>.json`
    unless there, and with `evaluation`, of one evaluation of each set (`budget/evaluation.json`)."""
    for name in options:
        path = results / "budget" / f"{name}.json"
        if path.exists():
            continue
        extra = dict(BUDGET_OPTIONS[name])
        if extra.pop("use_peft", False):
            extra["peft_config"] = {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"}
        protocol = {key: extra.pop(key) for key in list(extra) if key in PROTOCOL}
        with patch.dict(PROTOCOL, protocol):
            record = _timed_grpo(data, steps, extra)
        write(path, {"option": name, "settings": BUDGET_OPTIONS[name], "environment": environment(), **record})
    path = results / "budget" / "evaluation.json"
    if not evaluation or path.exists():
        return
    model, tokenizer = load_model()
    out: dict[str, Any] = {"environment": environment()}
    for name in ("test", "ood", "pass_rate"):
        samples = PROTOCOL["pass_rate_samples"] if name == "pass_rate" else 1
        result = evaluate(model, tokenizer, data[name], samples, PROTOCOL["temperature"] if samples > 1 else 0.0)
        out[name] = {"prompts": len(result["rate"]), "samples": samples, "seconds": result["seconds"]}
    write(path, out)


def _timed_grpo(data: dict[str, Any], steps: int, extra: dict[str, Any]) -> dict[str, Any]:
    from peft import LoraConfig

    model, tokenizer = load_model()
    peft = extra.pop("peft_config", None)
    if peft:
        from peft import get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **peft))
    with patch.dict(PROTOCOL, eval_steps=[]):
        trainer, clock = make_trainer("grpo", model, tokenizer, data, 0, steps, **extra)
        trainer.train()
    later = clock.steps[1:]  # the first step pays one-time costs
    keys = ("seconds", "generation", "scoring", "update")
    return {"steps": clock.steps, "mean": {k: float(np.mean([s[k] for s in later])) for k in keys}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["budget", "start", "train", "jobs", "speed"])
    parser.add_argument("arm", nargs="?", choices=list(RUNS))
    parser.add_argument("seed", nargs="?", type=int)
    parser.add_argument("--seeds", type=int, default=3, help="jobs: seeds 0..N-1 of every arm")
    parser.add_argument("--controls", action="store_true", help="jobs: the controls' runs instead of the arms'")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--options", nargs="+", choices=list(BUDGET_OPTIONS), help="budget: these options only")
    parser.add_argument("--model_dir", help="speed: the starting model's converted folder (where the file is absent)")
    parser.add_argument(
        "--generation",
        choices=list(GENERATION),
        default="transformers",
        help="speed: generate with transformers (the study's path) or with vLLM colocated (`.venv-vllm`)",
    )
    args = parser.parse_args(argv)
    if args.what == "jobs":
        for seed in range(args.seeds):
            for arm in CONTROLS if args.controls else ARMS:
                if not run_path(args.results, arm, seed).exists():
                    print(arm, seed)
        return 0
    from lze_trl.common.engines import apply_thread_policy

    apply_thread_policy()
    data = splits()
    if args.what == "budget":
        options = args.options or list(BUDGET_OPTIONS)
        budget(data, 3, args.results, options, evaluation=not args.options)
    elif args.what == "start":
        path = args.results / "start.json"
        if args.force or not path.exists():
            model, tokenizer = load_model()
            write(path, {"protocol": PROTOCOL, "environment": environment(), **measure(model, tokenizer, data, True)})
    elif args.what == "speed":
        if args.arm is None:
            parser.error("speed needs an ARM")
        extra = GENERATION[args.generation]
        suffix = "" if args.generation == "transformers" else f"_{args.generation}"
        path = args.results / "speed" / f"{args.arm}{suffix}.json"
        if args.force or not path.exists():
            if extra:
                sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "support")]
                from vllm_cpu import apply_cpu_workarounds

                apply_cpu_workarounds()
            with patch.dict(PROTOCOL, eval_steps=[]):
                result = train(args.arm, 0, data, SPEED_STEPS, args.model_dir, **extra)
            write(path, {"protocol": PROTOCOL, "environment": environment(), **result})
    else:
        if args.arm is None or args.seed is None:
            parser.error("train needs an ARM and a SEED")
        path = run_path(args.results, args.arm, args.seed)
        if args.force or not path.exists():
            result = train(args.arm, args.seed, data, PROTOCOL["steps"])
            write(path, {"protocol": PROTOCOL, "environment": environment(), **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
