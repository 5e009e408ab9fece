"""LZE on TRL's async trainer against `vllm serve` (vLLM's CPU build), on the embedded carries task: async GRPO (TRL's
`AsyncGRPOTrainer` and its worker, unchanged), async LZE (unselected groups dropped before the trainer's queue), the
same LZE with the unselected groups masked in the loss instead (zero advantages: PR #7242's form). BENCHMARKS.md
section 9, whose fourth arm, async LZE with the probe (`probe`: `generation_rounds=[2, 8]`, `selection_ratio=0.33`, 5
groups a step), left the library with section 15's verdict: its runs are committed and ran from this script at commit
11e6ad3.

    .venv-vllm/bin/python -m benchmarks.asynchronous.run --arms grpo lze lze_mask --seeds 0 1 2 --steps 60 \
        --output benchmarks/results/asynchronous

One `vllm serve` of the shipped carries warm start (untied embeddings, float32, a chat template that renders the prompt
as the warm start was trained on it) serves every run; each run's trainer syncs its weights into it at the start
(TRL's cold sync) and after every optimizer step (`ReloadWeightTransfer`). Every run starts from the warm start and
trains `--steps` optimizer steps; one generation batch is `--window_groups` (16) prompts of `num_generations=8`
rollouts, and a step of each arm consumes one generation batch's worth of generated groups when its selector keeps its
quota: GRPO trains all 16 groups (128 rows), LZE the top 40% (6 groups, 48 rows per step), the masked LZE all 128 rows
of which 6 groups carry advantages, all in one micro-batch. Per run
(`runs/<arm>_s<seed>.json`): wall-clock of `train()`, TRL's `perf/step_s` and `perf/rollout_wait_s`, rollouts the
server completed (its `vllm:request_success_total`), rows and groups the trainer was handed (and those with a non-zero
advantage: informative), trained tokens (`batch/trained_tokens_per_step`), and greedy accuracy on the test and OOD
splits before and after. `report.py` tabulates them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import requests
from transformers import TrainerCallback


ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "support")]

ARMS = ("grpo", "lze", "lze_mask")
G = 8


def served_requests(base_url: str) -> float:
    """Requests the server finished (its Prometheus counter `vllm:request_success_total`, every finish reason)."""
    text = requests.get(f"{base_url}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


class CountingQueue:
    """The queue the trainer's dataset reads, counting the rows, groups and informative groups it hands out."""

    def __init__(self, queue: Any) -> None:
        self.queue, self.rows, self.groups, self.informative = queue, 0, set(), set()

    def get(self, *args: Any, **kwargs: Any) -> Any:
        row = self.queue.get(*args, **kwargs)
        self.rows += 1
        self.groups.add(row.group_id)
        if row.advantage != 0:
            self.informative.add(row.group_id)
        return row

    def qsize(self) -> int:
        return self.queue.qsize()


class StepClock(TrainerCallback):
    """A trainer callback marking, at each optimizer step's end, the time, the groups trained (TRL's count), the
    rows and informative groups handed to the trainer, and the rollouts the server completed."""

    def __init__(self, trainer: Any, counted: CountingQueue, base_url: str) -> None:
        self.trainer, self.counted, self.base_url, self.marks = trainer, counted, base_url, []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        groups, counted = len(self.trainer._trained_groups), self.counted
        rollouts = served_requests(self.base_url)
        self.marks.append((time.monotonic(), groups, counted.rows, len(counted.informative), rollouts))


def steady_rates(marks: list[tuple], skip: int) -> dict[str, float]:
    """Rates between the end of step `skip` and the last step's end (the first steps warm vLLM and torch up)."""
    (t0, g0, r0, i0, n0), (t1, g1, r1, i1, n1) = marks[skip - 1], marks[-1]
    seconds = t1 - t0
    return {
        "steady_steps": len(marks) - skip, "steady_s": seconds, "step_s": seconds / (len(marks) - skip),
        "groups_trained_per_s": (g1 - g0) / seconds, "informative_groups_per_s": (i1 - i0) / seconds,
        "rows_per_s": (r1 - r0) / seconds, "rollouts_per_step": (n1 - n0) / (len(marks) - skip),
        "rollouts_per_informative_group": (n1 - n0) / max(i1 - i0, 1),
    }  # fmt: skip


def masking(window: Any) -> None:
    """Makes an LZE window hand on its unselected complete groups too, every advantage 0 (masked in the loss)."""
    import dataclasses

    close = window.close

    def close_and_mask(batch: Any) -> Any:
        weights = close(batch)
        if not (weights > 0).any():  # the window handed every complete group on at zero advantage already
            return weights
        for g, weight in enumerate(weights):
            if weight == 0 and batch.state.going_on[g]:
                window.ready.extend(dataclasses.replace(s, advantage=0.0) for s in batch.rows[g])
        return weights

    window.close = close_and_mask


