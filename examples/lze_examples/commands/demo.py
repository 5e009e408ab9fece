"""`lze-trl demo`: plain GRPO, LZE and LZE with forward pruning, trained for real on CPU from the same warm start.

The embedded task (column addition graded by its number of carries) and a tiny Qwen2 warm-started on it (weights
shipped with the package) need no download. The command prints the starting pass-rate histogram, a comparison table
and, at the end, the headline table (in-domain and OOD accuracy, cost ratios), and writes `demo_results.json` (with its
machine-readable `summary`) and PNG figures into `--output_dir` (`--output-dir` works too).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from lze_trl.commands import option


SUMMARY = "Train plain GRPO and LZE (and its variants) on the embedded CPU task and compare them."
"""The command's line in `lze-trl --help`."""

ONE_SEED_NOISE = (
    "One seed is noisy: over 5 seeds of this task (BENCHMARKS.md section 1, 240 steps), one seed's final accuracy "
    "was up to 0.028 from another's in-domain and up to 0.213 OOD (GRPO and LZE alike). Compare methods "
    "on the 5-seed numbers there and in the README, not on one run's ranking."
)
"""What the demo says of its one seed; `tests/benchmarks/test_adaptive_report.py` checks it against sections 1-3's
report."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lze-trl demo", description=__doc__)
    parser.add_argument(*option("output_dir"), default="outputs/demo", help="Where results and figures are written.")
    parser.add_argument("--steps", type=int, default=None, help="Optimizer steps per method (default: 120).")
    parser.add_argument("--seed", type=int, default=0, help="Training seed.")
    parser.add_argument(
        *option("eval_steps"), type=int, default=None, help="Evaluate every this many steps (default 10)."
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: the package's, which `lze-trl env` says)."
    )
    parser.add_argument(
        *option("cache_dir"),
        default=None,
        help="Warm-start cache root (default $LZE_TRL_CACHE/warmstart or ~/.cache).",
    )
    parser.add_argument(
        "--task",
        default="carries",
        choices=["carries", "arithmetic"],
        help="Embedded task: carries (default; column addition graded by its number of carries) or arithmetic (the "
        "first demo task, to reproduce older measurements).",
    )
    parser.add_argument("--tiny", action="store_true", help="A seconds-long smoke run of a very small model.")
    parser.add_argument(*option("no_prune"), action="store_true", help="Leave out the LZE + forward pruning run.")
    parser.add_argument(*option("no_figures"), action="store_true", help="Do not write the PNG figures.")
    parser.add_argument(*option("no_progress"), action="store_true", help="No progress bars.")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace):
    """The [`DemoConfig`] of the command-line arguments."""
    from lze_examples.demo import DemoConfig, default_warm_start

    if args.tiny:
        config = DemoConfig.tiny(task=args.task)
    else:
        config = DemoConfig(task=args.task, warm_start=default_warm_start(args.task))
    config.seed = args.seed
    config.progress = not args.no_progress and not args.tiny
    config.cache_dir = args.cache_dir
    if args.steps is not None:
        config.steps = args.steps
    if args.eval_steps is not None:
        config.eval_steps = args.eval_steps
    if args.threads is not None:
        config.torch_threads = args.threads
    else:  # the package's thread policy (lze_trl.common.engines.thread_policy)
        from lze_trl.common.engines import thread_policy

        config.torch_threads = thread_policy()[0]
    if args.no_prune:
        config.methods = [m for m in config.methods if not m.overrides.get("prune_solved")]
    return config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    from transformers.utils import logging

    from lze_examples.demo import run_demo
    from lze_examples.demo.tables import format_headline, format_histogram, format_table
    from lze_trl.method.errors import LZEWarning

    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("default", category=LZEWarning)  # what LZE's guards say stays loud
    config = build_config(args)
    figures = not args.no_figures
    print(f"lze-trl demo: {', '.join(m.name for m in config.methods)} on the {config.task} task; results go to "
          f"{os.path.abspath(args.output_dir)}")  # fmt: skip
    start = time.perf_counter()
    results = run_demo(config, args.output_dir, figures=figures)

    warm = results["warm_start"]
    state = results["start"]
    source = "loaded from cache" if warm["from_cache"] else f"trained in {warm['seconds']:.1f}s and cached"
    if warm.get("shipped"):
        source = "shipped with the package"
    print(f"\nWarm start ({source}: {warm['path']})")
    print("Starting pass rates of the training prompts (sampled, G rollouts each):")
    print(format_histogram(state["train_pass_rate_histogram"]))
    by_level = ", ".join(f"L{k}: {v:.2f}" for k, v in state["train_pass_rate_by_level"].items())
    print(f"  by level: {by_level}")
    # Say what was measured: the README's snippets grade other test sets (e.g. 200 prompts), with other accuracies.
    test_split = f'get_task("{config.task}").make_dataset({state["test_size"]}, seed={config.data_seed}, split="test")'
    print(
        f"Starting greedy accuracy: in-domain test {state['test_accuracy']:.3f} on {state['test_size']} held-out "
        f"prompts ({test_split}), OOD {state['ood_accuracy']:.3f} on {state['ood_size']} prompts, train prompts "
        f"{state['train_accuracy']:.3f} on the first {min(config.n_train_eval, config.n_train)}\n"
    )
    print(format_table(results))
    flop = results["flop_model"]
    print(
        f"\nN = {flop['num_params']:,} parameters ({flop['N']}); generation {flop['generation_flops_per_token']}, "
        f"update {flop['update_flops_per_token']}. Targets: the {results['baseline']} run's final accuracy."
    )
    for name, method in results["methods"].items():
        for message in method["warnings"]:
            print(f"{name} warned: {message}")
    print(f"\nHeadline (task {config.task}; also under `summary` in demo_results.json):")
    print(format_headline(results["summary"]))
    print(ONE_SEED_NOISE)
    load = results["machine"]["start"]["load_average"]
    figures = results.get("figures", {})
    print(
        f"\nWrote {os.path.join(args.output_dir, 'demo_results.json')}"
        + (f" and {len(figures)} figures" if figures else "")
        + f"; total {time.perf_counter() - start:.0f}s "
        f"on {results['machine']['start']['cpu_count']} CPUs (load average at start: {load})."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
