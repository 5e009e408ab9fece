"""The selection micro-benchmark: `LZERun.score` + `LZERun.select` (and the selection bookkeeping) per generation
batch on prompt pools of growing size, their state memory per prompt, and their share of a real demo training step."""

from __future__ import annotations

import copy
import json
import tempfile
import time
from dataclasses import MISSING, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from lze_examples.demo import DemoConfig, MethodSpec, run_method
from lze_examples.demo.comparison import machine_info, to_jsonable
from lze_examples.demo.training import prepare
from lze_trl.grpo.config import LZE_FIELDS, LZEGRPOConfig
from lze_trl.method.prompt_state import COLUMNS, PromptState
from lze_trl.method.run import LZERun

from .markdown import selection_markdown


def nbytes(state: PromptState) -> int:
    """Bytes held by the per-prompt table: its arrays, and its index counted twice (the ids and pandas' hash table)."""
    return sum(getattr(state, name).nbytes for name in COLUMNS) + 2 * state.index.to_numpy().nbytes


def _rewards(pass_rates: np.ndarray, num_generations: int) -> np.ndarray:
    """Binary rewards of groups with the given pass rates."""
    return (np.arange(num_generations)[None, :] < np.round(pass_rates * num_generations)[:, None]).astype(float)


def _observe_pool(run: LZERun, ids: np.ndarray, num_generations: int, rng: np.random.Generator) -> float:
    start = time.perf_counter()
    for lo in range(0, len(ids), 65536):
        chunk = ids[lo : lo + 65536]
        rewards = _rewards(rng.integers(0, num_generations + 1, len(chunk)) / num_generations, num_generations)
        run.score(chunk, rewards, rewards)
    return time.perf_counter() - start


LZE_DEFAULTS = {
    f.name: f.default_factory() if f.default is MISSING else f.default
    for f in fields(LZEGRPOConfig)
    if f.name in LZE_FIELDS
}
LZE_DEFAULTS["selection_log_max_rows"] = 0  # the log is timed by the trainer's runs, not here


def bench_selection(
    pool_sizes: list[int],
    groups: int = 512,
    repeats: int = 50,
    num_generations: int = 8,
    ratio: float = 0.4,
    noise: float = 0.05,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """
    Times [`LZERun.score`] + [`LZERun.select`] (and the selection bookkeeping, [`LZERun.record`]) per generation
    batch.

    For each pool size, a scorer first observes every prompt of the pool once (random 63-bit prompt ids, as content
    hashes are; random pass rates in multiples of `1 / num_generations`), then `repeats` generation batches of
    `groups` prompts drawn from the pool are scored and selected.

    Args:
        pool_sizes (`list[int]`):
            Prompt pool sizes, e.g. `[1_000, 100_000, 1_000_000]`.
        groups (`int`, *optional*, defaults to `512`):
            Prompt groups per generation batch.
        repeats (`int`, *optional*, defaults to `50`):
            Timed generation batches per pool.
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per prompt (granularity of the pass rates).
        ratio, noise (`float`, *optional*):
            Selection settings (the release's defaults).
        seed (`int`, *optional*, defaults to `0`):
            Seed of the ids, the pass rates and the noise.

    Returns:
        `list[dict]`: one row per pool size with per-batch times in milliseconds (`median`, `p90`, `mean` of score +
        select; the same with `record_selection`), the observe pass time, `nbytes` and `bytes_per_prompt`.
    """
    rows = []
    for size in pool_sizes:
        rng = np.random.default_rng([seed, size])
        ids = np.unique(rng.integers(0, 2**63 - 1, size=size + size // 100 + 16, dtype=np.int64))[:size]
        rng.shuffle(ids)
        args = SimpleNamespace(**{**LZE_DEFAULTS, "selection_ratio": ratio})
        args.selection_noise, args.seed = noise, seed
        run = LZERun(args, num_generations, dataset_keys=None)
        state = run.prompts
        observe_seconds = _observe_pool(run, ids, num_generations, rng)
        score_select, full = [], []
        for _ in range(repeats):
            batch = ids[rng.choice(size, size=min(groups, size), replace=False)]
            rewards = _rewards(rng.integers(0, num_generations + 1, len(batch)) / num_generations, num_generations)
            t0 = time.perf_counter()
            scored = run.score(batch, rewards, rewards)
            weights = run.select(scored)
            t1 = time.perf_counter()
            run.record(scored, weights, global_step=0)
            t2 = time.perf_counter()
            score_select.append(1e3 * (t1 - t0))
            full.append(1e3 * (t2 - t0))
        rows.append(
            {
                "pool_size": size,
                "groups": min(groups, size),
                "repeats": repeats,
                "score_select_ms": {
                    "median": float(np.median(score_select)),
                    "p90": float(np.percentile(score_select, 90)),
                    "mean": float(np.mean(score_select)),
                },
                "with_record_selection_ms": {
                    "median": float(np.median(full)),
                    "p90": float(np.percentile(full, 90)),
                    "mean": float(np.mean(full)),
                },
                "observe_pool_seconds": observe_seconds,
                "nbytes": nbytes(state),
                "bytes_per_prompt": nbytes(state) / size,
                "capacity": int(len(state.num_observations)),
            }
        )
    return rows


def measure_step(config: DemoConfig, steps: int = 10) -> dict[str, Any]:
    """
    Times real demo training steps of LZE (the demo's model, batch and settings) and the selection inside them.

    Args:
        config ([`DemoConfig`]):
            The demo's settings (its `steps`, `methods` and evaluation are replaced here).
        steps (`int`, *optional*, defaults to `10`):
            Steps to time.

    Returns:
        `dict[str, Any]`: `seconds_per_step` (wall-clock, evaluation excluded), `selection_seconds_per_step`,
        `selection_share` (measured inside the run), and the run's batch shape.
    """
    cfg = copy.deepcopy(config)
    cfg.steps, cfg.eval_steps, cfg.progress = steps, steps, False
    cfg.n_test = cfg.n_ood = cfg.n_train_eval = 8
    model, tokenizer, splits, _ = prepare(cfg)
    with tempfile.TemporaryDirectory() as folder:
        run = run_method(cfg, MethodSpec("lze", {"selector": "lze"}), model, tokenizer, splits, folder)
    totals = run["totals"]
    n = max(totals["optimizer_steps"], 1)
    return {
        "steps": n,
        "groups_per_step": cfg.prompts_per_step,
        "num_generations": cfg.num_generations,
        "seconds_per_step": totals["train_seconds"] / n,
        "rollout_seconds_per_step": totals["rollout_seconds"] / n,
        "selection_seconds_per_step": totals["selection_seconds"] / n,
        "selection_share": totals["selection_seconds"] / max(totals["step_seconds"], 1e-12),
    }


def run_selection_bench(
    pool_sizes: list[int],
    output_dir: str | Path,
    groups: int = 512,
    repeats: int = 50,
    step_config: DemoConfig | None = None,
    step_steps: int = 10,
) -> dict[str, Any]:
    """
    Runs [`bench_selection`] (and, with `step_config`, [`measure_step`]) and writes `bench_selection.json` and
    `bench_selection.md` into `output_dir`.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine_info(), "groups": groups, "repeats": repeats}
    results["pools"] = bench_selection(pool_sizes, groups=groups, repeats=repeats)
    if step_config is not None:
        results["step"] = measure_step(step_config, step_steps)
    results = to_jsonable(results)
    with open(output_dir / "bench_selection.json", "w") as f:
        json.dump(results, f, indent=2)
    with open(output_dir / "bench_selection.md", "w") as f:
        f.write(selection_markdown(results))
    return results
