"""Every table of the experiments, in one format: the demo's comparison table and headline (aligned text), the
training and selection benchmarks and the selector sweep (Markdown).

A table is a row (or column) spec, `(label, key, kind)` triples, laid out by [`text_table`] or [`markdown_table`];
`kind` says how a figure is written: [`format_value`] for one run's figure, [`format_stat`] for a mean ± sample
standard deviation over seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .statistics import RATIO_KEYS


def format_value(value: Any, kind: str = "") -> str:
    """
    One figure as a table cell.

    Args:
        value (`Any`):
            The figure (`None`: `"n/a"`, or `"not reached"` for kind `"reach"`).
        kind (`str`, *optional*, defaults to `""`):
            `"acc"` (3 decimals), `"s"` (seconds), `"ratio"` and `"reach"` (`1.23x`), `"int"` (thousands separators),
            `"flops"` (3 significant digits), `"pct"` (a share as `12.34%`), `"pct0"` (a share as `12%`), else `str`.
    """
    if value is None:
        return "not reached" if kind == "reach" else "n/a"
    if kind == "acc":
        return f"{value:.3f}"
    if kind == "s":
        return f"{value:.1f}s"
    if kind in ("ratio", "reach"):
        return f"{value:.2f}x"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "flops":
        return f"{value:.3g}"
    if kind == "pct":
        return f"{100 * value:.2f}%"
    if kind == "pct0":
        return f"{value:.0%}"
    return str(value)


def format_stat(stat: dict[str, Any], kind: str = "") -> str:
    """
    A mean ± sample standard deviation over seeds as a table cell.

    Args:
        stat (`dict`):
            `mean`, `std` and, from [`~lze_trl.experiments.statistics.stats_over_seeds`], `n` (seeds with a value) and
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


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned plain-text lines: the first column left-aligned, the others right-aligned, a rule under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header), "  ".join("-" * w for w in widths), *[line(row) for row in rows]]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "---") -> list[str]:
    """Markdown table lines; `align` is every column's separator cell (`"---:"` right-aligns)."""
    line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return [line(header), "|" + f"{align}|" * len(header), *[line(row) for row in rows]]


TABLE_ROWS = (
    ("in-domain test acc (final)", "final_test_accuracy", "acc"),
    ("OOD acc (final)", "final_ood_accuracy", "acc"),
    ("train-prompt acc (final)", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", "int"),
    ("update tokens", "update_tokens", "int"),
    ("update tokens / step", "update_tokens_per_step", "int"),
    ("update FLOPs (6N/token)", "update_flops", "flops"),
    ("total FLOPs (+2N/rollout token)", "total_flops", "flops"),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("FLOPs to target test acc", "reach_test_flops", "flops"),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", "flops"),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", "flops"),
    ("selection share of step", "selection_share_of_step", "pct"),
)


def format_table(results: dict[str, Any]) -> str:
    """The demo's comparison table (one column per method, then one ratio column per non-baseline method)."""
    names = list(results["methods"])
    base = results["baseline"]
    others = [n for n in names if n != base]
    header = ["metric", *names, *[f"{n} / {base}" for n in others]]
    rows = []
    for label, key, kind in TABLE_ROWS:
        cells = [label]
        split = key.split("_")[1] if key.startswith(("reach_", "reach90_")) else None
        base_summary = results["methods"][base]["summary"]
        for name in names:
            value = results["methods"][name]["summary"].get(key)
            if split is not None and not base_summary.get(f"target_{split}_informative", True):
                cells.append("no gain")  # the baseline did not gain beyond the evaluation's noise
                continue
            cells.append(format_value(value, kind))
        for name in others:
            cells.append(
                format_value(results["methods"][name]["ratios"].get(key), "ratio") if key in RATIO_KEYS else ""
            )
        rows.append(cells)
    return "\n".join(text_table(header, rows))


HEADLINE_COLUMNS = (
    ("in-domain", "test_accuracy", "acc"),
    ("OOD", "ood_accuracy", "acc"),
    ("update tokens", "update_tokens_ratio", "ratio"),
    ("rollouts", "rollouts_ratio", "ratio"),
    ("total FLOPs", "total_flops_ratio", "ratio"),
    ("dead groups", "dead_share", "pct0"),
    ("rollouts to target", "rollouts_to_grpo_final", "reach"),
    ("FLOPs to target", "flops_to_grpo_final", "reach"),
)


def format_headline(summary: dict[str, Any]) -> str:
    """The headline table of a `summary` (see [`headline_summary`]): one row per method."""
    start = summary["start"]
    base = summary["baseline"]
    lines = [
        f"Start: {start['learning_zone_share']:.0%} of the training groups in the learning zone; greedy accuracy "
        f"in-domain {start['test_accuracy']:.3f} ({start['test_size']} prompts), OOD {start['ood_accuracy']:.3f} "
        f"({start['ood_size']} prompts).",
    ]
    header = ["method", *[label for label, _, _ in HEADLINE_COLUMNS]]
    rows = [
        [name, *[format_value(m[key], kind) for _, key, kind in HEADLINE_COLUMNS]]
        for name, m in summary["methods"].items()
    ]
    lines += text_table(header, rows)
    lines.append(
        f"Ratios are to {base}'s totals; 'to target' counts what a run spent until it first reached {base}'s final "
        "in-domain accuracy (mean of its last evaluations)."
    )
    return "\n".join(lines)


def format_histogram(hist: dict[str, Any]) -> str:
    total = max(sum(hist["counts"]), 1)
    lines = []
    for b, c in zip(hist["bins"], hist["counts"]):
        lines.append(f"  p={b:5.3f} {c:5d} {'#' * int(round(40 * c / total))}")
    lines.append(
        f"  never solved {hist['never_solved_frac']:.1%}, always solved {hist['always_solved_frac']:.1%}, "
        f"in the learning zone {hist['learning_zone_frac']:.1%}, mean pass rate {hist['mean']:.3f}"
    )
    return "\n".join(lines)


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
    rows = [[label, *[format_stat(agg[n]["summary"][key], kind) for n in names]] for label, key, kind in BENCH_ROWS]
    lines += markdown_table(["metric", *[f"`{n}`" for n in names]], rows)
    others = [n for n in names if n != base]
    if others:
        lines += ["", f"Ratios to `{base}` (per seed, then mean ± std):", ""]
        rows = [[key, *[format_stat(agg[n]["ratios"][key], "ratio") for n in others]] for key in RATIO_KEYS]
        lines += markdown_table(["ratio", *[f"`{n}` / `{base}`" for n in others]], rows)
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
    lines += markdown_table(header, rows, align="---:")
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
    ("rollouts / {baseline}", "rollouts_ratio", "ratio"),
)
"""Columns of the sweep table (labels formatted with the baseline's name and the late-accuracy window); `"reach"`
columns are means over the seeds that reached the baseline's final accuracy, with how many did."""


def sweep_markdown(rows: list[dict[str, Any]], baseline: str, window: int = 3) -> str:
    """The Table-2-style Markdown table of [`sweep_table`]'s rows (mean ± sample std over seeds)."""

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
    """The per-level Markdown table of [`~lze_trl.experiments.sweep.level_table`]'s rows: one column per in-domain
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
