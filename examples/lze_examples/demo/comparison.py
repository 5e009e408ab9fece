"""Side-by-side training runs on an embedded task: plain GRPO, LZE and LZE with forward pruning by default.

Every method starts from the same cached warm start, with the same seed, data, generation batch and number of
optimizer steps (so the same rollout budget, except where forward pruning or rollout-side selection skips rollouts),
and is evaluated by greedy decoding at the same steps. [`run_comparison`] writes `demo_results.json`: `lze-trl demo`
runs it once, the benchmarks of the repository's `benchmarks/` folder once per seed.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .accounting import GENERATION_FLOPS_PER_TOKEN, UPDATE_FLOPS_PER_TOKEN, count_parameters
from .config import DemoConfig
from .summary import _prompt_state, headline_summary, ratios, summarize
from .training import prepare, run_method, start_state


def machine_info() -> dict[str, Any]:
    """The machine and software a measurement ran on, and the load at the time."""
    import transformers
    import trl

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }
    try:
        info["load_average"] = list(os.getloadavg())
    except OSError:  # not available on every platform
        info["load_average"] = None
    return info


def to_jsonable(obj: Any) -> Any:
    """Converts numpy scalars/arrays and nested containers to plain JSON types (NaN becomes `None`)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return obj


def run_comparison(config: DemoConfig, output_dir: str | os.PathLike, figures: bool = True) -> dict[str, Any]:
    """
    Runs every method of `config` side by side and writes `demo_results.json` (and the PNG figures) into
    `output_dir`.

    Args:
        config ([`DemoConfig`]):
            The comparison.
        output_dir (`str` or `os.PathLike`):
            Where the results, figures and each run's prompt table / selection log go.
        figures (`bool`, *optional*, defaults to `True`):
            Also write the PNG figures.

    Returns:
        `dict[str, Any]`: the JSON-serialisable results (also written to `demo_results.json`).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    names = [m.name for m in config.methods]
    if config.baseline not in names:
        raise ValueError(f"baseline={config.baseline!r} is not among the methods {names}.")
    if len(set(names)) != len(names):
        raise ValueError(f"Method names must be unique, got {names}.")
    wall_start = time.perf_counter()
    machine_start = machine_info()
    model, tokenizer, splits, warm_meta = prepare(config)
    warm_meta = {k: v for k, v in warm_meta.items() if k != "config"}
    start = start_state(config, model, tokenizer, splits)

    runs: dict[str, dict[str, Any]] = {}
    # The baseline first, so that the targets exist when the others are summarised.
    ordered = sorted(config.methods, key=lambda m: m.name != config.baseline)
    for method in ordered:
        run_dir = output_dir / "runs" / method.name.replace("/", "_")
        runs[method.name] = run_method(config, method, model, tokenizer, splits, str(run_dir))

    baseline = runs[config.baseline]
    methods: dict[str, Any] = {}
    base_summary = summarize(baseline, baseline, config.target_window)
    for method in config.methods:
        run = runs[method.name]
        summary = base_summary if method.name == config.baseline else summarize(run, baseline, config.target_window)
        methods[method.name] = {
            "overrides": run["overrides"],
            "summary": summary,
            "ratios": ratios(summary, base_summary),
            "curve": run["curve"],
            "steps": run["steps"],
            "warnings": run["warnings"],
            "final_prompt_state": _prompt_state(run["prompt_table"]),
            "final_accuracy_by_level": run["final_accuracy_by_level"],
        }
    results: dict[str, Any] = {
        "config": config.to_dict(),
        "flop_model": {
            "N": "all parameters (tied embedding/LM head counted once)",
            "num_params": baseline["num_params"],
            "num_params_non_embedding": count_parameters(model, non_embedding=True),
            "generation_flops_per_token": f"{GENERATION_FLOPS_PER_TOKEN}N (prompt + completion tokens, every rollout)",
            "update_flops_per_token": f"{UPDATE_FLOPS_PER_TOKEN}N (prompt + completion tokens of every updated row)",
            "rollout_tokens": "completion tokens generated (prompt tokens: rollout_prompt_tokens)",
            "update_tokens": "loss (completion) tokens of the updated rows, as the trainer's lze/update_tokens "
            "(prompt + completion: update_processed_tokens)",
        },
        "warm_start": warm_meta,
        "start": start,
        "baseline": config.baseline,
        "methods": methods,
        "machine": {"start": machine_start, "end": machine_info()},
    }
    # The target is on the in-domain held-out test split; the same checks on the training prompts say whether
    # the method learns what it is trained on as fast (the figure that moves at this scale, see BENCHMARKS.md).
    results["summary"] = headline_summary(results)
    results["total_seconds"] = time.perf_counter() - wall_start
    results = to_jsonable(results)
    with open(output_dir / "demo_results.json", "w") as f:
        json.dump(results, f, indent=2)
    if figures:
        from .plots import plot_all

        results["figures"] = plot_all(results, runs, output_dir)
        with open(output_dir / "demo_results.json", "w") as f:
            json.dump(results, f, indent=2)
    return results
