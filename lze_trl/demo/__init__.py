"""The CPU demo and benchmarks: a cached warm start, accuracy evaluation, token/FLOP accounting, side-by-side runs."""

from .accounting import MeteredLZEGRPOTrainer, RunMeter, count_parameters
from .evaluation import AccuracyCallback, greedy_accuracy, pass_rate_histogram, sampled_pass_rates
from .runner import DemoConfig, MethodSpec, default_methods, run_demo, run_method
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
    "greedy_accuracy",
    "load_warm_start",
    "pass_rate_histogram",
    "run_demo",
    "run_method",
    "sampled_pass_rates",
    "train_warm_start",
]
