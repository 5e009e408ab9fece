"""Benchmarks: the demo's runs over several seeds and any selectors; a micro-benchmark of the selection machinery."""

from __future__ import annotations

import copy
import json
import math
import re
import tempfile
import time
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..config import LZEGRPOConfig
from ..energy import EnergyScorer
from ..selection import select_top_k
from ..selectors import SELECTORS
from .runner import (
    RATIO_KEYS,
    DemoConfig,
    MethodSpec,
    format_table,
    machine_info,
    prepare,
    run_demo,
    run_method,
    to_jsonable,
)


# ----------------------------------------------------------------------------------------------- parsing
ALIASES: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "lze+prune": {"selector": "lze", "prune_solved": True},
    # Rollout-side selection: the rollout stage picks the learning zone, the update keeps every alive group of it.
    "lze+rollout": {"selector": "lze", "rollout_filter": "lze", "selection_ratio": 1.0},
    # GRESO-like baseline: skip probability from consecutive dead observations only, dead groups filtered (DAPO).
    "greso": {"selector": "dapo", "rollout_filter": "greso"},
}


def _field_defaults() -> dict[str, Any]:
    defaults = {}
    for f in fields(LZEGRPOConfig):
        if f.default is not MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def parse_value(key: str, text: str) -> Any:
    """
    Parses the value of an [`LZEGRPOConfig`] override `key=text` to the type of the field's default.

    Args:
        key (`str`):
            The field's name; a `ValueError` names the fix when it is not a field.
        text (`str`):
            Its value: JSON (`0.2`, `true`, `["anchor"]`), for list fields items joined by `+` or `,`
            (`uncertainty+momentum`), or, for string fields, plain text.
    """
    defaults = _field_defaults()
    if key not in {f.name for f in fields(LZEGRPOConfig)}:
        raise ValueError(f"{key!r} is not an LZEGRPOConfig field: see `LZEGRPOConfig` (TRL's GRPOConfig + LZE).")
    default = defaults.get(key)
    if isinstance(default, list) and not text.strip().startswith("["):
        # `energy_terms=uncertainty+momentum` (or with commas in `--set`): a list without JSON's quotes.
        return [item.strip() for item in re.split(r"[+,]", text) if item.strip()]
    lowered = text.strip().lower()
    if isinstance(default, bool) or lowered in ("true", "false"):
        if lowered not in ("true", "false", "1", "0"):
            raise ValueError(f"{key}={text!r}: use true or false.")
        return lowered in ("true", "1")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        return text
    return value


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`["selection_ratio=0.2", "prune_solved=true"]` -> `{"selection_ratio": 0.2, "prune_solved": True}`."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"Override {item!r} must look like key=value, e.g. selection_ratio=0.2.")
        key, text = item.split("=", 1)
        overrides[key.strip()] = parse_value(key.strip(), text)
    return overrides


def parse_method(spec: str) -> MethodSpec:
    """
    A run from its command-line spec: a registered selector's name (`lze`, `none`, `uniform`, ...), an alias (`grpo`
    for `none`, `lze+prune` for LZE with forward pruning), optionally followed by `:key=value,key=value` overrides
    of this run only (e.g. `lze:selection_ratio=0.2`, `lze:energy_terms=uncertainty+momentum`). The spec is the run's
    label.
    """
    name, _, rest = spec.partition(":")
    if name in ALIASES:
        overrides = dict(ALIASES[name])
    elif name in SELECTORS:
        overrides = {"selector": name}
    else:
        raise ValueError(
            f"Unknown selector {name!r}: use one of {sorted(SELECTORS)} or an alias {sorted(ALIASES)}, optionally "
            "followed by :key=value,... overrides."
        )
    if rest:
        overrides.update(parse_overrides(rest.split(",")))
    return MethodSpec(spec, overrides)


# ----------------------------------------------------------------------------------------------- training bench
def _stats(values: list[float | None]) -> dict[str, Any]:
    present = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not present:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0, "values": values}
    arr = np.asarray(present)
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0,
        "min": float(arr.min()),
        "max": float(arr.max()),
        "n": len(arr),
        "values": values,
    }


SUMMARY_KEYS = (
    "start_test_accuracy",
    "final_test_accuracy",
    "final_ood_accuracy",
    "start_train_accuracy",
    "final_train_accuracy",
    "best_train_accuracy",
    "train_seconds",
    "train_cpu_seconds",
    "seconds_per_step",
    "rollout_seconds",
    "update_seconds",
    "rollout_tokens",
    "update_tokens",
    "update_tokens_per_step",
    "update_flops",
    "total_flops",
    "reach_test_seconds",
    "reach_test_flops",
    "reach_test_rollout_tokens",
    "reach_train_seconds",
    "reach_train_flops",
    "reach_train_step",
    "reach90_train_seconds",
    "reach90_train_flops",
    "reach90_train_step",
    "selection_share_of_step",
    "utilisation",
    "dead_share",
    "dead_share_last_quarter",
)


