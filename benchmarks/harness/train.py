"""The training benchmark: the demo's comparison once per seed (same warm start and data, another training seed),
aggregated over seeds into `bench_train.json` and `bench_train.md`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from lze_examples.demo import DemoConfig, run_comparison
from lze_examples.demo.comparison import machine_info, to_jsonable

from .markdown import bench_markdown
from .stats import aggregate


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
        result = run_comparison(cfg, output_dir / f"seed_{seed}", figures=False)
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
