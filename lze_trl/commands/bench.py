"""`lze-trl bench`: the demo's runs with more steps and several seeds, and the selection micro-benchmark.

`lze-trl bench train` trains the chosen selectors side by side for each seed (same warm start, data and budget) and
writes `bench_train.json` / `bench_train.md` (mean and spread over seeds). `lze-trl bench selection` times
`EnergyScorer.score` + `select_top_k` per generation batch on prompt pools of 1k, 100k and 1M prompts, their state
memory per prompt, and their share of a real demo training step. `lze-trl bench all` runs both. `lze-trl bench
report DIR [DIR ...]` merges `bench train` folders into the selector-sweep table and figure (`sweep.md`, `sweep.png`).

Multi-word flags take TRL's spelling, `--output_dir`, or the dashed one, `--output-dir`, like `lze-trl grpo`.
"""

from __future__ import annotations

import argparse
import os
import sys

from lze_trl.commands import option


DEFAULT_SELECTORS = ["grpo", "lze", "lze+prune"]


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(*option("output_dir"), default="outputs/bench", help="Where the JSON and Markdown files go.")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default 1).")
    parser.add_argument(*option("cache_dir"), default=None, help="Warm-start cache root.")
    parser.add_argument("--tiny", action="store_true", help="A seconds-long smoke run (tiny model, few steps).")
    parser.add_argument(
        "--demo",
        dest="demo_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="DemoConfig field, e.g. --demo n_train=4096 --demo prompts_per_step=128 (repeatable).",
    )
    parser.add_argument(
        "--warm",
        dest="warm_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="WarmStartConfig field, e.g. --warm hidden_size=64 --warm steps=600 (repeatable).",
    )


