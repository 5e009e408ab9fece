"""The SmolLM2 study's async part (BENCHMARKS.md section 11): TRL's async GRPO and async GRPO with half the group,
training SmolLM2-135M-Instruct against `vllm serve` of vLLM's CPU build, on the sync study's data and settings,
evaluated as the sync runs are (`run.py`'s `PROTOCOL`, `splits` and `measure`). Its third arm, async LZE with the probe
(`probe`: `window_groups=8`, `generation_rounds=[2, 8]`, `selection_ratio=0.33`, its 2 selected groups a step), left
the library with BENCHMARKS.md section 15's verdict; its runs are committed and ran from this script at commit
11e6ad3.

    MODEL=$(.venv/bin/python -m lze_examples.smollm2)     # the converted model folder (the package is the main venv's)
    .venv-vllm/bin/python benchmarks/smollm2_study/asynchronous.py ARM SEED --model_dir $MODEL

SmolLM2 ties its LM head to its input embedding, which vLLM's CPU backend keeps in a packed copy that a weight reload
leaves stale: the server serves the untied copy (`untied_for_serving`) under the trained model's name, and each sync
also writes the head (`ReloadWeightTransfer(tied_lm_head=...)`, `lze_trl/testing/vllm_reload.py`). One server per run,
started from the starting weights. A step trains one generation batch's worth of rows: GRPO 8 prompts x 8 rollouts
(64 rows), GRPO with half the group 8 x 4 (32); the weights are synced after every step. Each run writes
`benchmarks/results/smollm2_study/async/<arm>/seed_<k>.json` atomically when it has finished, and is skipped when that
file is there: the seconds of `train()`, the steady seconds a step (TRL's clock, the first steps left out), the
rollouts the server completed, the rows and groups handed to the trainer, and the final evaluations (test, OOD, the
train-side pass rates).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "support")]

ASYNC_ARMS: dict[str, dict[str, Any]] = {
    "grpo": {},
    "grpo_half": {"num_generations": 4},
}
"""The async arms: TRL's `AsyncGRPOTrainer`, with these settings on top of the study's shared ones."""
SKIP_STEPS = 2
"""Steps left out of the steady seconds a step (the server's and torch's warm-up)."""


def rows_per_step(arm: str, prompts: int, group: int) -> int:
    """Rows a step trains: every group's rollouts."""
    return prompts * ASYNC_ARMS[arm].get("num_generations", group)


