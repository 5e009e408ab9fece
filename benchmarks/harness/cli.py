"""`python benchmarks/bench.py`: the demo's runs with more steps and several seeds, and the selection
micro-benchmark.

`bench.py train` trains the chosen selectors side by side for each seed (same warm start, data and budget) and writes
`bench_train.json` / `bench_train.md` (mean and spread over seeds). `bench.py selection` times `LZERun.score` +
`LZERun.select` per generation batch on prompt pools of 1k, 100k and 1M prompts, their state memory per prompt, and
their share of a real demo training step. `bench.py all` runs both. `bench.py report DIR [DIR ...]` merges `train`
folders into the selector-sweep table and figure (`sweep.md`, `sweep.png`).

Multi-word flags take TRL's spelling, `--output_dir`, or the dashed one, `--output-dir`, like `lze-trl grpo`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings

from lze_examples.demo import DemoConfig, default_warm_start
from lze_examples.tasks import get_task
from lze_trl.commands import option
from lze_trl.method.guards import LZEWarning

from .markdown import bench_markdown, selection_markdown
from .selection import run_selection_bench
from .specs import parse_method, parse_overrides, parse_value
from .sweep import write_report
from .train import run_train_bench


DEFAULT_SELECTORS = ["grpo", "lze", "lze+prune"]


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(*option("output_dir"), default="outputs/bench", help="Where the JSON and Markdown files go.")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default 1).")
    parser.add_argument(*option("cache_dir"), default=None, help="Warm-start cache root.")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="A seconds-long smoke run: few prompts and steps from the demo's shipped warm start (on the carries "
        "task; a tiny model trained in seconds on arithmetic), whose prompts are in the learning zone.",
    )
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
        help="Runs to compare: any registered selector (none, lze, uniform, dapo, and the peers prefilter and "
        "softmax), `grpo` (= none), `lze+prune` or `reinforce_rej` (forward pruning on both sides after one dead "
        "group, no exploration, and dapo's filter), each optionally with "
        "`:key=value,...` overrides of its own (a peer's own settings, e.g. softmax:temperature=0.3, go to its "
        "selector_kwargs).",
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
    parser = argparse.ArgumentParser(prog="python benchmarks/bench.py", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    train = sub.add_parser("train", help="Training runs over several seeds and selectors.")
    _add_common(train)
    _add_train(train)
    selection = sub.add_parser("selection", help="Selection micro-benchmark.")
    _add_common(selection)
    _add_selection(selection)
    report = sub.add_parser("report", help="Sweep table and figure from `train` output folders.")
    report.add_argument("folders", nargs="+", help="Folders written by `python benchmarks/bench.py train`.")
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
    [`~benchmarks.harness.specs.parse_value`]), naming the fix on a bad key or value.
    """
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
    # The smoke run starts from the shipped warm start (loaded, not trained): most of its prompts are in the learning
    # zone, so every selector has groups to choose from and the prefilter prompts to keep. `DemoConfig.tiny()`'s own
    # model solves almost nothing after its seconds of warm start.
    tiny = DemoConfig.tiny(warm_start=default_warm_start("carries"))
    config = tiny if args.tiny else DemoConfig(steps=240, eval_steps=10)
    config.progress = not args.tiny
    config.cache_dir = args.cache_dir
    if args.threads is not None:
        config.torch_threads = args.threads
    # Runs are chosen with --selectors and the warm start with --warm; `--demo task=...` also picks that task's
    # warm start (before the --warm overrides).
    _assign(config, args.demo_overrides, "--demo", exclude=("methods", "warm_start", "overrides", "baseline"))
    if config.task != config.warm_start.task:
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
        try:
            report = write_report(args.folders, args.output_dir, window=args.window)
        except (FileNotFoundError, ValueError) as error:
            print(f"bench.py report: {error}", file=sys.stderr)
            return 2
        print(report["markdown"])
        print(f"Wrote sweep.md, sweep.json and sweep.png into {args.output_dir}/")
        return 0
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging

    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("default", category=LZEWarning)  # what LZE's guards say stays loud
    try:
        config = build_config(args)
    except ValueError as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 2
    if args.what in ("train", "all"):
        try:
            methods = [parse_method(spec) for spec in args.selectors]
            config.overrides = parse_overrides(args.overrides)
        except ValueError as error:
            print(f"bench.py: {error}", file=sys.stderr)
            return 2
        config.methods = methods
        config.baseline = args.baseline or methods[0].name
        if config.baseline not in [m.name for m in methods]:
            print(f"bench.py: --baseline {config.baseline!r} is not among {args.selectors}", file=sys.stderr)
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