def train_arm(arm: str, seed: int, steps: int, window_groups: int, base_url: str, model_dir: str, splits: dict,
              output_dir: str, skip: int = 3) -> dict[str, Any]:  # fmt: skip
    """One run: trains `arm` for `steps` optimizer steps from the served model; returns its measurements."""
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from vllm_cpu import RAW_RESPONSE_TEMPLATE

    from lze_examples.demo.accuracy import greedy_accuracy
    from lze_examples.tasks.shared import arithmetic_reward  # grades the last message's text; TRL's worker pickles it
    from lze_trl.async_grpo.cpu import cpu_construction, use_cpu_tree_attention
    from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
    from lze_trl.testing.vllm_reload import ReloadWeightTransfer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE
    train = splits["train"]
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in train["prompt"]],
                                 "answer": list(train["answer"])})  # fmt: skip
    lze = {"lze": dict(selection_ratio=0.4), "lze_mask": dict(selection_ratio=0.4)}
    rows = {"grpo": window_groups, "lze_mask": window_groups}.get(arm) or int(
        window_groups * lze[arm]["selection_ratio"]
    )
    common = dict(
        output_dir=output_dir, use_cpu=True, report_to="none", save_strategy="no", logging_steps=1, seed=seed,
        max_steps=steps, weight_sync_steps=1, num_generations=G, max_completion_length=8, temperature=1.0,
        learning_rate=1e-4, warmup_steps=5, per_device_train_batch_size=rows * G, token_budget=0,
        max_inflight_tasks=2 * window_groups * G, queue_maxsize=window_groups * G, vllm_server_base_url=base_url,
    )  # fmt: skip
    transfer = ReloadWeightTransfer(base_url, weights_dir=os.path.join(output_dir, "weights"))
    with cpu_construction():
        if arm == "grpo":
            args = AsyncGRPOConfig(**common)
            trainer = AsyncGRPOTrainer(model_dir, arithmetic_reward, args=args, train_dataset=dataset,
                                       processing_class=tokenizer, weight_transfer=transfer)  # fmt: skip
        else:
            args = LZEAsyncGRPOConfig(**common, **lze[arm], window_groups=window_groups)
            trainer = LZEAsyncGRPOTrainer(model_dir, arithmetic_reward, args=args, train_dataset=dataset,
                                          processing_class=tokenizer, weight_transfer=transfer)  # fmt: skip
            if arm == "lze_mask":
                masking(trainer.lze_window)
    use_cpu_tree_attention()
    counted = trainer.rollout_queue = CountingQueue(trainer.rollout_queue)
    clock = StepClock(trainer, counted, base_url)
    trainer.add_callback(clock)
    evaluated = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # plain attention, not TRL's tree
    before = {name: greedy_accuracy(evaluated, tokenizer, splits[name])["accuracy"] for name in ("test", "ood")}
    served = served_requests(base_url)
    start = time.monotonic()
    try:
        trainer.train()
    finally:
        trainer.rollout_worker.stop()
    train_s = time.monotonic() - start
    rollouts = served_requests(base_url) - served
    evaluated.load_state_dict(trainer.model.state_dict())
    after = {name: greedy_accuracy(evaluated, tokenizer, splits[name])["accuracy"] for name in ("test", "ood")}
    log = trainer.state.log_history

    def logged(key: str) -> list[float]:
        return [e[key] for e in log if key in e]

    lze_metrics = {key: logged(key) for key in ("lze/generated_rollouts", "lze/selected_frac", "lze/update_rows")}
    return {
        "arm": arm, "seed": seed, "steps": trainer.state.global_step, "window_groups": window_groups,
        **steady_rates(clock.marks, skip), "train_s": train_s, "trl_step_s": logged("perf/step_s"),
        "rollout_wait_s": logged("perf/rollout_wait_s"),
        "weight_sync_s": logged("perf/weight_sync_s"), "trained_tokens": logged("batch/trained_tokens_per_step"),
        "rollouts_served": rollouts, "rows_handed": counted.rows, "groups_handed": len(counted.groups),
        "informative_groups_handed": len(counted.informative), "groups_trained": len(trainer._trained_groups),
        "accuracy_before": before, "accuracy_after": after,
        "lze": {k: v for k, v in lze_metrics.items() if v}, "reward": float(np.mean(logged("reward") or [np.nan])),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--window_groups", type=int, default=16)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "asynchronous"))
    args = parser.parse_args()
    import tempfile

    import torch
    from vllm_cpu import free_loopback_port, on_cpu, running_server, save_warm_start, server_metadata_dir

    from lze_examples.demo.config import DemoConfig
    from lze_examples.tasks import get_task

    out = Path(args.output)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        save_warm_start(model_dir)  # untied, the raw-prompt chat template
        config = DemoConfig(progress=False)  # the demo's carries splits and torch threads (1: the server and the
        torch.set_num_threads(config.torch_threads)  # worker child share the 2 cores with the trainer)
        splits = get_task("carries").make_splits(config.n_train, config.n_test, config.resolved_n_ood(), seed=0)
        port = free_loopback_port()
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_CPU_KVCACHE_SPACE="1")
        if on_cpu():
            env["PYTHONPATH"] = os.pathsep.join([server_metadata_dir(Path(tmp) / "meta"), env.get("PYTHONPATH", "")])
        vllm = os.path.join(os.path.dirname(sys.executable), "vllm")
        command = [vllm, "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
        command += ["--max-model-len", "64", "--enforce-eager", "--seed", "0"]
        base_url = f"http://127.0.0.1:{port}"
        with running_server(command, env, Path(tmp) / "server.log", base_url):
            for seed in args.seeds:  # each seed runs every arm, in the order given: a drift touches every arm alike
                for arm in args.arms:
                    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                    result = train_arm(arm, seed, args.steps, args.window_groups, base_url, str(model_dir), splits,
                                       str(Path(tmp) / f"{arm}_{seed}"))  # fmt: skip
                    result["started"] = started
                    (out / "runs" / f"{arm}_s{seed}.json").write_text(json.dumps(result, indent=1))
                    print(
                        f"{arm} seed {seed}: {result['train_s']:.0f} s, accuracy {result['accuracy_after']}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
