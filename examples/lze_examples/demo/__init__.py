r"""The one-command CPU demo (`lze-trl demo`): plain GRPO, LZE and LZE with forward pruning, trained side by side
on an embedded task from the same warm start, and compared.

Every run starts from the same supervised warm start of a tiny Qwen2 (shipped for the default task), trains with
[`~lze_trl.LZEGRPOTrainer`] (metered for tokens, FLOPs and time) and is evaluated by greedy decoding every few steps;
the runs are then compared with the baseline (accuracies, costs, time and FLOPs to the baseline's final accuracy).
[`run_demo`] writes `demo_results.json` (with its machine-readable `summary`) and the PNG figures.

The modules, each depending only on those above it:

- `warmstart`: the cached, deterministic warm start ([`WarmStartConfig`], [`load_warm_start`]) and its shipped
  weights (`weights/`).
- `config`: the settings of a comparison ([`DemoConfig`]) and of its runs ([`MethodSpec`]); [`lze_config`].
- `accuracy`: greedy accuracy and sampled pass rates, the accuracy-recording callback.
- `accounting`: tokens, FLOPs and time of a run ([`MeteredLZEGRPOTrainer`]).
- `training`: the warm start and splits, the starting policy, one method trained ([`run_method`]).
- `summary`: one run's figures against the baseline, ratios, the target verdict, the headline summary.
- `tables`: the printed tables (comparison, headline, histogram).
- `plots`: the PNG figures.
- `comparison`: the methods side by side, written to `demo_results.json` ([`run_comparison`]).

The multi-seed benchmarks and the selector sweep built on it live outside the package, in the repository's
`benchmarks/` folder.
"""

from __future__ import annotations

import os
from typing import Any

from .accounting import MeteredLZEGRPOTrainer, RunMeter, count_parameters
from .accuracy import AccuracyCallback, greedy_accuracy, pass_rate_histogram, sampled_pass_rates
from .comparison import run_comparison
from .config import DemoConfig, MethodSpec, default_methods, default_warm_start, lze_config
from .training import run_method
from .warmstart import WarmStartConfig, default_cache_dir, load_warm_start, train_warm_start


def run_demo(
    config: DemoConfig | None = None, output_dir: str | os.PathLike = "outputs/demo", figures: bool = True
) -> dict[str, Any]:
    """
    Runs the demo's comparison (every method of `config` side by side) and writes `demo_results.json` (and the PNG
    figures) into `output_dir`: what `lze-trl demo` runs before printing its tables.

    Args:
        config ([`DemoConfig`], *optional*):
            The comparison; defaults to `DemoConfig()` (plain GRPO, LZE and LZE with forward pruning on the
            `carries` task).
        output_dir (`str` or `os.PathLike`, *optional*, defaults to `"outputs/demo"`):
            Where the results, figures and each run's prompt table / selection log go.
        figures (`bool`, *optional*, defaults to `True`):
            Also write the PNG figures.

    Returns:
        `dict[str, Any]`: the JSON-serialisable results (also written to `demo_results.json`).
    """
    return run_comparison(DemoConfig() if config is None else config, output_dir, figures=figures)


__all__ = [
    "AccuracyCallback",
    "DemoConfig",
    "MeteredLZEGRPOTrainer",
    "MethodSpec",
    "RunMeter",
    "WarmStartConfig",
    "count_parameters",
    "default_cache_dir",
    "default_methods",
    "default_warm_start",
    "greedy_accuracy",
    "load_warm_start",
    "lze_config",
    "pass_rate_histogram",
    "run_comparison",
    "run_demo",
    "run_method",
    "sampled_pass_rates",
    "train_warm_start",
]
