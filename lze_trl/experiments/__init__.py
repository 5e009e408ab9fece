r"""The experiment harness behind `lze-trl demo` and `lze-trl bench`: side-by-side training runs on an embedded task.

Every run starts from the same supervised warm start of a tiny Qwen2, trains with [`~lze_trl.LZEGRPOTrainer`] (metered
for tokens, FLOPs and time) and is evaluated by greedy decoding every few steps; the runs are then compared with a
baseline (accuracies, costs, time and FLOPs to the baseline's final accuracy).

The modules, each depending only on those above it:

- `warmstart`: the cached, deterministic warm start ([`WarmStartConfig`], [`load_warm_start`]) and its shipped weights.
- `config`: the settings of a comparison ([`DemoConfig`]) and of its runs ([`MethodSpec`]); [`lze_config`].
- `accuracy`: greedy accuracy and sampled pass rates (the generation routine of [`lze_trl.evaluation`]), the
  accuracy-recording callback.
- `accounting`: tokens, FLOPs and time of a run ([`MeteredLZEGRPOTrainer`]).
- `training`: the warm start and splits, the starting policy, one method trained ([`run_method`]).
- `statistics`: one run's figures against the baseline, ratios, the headline summary, the aggregate over seeds.
- `tables`: every table (the demo's text tables, the benchmarks' and the sweep's Markdown).
- `plots`: the PNG figures of a comparison.
- `comparison`: the methods side by side, written to `demo_results.json` ([`run_comparison`]).
- `overrides`: command-line run specs (`lze:selection_ratio=0.2`) and `key=value` overrides.
- `bench`: the comparison over seeds, the selection micro-benchmark.
- `sweep`: the selector-sweep report over `bench train` folders.
"""

from .accounting import MeteredLZEGRPOTrainer, RunMeter, count_parameters
from .accuracy import AccuracyCallback, greedy_accuracy, pass_rate_histogram, sampled_pass_rates
from .comparison import run_comparison
from .config import DemoConfig, MethodSpec, default_methods, default_warm_start, lze_config
from .training import run_method
from .warmstart import WarmStartConfig, default_cache_dir, load_warm_start, train_warm_start


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
    "run_method",
    "sampled_pass_rates",
    "train_warm_start",
]