def _add_train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="Training seeds.")
    parser.add_argument(
        "--selectors",
        nargs="+",
        default=DEFAULT_SELECTORS,
        help="Runs to compare: any registered selector (none, lze, uniform, dapo, reinforce_rej, prefilter, softmax, "
        "...), `grpo` (= none) or `lze+prune`, each optionally with `:key=value,...` overrides of its own.",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="LZEGRPOConfig override for every run, e.g. --set selection_ratio=0.2 (repeatable).",
    )
    parser.add_argument("--baseline", default=None, help="Run that sets targets and ratios (default: the first).")
    parser.add_argument("--steps", type=int, default=None, help="Optimizer steps per run (default: 240).")
    parser.add_argument(
        *option("eval_steps"), type=int, default=None, help="Evaluate every this many steps (default 10)."
    )


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        *option("pool_sizes"), type=int, nargs="+", default=[1_000, 100_000, 1_000_000], help="Prompt pool sizes."
    )
    parser.add_argument("--groups", type=int, default=512, help="Prompt groups per generation batch.")
    parser.add_argument("--repeats", type=int, default=50, help="Timed generation batches per pool.")
    parser.add_argument(
        *option("step_steps"), type=int, default=10, help="Demo training steps timed for the step share."
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lze-trl bench", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    train = sub.add_parser("train", help="Training runs over several seeds and selectors.")
    _add_common(train)
    _add_train(train)
    selection = sub.add_parser("selection", help="Selection micro-benchmark.")
    _add_common(selection)
    _add_selection(selection)
    report = sub.add_parser("report", help="Sweep table and figure from `bench train` output folders.")
    report.add_argument("folders", nargs="+", help="Folders written by `lze-trl bench train`.")
    report.add_argument(*option("output_dir"), default="outputs/sweep", help="Where sweep.md/.json/.png go.")
    report.add_argument(
        "--window", type=int, default=3, help="Evaluations averaged for the late test accuracy (default 3)."
    )
    both = sub.add_parser("all", help="Both.")
    _add_common(both)
    _add_train(both)
    _add_selection(both)
    return parser.parse_args(argv)


def _assign(obj, items: list[str], what: str, exclude: tuple[str, ...] = ()) -> None:
    """
    Sets `key=value` items on the dataclass `obj`, each value typed by its field like `--set` overrides (see
    [`~lze_trl.experiments.overrides.parse_value`]), naming the fix on a bad key or value.
    """
    import dataclasses

    from lze_trl.experiments.overrides import parse_value

    names = {f.name for f in dataclasses.fields(obj)} - set(exclude)
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in names:
            raise ValueError(f"{what} override {item!r}: use key=value with a key among {sorted(names)}.")
        try:
            value = parse_value(key, text, type(obj))
        except ValueError as error:
            raise ValueError(f"{what} override {item!r}: {error}") from None
        setattr(obj, key, value)


def build_config(args: argparse.Namespace):
    """The [`DemoConfig`] of the arguments: the demo's settings with the benchmark's longer runs."""
    from lze_trl.experiments import DemoConfig

    config = DemoConfig.tiny() if args.tiny else DemoConfig(steps=240, eval_steps=10)
    config.progress = not args.tiny
    config.cache_dir = args.cache_dir
    if args.threads is not None:
        config.torch_threads = args.threads
    # Runs are chosen with --selectors and the warm start with --warm; `--demo task=...` also picks that task's
    # warm start (before the --warm overrides).
    _assign(config, args.demo_overrides, "--demo", exclude=("methods", "warm_start", "overrides", "baseline"))
    if config.task != config.warm_start.task:
        from lze_trl.experiments import default_warm_start
        from lze_trl.tasks import get_task

        get_task(config.task)  # a clear error on an unknown task
        if args.tiny:
            config.warm_start = DemoConfig.tiny(task=config.task).warm_start
        else:
            config.warm_start = default_warm_start(config.task)
    _assign(config.warm_start, args.warm_overrides, "--warm")
    return config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.what == "report":
        from lze_trl.experiments.sweep import write_report

        try:
            report = write_report(args.folders, args.output_dir, window=args.window)
        except (FileNotFoundError, ValueError) as error:
            print(f"lze-trl bench report: {error}", file=sys.stderr)
            return 2
        print(report["markdown"])
        print(f"Wrote sweep.md, sweep.json and sweep.png into {args.output_dir}/")
        return 0
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    from transformers.utils import logging

    from lze_trl.experiments.bench import run_selection_bench, run_train_bench
    from lze_trl.experiments.overrides import parse_method, parse_overrides
    from lze_trl.experiments.tables import bench_markdown, selection_markdown

    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        config = build_config(args)
    except ValueError as error:
        print(f"lze-trl bench: {error}", file=sys.stderr)
        return 2
    if args.what in ("train", "all"):
        try:
            methods = [parse_method(spec) for spec in args.selectors]
            config.overrides = parse_overrides(args.overrides)
        except ValueError as error:
            print(f"lze-trl bench: {error}", file=sys.stderr)
            return 2
        config.methods = methods
        config.baseline = args.baseline or methods[0].name
        if config.baseline not in [m.name for m in methods]:
            print(f"lze-trl bench: --baseline {config.baseline!r} is not among {args.selectors}", file=sys.stderr)
            return 2
        if args.steps is not None:
            config.steps = args.steps
        if args.eval_steps is not None:
            config.eval_steps = args.eval_steps
        results = run_train_bench(config, args.seeds, args.output_dir)
        print(bench_markdown(results))
    if args.what in ("selection", "all"):
        pools = sorted({min(p, 5_000) for p in args.pool_sizes}) if args.tiny else args.pool_sizes
        results = run_selection_bench(
            pools,
            args.output_dir,
            groups=min(args.groups, 64) if args.tiny else args.groups,
            repeats=min(args.repeats, 5) if args.tiny else args.repeats,
            step_config=config,
            step_steps=2 if args.tiny else args.step_steps,
        )
        print(selection_markdown(results))
    print(f"Wrote the results into {args.output_dir}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
