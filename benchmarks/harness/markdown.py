"""The benchmarks' Markdown: the training benchmark over seeds ([`bench_markdown`]), the selection micro-benchmark
([`selection_markdown`]) and the selector sweep ([`sweep_markdown`], [`level_markdown`]); each figure a mean ± sample
standard deviation over seeds ([`format_stat`]), laid out by `tabulate`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from lze_examples.demo.summary import RATIO_KEYS


def format_stat(stat: dict[str, Any], kind: str = "") -> str:
    """
    A mean ± sample standard deviation over seeds as a table cell.

    Args:
        stat (`dict`):
            `mean`, `std` and, from [`~benchmarks.harness.stats.seed_stats`], `n` (seeds with a value) and
            `values` (every seed's): a figure some seeds lack gets `[n/len(values) seeds]`.
        kind (`str`, *optional*, defaults to `""`):
            `"acc"` (3 decimals), `"share"` (2 decimals), `"s"` (seconds), `"ratio"` (`1.23 ± 0.04x`), `"pct"`
            (percent), else 3 significant digits (`"int"`, `"flops"`).
    """
    if stat["mean"] is None:
        return "n/a"
    mean, std = stat["mean"], stat["std"]
    # Figures that some seeds never reached: mean over the seeds that did, with how many those are.
    values = stat.get("values")
    missing = "" if values is None or stat["n"] == len(values) else f" [{stat['n']}/{len(values)} seeds]"
    if kind == "acc":
        return f"{mean:.3f} ± {std:.3f}{missing}"
    if kind == "share":
        return f"{mean:.2f} ± {std:.2f}{missing}"
    if kind == "s":
        return f"{mean:.1f} ± {std:.1f} s{missing}"
    if kind == "ratio":
        return f"{mean:.2f} ± {std:.2f}x{missing}"
    if kind == "pct":
        return f"{100 * mean:.2f} ± {100 * std:.2f}%{missing}"
    return f"{mean:.3g} ± {std:.2g}{missing}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: bool = False) -> list[str]:
    """Markdown table lines (`tabulate`'s GitHub layout); `right` right-aligns every column."""
    if right:
        text = tabulate(rows, header, tablefmt="pipe", colalign=["right"] * len(header), disable_numparse=True)
    else:
        text = tabulate(rows, header, tablefmt="github", disable_numparse=True)
    return text.split("\n")


BENCH_ROWS = (
    ("in-domain test acc, start", "start_test_accuracy", "acc"),
    ("in-domain test acc, final", "final_test_accuracy", "acc"),
    ("OOD acc, final", "final_ood_accuracy", "acc"),
    ("train-prompt acc, start", "start_train_accuracy", "acc"),
    ("train-prompt acc, final", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", "int"),
    ("update tokens / step", "update_tokens_per_step", "int"),
    ("update FLOPs", "update_flops", "flops"),
    ("total FLOPs", "total_flops", "flops"),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", "flops"),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", "flops"),
    ("selection share of step", "selection_share_of_step", "pct"),
    ("rollout tokens to target test acc", "reach_test_rollout_tokens", "int"),
    ("FLOPs to target test acc", "reach_test_flops", "flops"),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("utilisation (update / generated completion tokens)", "utilisation", "pct"),
    ("dead groups, whole run", "dead_share", "pct"),
    ("dead groups, last quarter", "dead_share_last_quarter", "pct"),
)


# `reach_test_seconds` was measured before it was shown: the table gained it with the two other test-target rows.
_SHOWN_WITH = {"reach_test_seconds": "reach_test_rollout_tokens"}


def bench_markdown(results: dict[str, Any]) -> str:
    """The training benchmark as Markdown: one column per method (mean ± std over seeds), then the ratios."""
    agg = results["aggregate"]
    names = list(agg)
    base = results["baseline"]
    lines = [
        f"Seeds: {results['seeds']}; {results['config']['steps']} steps x {results['config']['prompts_per_step']} "
        f"prompts x {results['config']['num_generations']} rollouts; baseline `{base}`; mean ± sample std over seeds.",
        "",
    ]
    # A row that older results do not carry (written before it was measured or shown) is left out, so that their
    # committed tables rebuild from their JSON (tests/benchmarks/test_bench_tables.py).
    rows = [
        [label, *[format_stat(agg[n]["summary"][key], kind) for n in names]]
        for label, key, kind in BENCH_ROWS
        if any(_SHOWN_WITH.get(key, key) in agg[n]["summary"] for n in names)
    ]
    lines += markdown_table(["metric", *[f"`{n}`" for n in names]], rows)
    others = [n for n in names if n != base]
    if others:
        lines += ["", f"Ratios to `{base}` (per seed, then mean ± std):", ""]
        keys = [key for key in RATIO_KEYS if any(key in agg[n]["ratios"] for n in others)]
        rows = [[key, *[format_stat(agg[n]["ratios"][key], "ratio") for n in others]] for key in keys]
        lines += markdown_table(["ratio", *[f"`{n}` / `{base}`" for n in others]], rows)
        if all("target_met" in agg[n] for n in others):  # results written before the issue-target verdict went
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


def selection_markdown(results: dict[str, Any]) -> str:
    """The selection micro-benchmark as Markdown."""
    step = results.get("step")
    lines = [
        f"Generation batch of {results['groups']} prompt groups drawn from a pool observed once; "
        f"{results['repeats']} batches per pool; times in ms (median / p90).",
        "",
    ]
    header = ["pool", "score + select_top_k", "+ record_selection", "state bytes / prompt", "state MB"]
    header += ["vs one demo step"] if step else []
    rows = []
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
        rows.append(cells)
    lines += markdown_table(header, rows, right=True)
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


SWEEP_COLUMNS = (
    ("test acc, final", "final_test_accuracy", "acc"),
    ("test acc, last {window} evals", "late_test_accuracy", "acc"),
    ("OOD acc, final", "final_ood_accuracy", "acc"),
    ("OOD gain", "ood_gain", "acc"),
    ("OOD acc, last {window} evals", "late_ood_accuracy", "acc"),
    ("train acc", "final_train_accuracy", "acc"),
    ("groups kept", "kept_share", "share"),
    ("dead groups", "dead_share", "share"),
    ("rollouts to {baseline}'s final test acc", "rollouts_to_base_test", "reach"),
    ("rollouts to {baseline}'s final OOD acc", "rollouts_to_base_ood", "reach"),
    ("update tokens / {baseline}", "update_tokens_ratio", "ratio"),
    ("total FLOPs / {baseline}", "total_flops_ratio", "ratio"),
    ("CPU time / {baseline}", "cpu_seconds_ratio", "ratio"),
    ("fresh rollouts / {baseline}", "fresh_rollouts_ratio", "ratio"),
)
"""Columns of the sweep table (labels formatted with the baseline's name and the late-accuracy window); `"reach"`
columns are means over the seeds that reached the baseline's final accuracy, with how many did."""


def sweep_markdown(rows: list[dict[str, Any]], baseline: str, window: int = 3) -> str:
    """The Table-2-style Markdown table of [`~benchmarks.harness.sweep.sweep_table`]'s rows (mean ± sample std over
    seeds)."""

    def cell(stat: dict[str, Any], kind: str, n: int) -> str:
        if kind != "reach":
            return format_stat(stat, kind)
        if stat.get("n", 0) == 0:
            return f"not reached (0/{n})"
        return format_stat(stat, "ratio") + ("" if stat["n"] == n else f" ({stat['n']}/{n} seeds)")

    header = ["run", *[label.format(baseline=baseline, window=window) for label, _, _ in SWEEP_COLUMNS]]
    cells = [
        [f"`{row['name']}`", *[cell(row[key], kind, len(row["seeds"])) for _, key, kind in SWEEP_COLUMNS]]
        for row in rows
    ]
    return "\n".join(markdown_table(header, cells))


def level_markdown(rows: list[dict[str, Any]]) -> str:
    """The per-level Markdown table of [`~benchmarks.harness.sweep.level_table`]'s rows: one column per in-domain
    level (`L<k>`) and OOD level (`L<k> (OOD)`)."""
    columns = list(rows[0]["levels"])
    labels = [f"L{c.split(':')[1]}" + (" (OOD)" if c.startswith("ood:") else "") for c in columns]

    def cell(row: dict[str, Any], column: str) -> str:
        stat = row["levels"][column]
        if not stat["n"]:
            return "n/a"
        return f"{stat['mean']:.3f}" if row["name"] == "start" else format_stat(stat, "acc")

    cells = [
        [row["name"] if row["name"] == "start" else f"`{row['name']}`"] + [cell(row, c) for c in columns]
        for row in rows
    ]
    return "\n".join(markdown_table(["run", *labels], cells))