def aggregate(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample standard deviation, min and max of every summary figure and ratio, per method, over seeds."""
    methods = list(per_seed[0]["methods"])
    out: dict[str, Any] = {}
    for name in methods:
        rows = [r["methods"][name] for r in per_seed]
        out[name] = {
            "summary": {k: _stats([row["summary"].get(k) for row in rows]) for k in SUMMARY_KEYS},
            "ratios": {k: _stats([row["ratios"].get(k) for row in rows]) for k in RATIO_KEYS},
            "target_met": [r["target"].get(name, {}).get("met") for r in per_seed],
            "target_train_prompts_met": [r.get("target_train_prompts", {}).get(name, {}).get("met") for r in per_seed],
        }
    return out


def _cell(stat: dict[str, Any], kind: str) -> str:
    if stat["mean"] is None:
        return "n/a"
    mean, std = stat["mean"], stat["std"]
    # Figures that some seeds never reached: mean over the seeds that did, with how many those are.
    missing = "" if stat["n"] == len(stat["values"]) else f" [{stat['n']}/{len(stat['values'])} seeds]"
    if kind == "acc":
        return f"{mean:.3f} ± {std:.3f}{missing}"
    if kind == "s":
        return f"{mean:.1f} ± {std:.1f} s{missing}"
    if kind == "ratio":
        return f"{mean:.2f} ± {std:.2f}x{missing}"
    if kind == "pct":
        return f"{100 * mean:.2f} ± {100 * std:.2f}%{missing}"
    return f"{mean:.3g} ± {std:.2g}{missing}"


BENCH_ROWS = (
    ("in-domain test acc, start", "start_test_accuracy", "acc"),
    ("in-domain test acc, final", "final_test_accuracy", "acc"),
    ("OOD acc, final", "final_ood_accuracy", "acc"),
    ("train-prompt acc, start", "start_train_accuracy", "acc"),
    ("train-prompt acc, final", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", ""),
    ("update tokens / step", "update_tokens_per_step", ""),
    ("update FLOPs", "update_flops", ""),
    ("total FLOPs", "total_flops", ""),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", ""),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", ""),
    ("selection share of step", "selection_share_of_step", "pct"),
    ("rollout tokens to target test acc", "reach_test_rollout_tokens", ""),
    ("FLOPs to target test acc", "reach_test_flops", ""),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("utilisation (update / generated completion tokens)", "utilisation", "pct"),
    ("dead groups, whole run", "dead_share", "pct"),
    ("dead groups, last quarter", "dead_share_last_quarter", "pct"),
)


def bench_markdown(results: dict[str, Any]) -> str:
    """The training benchmark as Markdown: one column per method (mean ± std over seeds), then the ratios."""
    agg = results["aggregate"]
    names = list(agg)
    base = results["baseline"]
    lines = [
        f"Seeds: {results['seeds']}; {results['config']['steps']} steps x {results['config']['prompts_per_step']} "
        f"prompts x {results['config']['num_generations']} rollouts; baseline `{base}`; mean ± sample std over seeds.",
        "",
        "| metric | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, key, kind in BENCH_ROWS:
        lines.append(f"| {label} | " + " | ".join(_cell(agg[n]["summary"][key], kind) for n in names) + " |")
    others = [n for n in names if n != base]
    if others:
        lines += ["", f"Ratios to `{base}` (per seed, then mean ± std):", ""]
        lines += [
            "| ratio | " + " | ".join(f"`{n}` / `{base}`" for n in others) + " |",
            "|---|" + "---|" * len(others),
        ]
        for key in RATIO_KEYS:
            lines.append(f"| {key} | " + " | ".join(_cell(agg[n]["ratios"][key], "ratio") for n in others) + " |")
        lines += [
            "",
            "Target met on the in-domain test split (per seed): "
            + "; ".join(f"`{n}`: {agg[n]['target_met']}" for n in others),
            "",
            "Same checks on the training prompts (per seed): "
            + "; ".join(f"`{n}`: {agg[n]['target_train_prompts_met']}" for n in others),
        ]
    load = [r["machine"]["start"]["load_average"] for r in results["runs"]]
    lines += [
        "",
        f"Machine: {results['machine']['platform']}, {results['machine']['cpu_count']} CPUs, "
        f"torch {results['machine']['torch']}, {results['config']['torch_threads']} thread(s); "
        f"load average (1/5/15 min) at the start of each seed: {load}.",
    ]
    return "\n".join(lines) + "\n"


def run_train_bench(config: DemoConfig, seeds: list[int], output_dir: str | Path) -> dict[str, Any]:
    """
    Runs the comparison of `config` once per seed (same warm start and data, different training seed) and writes
    `bench_train.json` and `bench_train.md` into `output_dir` (each seed's full results under `seed_<k>/`).

    Args:
        config ([`DemoConfig`]):
            The comparison (methods, steps, baseline, overrides).
        seeds (`list[int]`):
            Training seeds.
        output_dir (`str` or `Path`):
            Where the files go.

    Returns:
        `dict[str, Any]`: per-seed results (without curves) and the aggregate.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in seeds:
        cfg = copy.deepcopy(config)
        cfg.seed = seed
        result = run_demo(cfg, output_dir / f"seed_{seed}", figures=False)
        runs.append(result)
    results = {
        "config": runs[0]["config"],
        "seeds": list(seeds),
        "baseline": config.baseline,
        "machine": machine_info(),
        "flop_model": runs[0]["flop_model"],
        "runs": [
            {
                "seed": seed,
                "machine": r["machine"],
                "total_seconds": r["total_seconds"],
                "target": r["target"],
                "target_train_prompts": r["target_train_prompts"],
                "methods": {n: {"summary": m["summary"], "ratios": m["ratios"]} for n, m in r["methods"].items()},
            }
            for seed, r in zip(seeds, runs)
        ],
    }
    results["aggregate"] = aggregate(results["runs"])
    results = to_jsonable(results)
    with open(output_dir / "bench_train.json", "w") as f:
        json.dump(results, f, indent=2)
    with open(output_dir / "bench_train.md", "w") as f:
        f.write(bench_markdown(results))
    return results


# ----------------------------------------------------------------------------------------------- selection bench
def _observe_pool(scorer: EnergyScorer, ids: np.ndarray, num_generations: int, rng: np.random.Generator) -> float:
    start = time.perf_counter()
    for lo in range(0, len(ids), 65536):
        chunk = ids[lo : lo + 65536]
        scorer.score(chunk, rng.integers(0, num_generations + 1, len(chunk)) / num_generations)
    return time.perf_counter() - start


def bench_selection(
    pool_sizes: list[int],
    groups: int = 512,
    repeats: int = 50,
    num_generations: int = 8,
    ratio: float = 0.4,
    min_ratio: float = 0.3,
    noise: float = 0.05,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """
    Times [`EnergyScorer.score`] + [`select_top_k`] (and the selection bookkeeping) per generation batch.

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
        ratio, min_ratio, noise (`float`, *optional*):
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
        scorer = EnergyScorer()
        observe_seconds = _observe_pool(scorer, ids, num_generations, rng)
        score_select, full = [], []
        for _ in range(repeats):
            batch = ids[rng.choice(size, size=min(groups, size), replace=False)]
            pass_rates = rng.integers(0, num_generations + 1, len(batch)) / num_generations
            t0 = time.perf_counter()
            energies = scorer.score(batch, pass_rates)
            mask = select_top_k(energies, ratio, min_ratio, noise, rng)
            t1 = time.perf_counter()
            scorer.record_selection(batch, mask)
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
                "nbytes": scorer.nbytes(),
                "bytes_per_prompt": scorer.nbytes() / size,
                "capacity": int(len(scorer.num_observations)),
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


def selection_markdown(results: dict[str, Any]) -> str:
    """The selection micro-benchmark as Markdown."""
    step = results.get("step")
    lines = [
        f"Generation batch of {results['groups']} prompt groups drawn from a pool observed once; "
        f"{results['repeats']} batches per pool; times in ms (median / p90).",
        "",
        "| pool | score + select_top_k | + record_selection | state bytes / prompt | state MB |"
        + (" vs one demo step |" if step else ""),
        "|---:|---:|---:|---:|---:|" + ("---:|" if step else ""),
    ]
    for row in results["pools"]:
        ss, full = row["score_select_ms"], row["with_record_selection_ms"]
        cells = [
            f"{row['pool_size']:,}",
            f"{ss['median']:.3f} / {ss['p90']:.3f}",
            f"{full['median']:.3f} / {full['p90']:.3f}",
            f"{row['bytes_per_prompt']:.1f}",
            f"{row['nbytes'] / 1e6:.1f}",
        ]
        if step:
            cells.append(f"{100 * full['median'] / 1e3 / step['seconds_per_step']:.2f}%")
        lines.append("| " + " | ".join(cells) + " |")
    if step:
        lines += [
            "",
            f"Demo training step (LZE, {step['groups_per_step']} groups x {step['num_generations']} rollouts): "
            f"{1e3 * step['seconds_per_step']:.1f} ms; selection measured inside those steps: "
            f"{1e3 * step['selection_seconds_per_step']:.3f} ms ({100 * step['selection_share']:.2f}% of the step). "
            f"'vs one demo step' divides a {results['groups']}-group batch's selection by that "
            f"{step['groups_per_step']}-group step, so it overstates the share in a step that really generates "
            f"{results['groups']} groups.",
        ]
    m = results["machine"]
    lines += ["", f"Machine: {m['platform']}, {m['cpu_count']} CPUs, load average at start {m['load_average']}."]
    return "\n".join(lines) + "\n"


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


__all__ = [
    "aggregate",
    "bench_markdown",
    "bench_selection",
    "format_table",
    "measure_step",
    "parse_method",
    "parse_overrides",
    "run_selection_bench",
    "run_train_bench",
    "selection_markdown",
]