def train_async(arm: str, seed: int, model_dir: str, base_url: str, tied_lm_head: str, data: dict, output_dir: str):
    """One run of `arm` against the server at `base_url`; its record."""
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from vllm_cpu import RAW_RESPONSE_TEMPLATE

    from benchmarks.asynchronous.run import CountingQueue, StepClock, served_requests, steady_rates
    from benchmarks.smollm2_study.run import PROTOCOL, environment, measure
    from lze_examples.tasks.word_problems import word_problem_reward
    from lze_trl.async_grpo.cpu import cpu_construction, use_cpu_tree_attention
    from lze_trl.testing.vllm_reload import ReloadWeightTransfer

    p, settings = PROTOCOL, dict(ASYNC_ARMS[arm])
    group = settings.pop("num_generations", p["num_generations"])
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE  # the whole completion is the answer's text
    train = data["train"]
    dataset = Dataset.from_dict({"prompt": list(train["prompt"]), "answer": list(train["answer"])})
    prompts = p["prompts_per_step"]
    rows = rows_per_step(arm, prompts, group)
    common = dict(
        output_dir=output_dir, use_cpu=True, report_to="none", save_strategy="no", logging_steps=1, seed=seed,
        max_steps=p["steps"], weight_sync_steps=1, num_generations=group,
        max_completion_length=p["max_completion_length"], temperature=p["temperature"],
        learning_rate=p["learning_rate"], per_device_train_batch_size=rows, token_budget=0,
        max_inflight_tasks=prompts * group, queue_maxsize=prompts * group, vllm_server_base_url=base_url,
    )  # fmt: skip
    transfer = ReloadWeightTransfer(base_url, os.path.join(output_dir, "weights"), tied_lm_head=tied_lm_head)
    kwargs = dict(train_dataset=dataset, processing_class=tokenizer, weight_transfer=transfer)
    with cpu_construction():
        trainer = AsyncGRPOTrainer(model_dir, word_problem_reward, args=AsyncGRPOConfig(**common), **kwargs)
    use_cpu_tree_attention()
    counted = trainer.rollout_queue = CountingQueue(trainer.rollout_queue)
    clock = StepClock(trainer, counted, base_url)
    trainer.add_callback(clock)
    served_before, load_before, start = served_requests(base_url), os.getloadavg()[0], time.monotonic()
    try:
        trainer.train()
    finally:
        trainer.rollout_worker.stop()
    train_s = time.monotonic() - start
    rollouts = served_requests(base_url) - served_before
    evaluated = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # plain attention, not TRL's tree
    evaluated.load_state_dict(trainer.model.state_dict())
    log = trainer.state.log_history

    def logged(key: str) -> list[float]:
        return [e[key] for e in log if key in e]

    return {
        "arm": arm, "seed": seed, "settings": ASYNC_ARMS[arm], "rows_per_step": rows, "load_before": load_before,
        "environment": environment(), "steps": trainer.state.global_step, "train_s": train_s,
        **steady_rates(clock.marks, SKIP_STEPS), "trl_step_s": logged("perf/step_s"),
        "rollout_wait_s": logged("perf/rollout_wait_s"), "weight_sync_s": logged("perf/weight_sync_s"),
        "rollouts_served": rollouts, "rows_handed": counted.rows, "groups_handed": len(counted.groups),
        "informative_groups_handed": len(counted.informative), "reward": float(np.mean(logged("reward") or [np.nan])),
        "evaluations": [{"step": trainer.state.global_step, **measure(evaluated, tokenizer, data, final=True)}],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arm", choices=list(ASYNC_ARMS))
    parser.add_argument("seed", type=int)
    parser.add_argument(
        "--model_dir", required=True, help="the converted SmolLM2 folder (python -m lze_examples.smollm2)"
    )
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "smollm2_study"))
    parser.add_argument("--steps", type=int, default=None, help="fewer steps than the protocol's: a smoke test")
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM
    from vllm_cpu import free_loopback_port, on_cpu, running_server, server_metadata_dir

    from benchmarks.smollm2_study.run import PROTOCOL, splits, write
    from lze_trl.testing.vllm_reload import untied_for_serving

    path = Path(args.results) / "async" / args.arm / f"seed_{args.seed}.json"
    if path.exists() and args.steps is None:
        print(f"{path} is there: skipped")
        return
    if args.steps is not None:
        PROTOCOL["steps"] = args.steps
        path = Path(tempfile.mkdtemp()) / path.name  # a smoke test's record stays out of the results
    torch.set_num_threads(1)  # the server, the worker's child and the trainer share the machine's 2 cores
    model_dir = str(Path(args.model_dir).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        served_dir = os.path.join(tmp, "untied")
        untied_for_serving(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), served_dir)
        for name in os.listdir(model_dir):  # the tokenizer and chat template files beside the weights
            if not name.endswith(".safetensors") and not os.path.exists(os.path.join(served_dir, name)):
                os.symlink(os.path.join(model_dir, name), os.path.join(served_dir, name))
        port = free_loopback_port()
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_CPU_KVCACHE_SPACE="1", OMP_NUM_THREADS="1")
        if on_cpu():
            env["PYTHONPATH"] = os.pathsep.join(
                [server_metadata_dir(os.path.join(tmp, "meta")), env.get("PYTHONPATH", "")]
            )
        vllm = os.path.join(os.path.dirname(sys.executable), "vllm")
        command = [vllm, "serve", served_dir, "--served-model-name", model_dir, "--host", "127.0.0.1"]
        command += ["--port", str(port), "--dtype", "float32", "--max-model-len", "512", "--enforce-eager"]
        # every prompt's prefill in one scheduler step: vLLM 0.31's CPU build fails a seeded request (TRL's worker
        # seeds each) whose prefill is chunked ("CPU Generator does not use offset"), as 64 chat prompts at once are
        command += ["--seed", str(args.seed), "--max-num-batched-tokens", "16384"]
        base_url = f"http://127.0.0.1:{port}"
        with running_server(command, env, os.path.join(tmp, "server.log"), base_url):
            result = train_async(args.arm, args.seed, model_dir, base_url, "model.embed_tokens.weight", splits(),
                                 os.path.join(tmp, "out"))  # fmt: skip
    write(path, result)


if __name__ == "__main__":
    main()
